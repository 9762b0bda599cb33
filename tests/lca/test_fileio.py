"""Durable file primitives: appends, atomic replaces, and an advisory lock that names its holder."""

from __future__ import annotations

import os

import pytest

from lca.errors import StoreLockedError
from lca.fileio import append_bytes, atomic_write_bytes, exclusive_lock


def test_appends_create_the_folder_and_add_to_the_end(tmp_path):
    log = tmp_path / "events" / "log.jsonl"
    append_bytes(log, b"one\n")
    append_bytes(log, b"two\n", durable=False)
    assert log.read_bytes() == b"one\ntwo\n"


def test_an_atomic_write_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "file.json"
    atomic_write_bytes(path, b"old and longer")
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in path.parent.iterdir()] == ["file.json"]


def test_a_held_lock_makes_the_next_holder_fail_naming_the_pid_then_is_released(tmp_path):
    lock = tmp_path / "write.lock"
    with exclusive_lock(lock, what="the test store"):
        assert lock.read_text() == str(os.getpid())
        held = rf"the test store is locked by another writer \(pid {os.getpid()}\)"
        with pytest.raises(StoreLockedError, match=held):
            with exclusive_lock(lock, timeout=0.05, what="the test store"):
                pass
    with exclusive_lock(lock, timeout=0.05):  # released on exit
        pass
