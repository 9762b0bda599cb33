from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lca.errors import RecordFormatError
from lca.transcript import TranscriptConflictError, TranscriptStore, encode_entry, entry_from_wire
from lca.types import EntryKind
from tests.conftest import make_entry

REPO = Path(__file__).resolve().parents[2]


def test_append_read_roundtrip_keeps_every_field(tmp_path):
    store = TranscriptStore(tmp_path)
    entries = [
        make_entry("s1", 1, "hello", channel="cli", author="user"),
        make_entry("s1", 2, "thinking...", kind=EntryKind.REASONING, parent_id="s1:1"),
        make_entry("s1", 3, "ran ls", kind=EntryKind.SUBAGENT_TURN, subagent_id="sub-7", meta={"tool": "ls"}),
    ]
    result = store.append(entries)
    assert len(result.appended) == 3
    read = store.read("s1")
    assert read.entries == tuple(entries)
    assert read.malformed == ()
    lines = store.session_path("s1").read_text().splitlines()
    assert json.loads(lines[2])["subagent_id"] == "sub-7"
    assert json.loads(lines[0])["hash"] == entries[0].content_hash


def test_entries_of_one_kind_are_what_a_scan_finds_and_an_append_is_seen_at_the_next_ask(tmp_path, monkeypatch):
    store = TranscriptStore(tmp_path)
    handoff = EntryKind.HANDOFF
    store.append([make_entry("s1", 1, "hi"), make_entry("s1", 2, "{}", kind=handoff), make_entry("s2", 1, "more")])
    assert store.entries_of_kind(handoff) == [e for e in store.iter_entries() if e.kind is handoff]
    reads: list[str] = []
    read = store.read
    monkeypatch.setattr(store, "read", lambda session_id, **kw: reads.append(session_id) or read(session_id, **kw))
    assert [e.id for e in store.entries_of_kind(handoff)] == ["s1:2"] and reads == []  # nothing changed: no reads
    store.append([make_entry("s2", 2, "{}", kind=handoff)])
    assert [e.id for e in store.entries_of_kind(handoff)] == ["s1:2", "s2:2"] and reads == ["s2"]  # the grown one


def test_session_ids_with_unsafe_characters_roundtrip(tmp_path):
    store = TranscriptStore(tmp_path)
    odd = "locomo:conv-26/session 1?x"
    store.append([make_entry(odd, 1)])
    assert store.session_ids() == [odd]
    assert store.read(odd).entries[0].session_id == odd


def test_duplicate_append_is_a_noop_and_conflict_is_refused(tmp_path):
    store = TranscriptStore(tmp_path)
    store.append([make_entry("s", 1), make_entry("s", 2)])
    again = TranscriptStore(tmp_path).append([make_entry("s", 1), make_entry("s", 2), make_entry("s", 3)])
    assert [e.id for e in again.appended] == ["s:3"]
    assert again.duplicates == 2
    with pytest.raises(TranscriptConflictError, match="never rewritten"):
        store.append([make_entry("s", 2, "different words")])
    assert len(store.read("s").entries) == 3


def test_subagent_turn_requires_subagent_id(tmp_path):
    with pytest.raises(RecordFormatError, match="subagent_id"):
        TranscriptStore(tmp_path).append([make_entry("s", 1, kind=EntryKind.SUBAGENT_TURN)])


def test_torn_tail_is_quarantined_and_acknowledged_entries_survive(tmp_path):
    store = TranscriptStore(tmp_path)
    store.append([make_entry("s", 1), make_entry("s", 2)])
    path = store.session_path("s")
    good = path.read_bytes()
    torn = encode_entry(make_entry("s", 3))[:-9]
    with open(path, "ab") as handle:
        handle.write(torn)
    fresh = TranscriptStore(tmp_path)
    assert [e.id for e in fresh.read("s").entries] == ["s:1", "s:2"]  # readers never see the torn bytes
    record = fresh.recover("s")
    assert record is not None and record.size == len(torn) and record.offset == len(good)
    assert path.read_bytes() == good
    assert (tmp_path / "quarantine" / record.quarantine_file).read_bytes() == torn
    assert fresh.quarantine_records()[0].sha256 == record.sha256
    fresh.append([make_entry("s", 3)])
    assert [e.id for e in fresh.read("s").entries] == ["s:1", "s:2", "s:3"]


def test_malformed_middle_line_is_quarantined_not_dropped(tmp_path):
    store = TranscriptStore(tmp_path)
    store.append([make_entry("s", 1)])
    path = store.session_path("s")
    wire = make_entry("s", 9).to_wire()
    wire["content"] = "tampered"  # the hash no longer matches
    with open(path, "ab") as handle:
        handle.write(b"{not json\n" + (json.dumps(wire) + "\n").encode())
    store.append([make_entry("s", 2)])
    read = TranscriptStore(tmp_path).read("s")
    assert [e.id for e in read.entries] == ["s:1", "s:2"]
    assert [m.line for m in read.malformed] == [2, 3]
    assert "not valid JSON" in read.malformed[0].reason
    assert "hash" in read.malformed[1].reason and "line 3" in read.malformed[1].reason
    assert (tmp_path / "quarantine" / read.malformed[0].quarantine_file).read_bytes() == b"{not json\n"
    assert b"{not json" in path.read_bytes()  # the authority is never rewritten
    # reading again does not duplicate quarantine records
    TranscriptStore(tmp_path).read("s")
    assert len(TranscriptStore(tmp_path).quarantine_records()) == 2


def test_wire_errors_name_the_field():
    wire = make_entry("s", 1).to_wire()
    for field, value, needle in [
        ("kind", "shout", "unknown kind"),
        ("ts", 5, "must be a string"),
        ("v", 2, "unsupported wire version"),
        ("extra", 1, "unknown field"),
    ]:
        bad = dict(wire, **{field: value})
        with pytest.raises(RecordFormatError) as info:
            entry_from_wire(bad, path="f.jsonl", line=4)
        assert info.value.field == field and needle in str(info.value) and "f.jsonl, line 4" in str(info.value)


@pytest.mark.parametrize("trial", range(24))
def test_sigkill_mid_append_loses_no_acknowledged_entry(tmp_path, trial):
    rng = random.Random(trial)
    child = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "helpers" / "append_child.py"),
            str(tmp_path),
            "crash-session",
            str(trial),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3 + rng.random() * 0.5)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    acknowledged = out.split()
    store = TranscriptStore(tmp_path)
    path = store.session_path("crash-session")
    if not path.exists():
        assert acknowledged == []
        return
    raw = path.read_bytes()
    torn_expected = len(raw) - (raw.rfind(b"\n") + 1)
    record = store.recover("crash-session")
    assert (record.size if record else 0) == torn_expected
    if record:
        assert (tmp_path / "quarantine" / record.quarantine_file).read_bytes() == raw[len(raw) - torn_expected :]
    read = store.read("crash-session")
    ids = [e.id for e in read.entries]
    assert read.malformed == ()
    assert ids[: len(acknowledged)] == acknowledged  # every acknowledged entry, in order
    assert len(ids) - len(acknowledged) <= 1  # at most one written but not yet acknowledged


line_strategy = st.one_of(
    st.binary(max_size=80).filter(lambda b: b"\n" not in b),
    st.dictionaries(
        st.sampled_from(["v", "id", "session_id", "kind", "ts", "content", "hash", "meta", "x"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=2)),
        max_size=9,
    ).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    junk=st.lists(line_strategy, min_size=1, max_size=6), positions=st.lists(st.integers(0, 3), min_size=6, max_size=6)
)
def test_malformed_lines_never_crash_the_reader_and_are_all_accounted(tmp_path_factory, junk, positions):
    root = tmp_path_factory.mktemp("fuzz")
    good = [make_entry("f", n) for n in range(1, 4)]
    lines = [encode_entry(e) for e in good]
    for blob, pos in zip(junk, positions):
        lines.insert(min(pos, len(lines)), blob + b"\n")
    store = TranscriptStore(root)
    store.sessions_dir.mkdir(parents=True)
    store.session_path("f").write_bytes(b"".join(lines))
    read = store.read("f")
    assert [e.id for e in read.entries if e.id.startswith("f:")][:3] == ["f:1", "f:2", "f:3"]
    nonblank = [ln for ln in lines if ln.strip()]
    assert len(read.entries) + len(read.malformed) == len(nonblank)
    for record in read.malformed:
        assert record.line is not None and record.reason
        assert (root / "quarantine" / record.quarantine_file).exists()
