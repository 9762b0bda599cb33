"""Durable file primitives: appends, atomic replaces, and an advisory lock that names its holder."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lca.errors import StoreLockedError
from lca.fileio import append_bytes, atomic_write_bytes, exclusive_lock, json_records, lines_backwards


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


@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    torn=st.binary(max_size=9).map(lambda b: b.replace(b"\n", b"")),
    block=st.integers(min_value=1, max_value=7),
)
def test_lines_read_backwards_are_the_complete_lines_in_reverse_at_any_block_size(tmp_path_factory, lines, torn, block):
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)  # a torn tail is no line yet
    assert list(lines_backwards(path, block=block)) == [line for line in reversed(lines) if line]


def test_the_cycle_reads_the_recall_log_back_only_to_the_last_cycle(tmp_path, monkeypatch):
    """A long-running agent's recall log grows by a record a recall; a cycle reads only what came after the last
    one (and the slack before it), so a broken or huge old part is never parsed."""
    import json

    from lca.consolidation import cycle

    log = tmp_path / "recall.jsonl"
    injected = {"source": "memory:new-rule[0:10]", "injected": True}
    old = {"source": "memory:old-rule[0:10]", "injected": True}
    records = [json.dumps({"at": 1000.0 + n, "candidates": [old]}) for n in range(50)]
    records += [json.dumps({"at": 5000.0, "candidates": [injected, {"source": "memory:skip", "injected": False}]})]
    log.write_text("not json at all\n" + "\n".join(records) + "\n")
    parsed: list[bytes] = []
    real = cycle.json.loads
    monkeypatch.setattr(cycle.json, "loads", lambda line: parsed.append(line) or real(line))
    assert cycle.Consolidator._injected_since(log, since=4000.0) == {"new-rule"}
    assert len(parsed) == 2  # the new record and the first one older than the slack: the rest is never read
    parsed.clear()
    assert cycle.Consolidator._injected_since(log, since=1040.0) == {"old-rule", "new-rule"}


def test_json_records_reads_complete_lines_and_skips_what_does_not_decode(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id": "a"}\nnot json\n{"id": "b"}\n{"id": "torn')
    assert list(json_records(path, path.stat().st_size)) == [{"id": "a"}, {"id": "b"}]
    assert list(json_records(path, 12)) == [{"id": "a"}]  # only the first size bytes are read
    assert list(json_records(path, path.stat().st_size, holding=b'"b"')) == [{"id": "b"}]


def test_a_reentrant_taker_nests_in_its_own_threads_lock_and_another_thread_waits(tmp_path):
    lock = tmp_path / "write.lock"
    waited: list[BaseException] = []

    def other_thread() -> None:
        try:
            with exclusive_lock(lock, timeout=0.05, reentrant=True):
                pass
        except StoreLockedError as exc:
            waited.append(exc)

    with exclusive_lock(lock):
        with exclusive_lock(lock, timeout=0.05, reentrant=True):  # a transcript append inside a writer's lock
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join()
        with pytest.raises(StoreLockedError):  # a plain taker is another writer, even in this thread
            with exclusive_lock(lock, timeout=0.05):
                pass
    assert len(waited) == 1
    with exclusive_lock(lock, timeout=0.05, reentrant=True):  # released: taken afresh
        pass


def test_a_lock_file_that_is_a_link_is_refused_not_truncated(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "write.lock").symlink_to(outside)
    with pytest.raises(OSError):
        with exclusive_lock(tmp_path / "store" / "write.lock", timeout=0.05):
            pass
    assert outside.read_text() == "keep me"
