"""Hostile and malformed import files (issue 16): each is refused whole with one error naming the file, the
record or line, and the field, or (a bad transcript line) quarantined alone and counted; never a traceback,
never stored as garbage, and a refused import leaves the store as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from lca.importers import ImportedSession, import_locomo, import_longmemeval, import_transcript_jsonl
from lca.substrate import Substrate
from lca.transcript import TranscriptConflictError, TranscriptStore, encode_entry
from lca.types import TranscriptEntry
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("existing", 1, "the original line")])
        yield s


def snapshot(s: Substrate) -> tuple:
    """What a refused import must not change: the session files' bytes, the entry and chunk counts."""
    counts = s.health().counts
    files = sorted((p.name, p.read_bytes()) for p in s.transcript.sessions_dir.glob("*.jsonl"))
    return files, counts["entries"], counts["chunks"], len(s.transcript.quarantine_records())


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


# ---- LoCoMo --------------------------------------------------------------------------------------------


def locomo(tmp_path: Path, conversation, *, name: str = "locomo.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps([{"sample_id": "conv-x", "conversation": conversation, "qa": []}]))
    return path


GOOD_SESSION = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lisbon."}]


def test_locomo_conversation_that_is_a_list_is_refused(tmp_path, store):
    before = snapshot(store)
    path = locomo(tmp_path, [GOOD_SESSION])
    with pytest.raises(RecordFormatError) as info:
        import_locomo(path)
    text = one_line(info.value)
    assert str(path) in text and "record 0 (sample_id 'conv-x')" in text
    assert info.value.field == "conversation" and "got list" in text
    assert snapshot(store) == before


def test_locomo_session_that_is_an_integer_is_refused(tmp_path):
    path = locomo(tmp_path, {"session_1": GOOD_SESSION, "session_2": 7})
    with pytest.raises(RecordFormatError) as info:
        import_locomo(path)
    assert info.value.field == "conversation.session_2" and "got int" in one_line(info.value)
    assert "record 0" in str(info.value)


def test_locomo_invalid_utf8_inside_a_string_names_its_line_and_field(tmp_path):
    path = tmp_path / "locomo.json"
    good = json.dumps([{"sample_id": "conv-x", "conversation": {"session_1": GOOD_SESSION}}], indent=1)
    path.write_bytes(good.encode().replace(b"Lisbon", b"Lis\xffbon"))
    with pytest.raises(RecordFormatError) as info:
        import_locomo(path)
    text = one_line(info.value)
    assert "not valid UTF-8" in text and "0xff" in text
    expected_line = good[: good.index("Lisbon")].count("\n") + 1
    assert info.value.line == expected_line and f"line {expected_line}" in text
    assert info.value.field == "[0].conversation.session_1[0].text"


def test_locomo_text_that_is_an_object_is_refused_not_stored_as_its_repr(tmp_path, store):
    before = snapshot(store)
    turns = [*GOOD_SESSION, {"speaker": "Bob", "dia_id": "D1:2", "text": {"caption": "a photo"}}]
    path = locomo(tmp_path, {"session_1": turns})
    with pytest.raises(RecordFormatError) as info:
        import_locomo(path)
    assert info.value.field == "conversation.session_1[1].text" and "must be a string, got dict" in str(info.value)
    assert snapshot(store) == before


def test_locomo_speaker_and_meta_values_follow_the_write_rules(tmp_path):
    with pytest.raises(RecordFormatError) as info:
        import_locomo(locomo(tmp_path, {"session_1": [{"speaker": ["Ann"], "text": "hi"}]}))
    assert info.value.field == "conversation.session_1[0].speaker"
    nan = tmp_path / "nan.json"
    nan.write_text('[{"sample_id": "conv-x", "conversation": {"session_1": [{"text": "hi", "score": NaN}]}}]')
    with pytest.raises(RecordFormatError, match="non-finite") as info:
        import_locomo(nan)
    assert info.value.field == "conversation.session_1[0].score"


def test_locomo_turn_over_the_entry_bound_is_refused(tmp_path):
    path = locomo(tmp_path, {"session_1": [{"speaker": "Ann", "text": "x" * 2000}]})
    with pytest.raises(RecordFormatError, match="over the bound of 1,000 bytes") as info:
        import_locomo(path, max_entry_bytes=1000)
    assert info.value.field == "conversation.session_1[0].text"
    sessions, _ = import_locomo(path)  # the default bound (1 MiB) takes it
    assert len(sessions[0].entries[0].content) == 2000


# ---- LongMemEval ---------------------------------------------------------------------------------------


def lme_record(**overrides):
    record = {
        "question_id": "q1",
        "question": "?",
        "answer": "a",
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00"],
        "haystack_sessions": [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]],
    }
    record.update(overrides)
    return record


def lme(tmp_path: Path, records) -> Path:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(records))
    return path


def test_longmemeval_record_that_is_an_integer_is_refused(tmp_path, store):
    before = snapshot(store)
    path = lme(tmp_path, [lme_record(), 5])
    with pytest.raises(RecordFormatError) as info:
        import_longmemeval(path)
    text = one_line(info.value)
    assert str(path) in text and "record 1" in text and "expected a question object, got int" in text
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"question_id": ["q1"]}, "question_id"),
        ({"question_id": True}, "question_id"),
        ({"haystack_session_ids": 3}, "haystack_session_ids"),
        ({"haystack_session_ids": [{"id": "s1"}]}, "haystack_session_ids[0]"),
        ({"haystack_dates": [None]}, "haystack_dates[0]"),
        ({"haystack_sessions": ["not turns"]}, "haystack_sessions[0]"),
    ],
)
def test_longmemeval_ids_and_haystacks_of_the_wrong_type_are_refused(tmp_path, overrides, field):
    with pytest.raises(RecordFormatError) as info:
        import_longmemeval(lme(tmp_path, [lme_record(**overrides)]))
    assert info.value.field == field and "record 0" in one_line(info.value)


def test_longmemeval_content_that_is_an_integer_is_refused(tmp_path, store):
    before = snapshot(store)
    turns = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": 42}]]
    with pytest.raises(RecordFormatError) as info:
        import_longmemeval(lme(tmp_path, [lme_record(haystack_sessions=turns)]))
    assert info.value.field == "haystack_sessions[0][1].content" and "got int" in one_line(info.value)
    assert "record 0 (question 'q1')" in str(info.value)
    assert snapshot(store) == before


def test_longmemeval_turn_with_an_unknown_role_is_skipped_and_counted(tmp_path):
    turns = [[{"role": "user", "content": "hi"}, {"role": "system", "content": "be nice"}]]
    sessions, report = import_longmemeval(lme(tmp_path, [lme_record(haystack_sessions=turns)]))
    assert [e.content for e in sessions[0].entries] == ["hi"]
    assert len(report.unparsed) == 1 and "turn 1: bad role" in report.unparsed[0]


# ---- our transcript JSONL ------------------------------------------------------------------------------


def wire_line(entry: TranscriptEntry, **changes) -> bytes:
    wire = entry.to_wire()
    wire.update(changes)
    return (json.dumps(wire) + "\n").encode()  # ensure_ascii: a lone surrogate is written as its escape


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_each_bad_transcript_line_is_quarantined_alone_and_counted(tmp_path, store):
    path = tmp_path / "harness.jsonl"
    lines = [
        encode_entry(make_entry("h", 1)),  # 1: good
        wire_line(make_entry("h", 2), content="broken \ud800 text"),  # 2: lone surrogate
        encode_entry(make_entry("h", 3, meta={"nest": deep(100)})),  # 3: decodes, too deep to store
        b'{"meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",  # 4: too deep even to decode
        encode_entry(make_entry("s" * 300, 5)),  # 5: session id too long for a file name
        wire_line(make_entry("h", 6), v=True),  # 6: a bool is not a version
        encode_entry(make_entry("h", 7, meta={"score": float("nan")})),  # 7: bare NaN on the wire
        wire_line(make_entry("h", 8), meta={"\ud800key": 1}),  # 8: lone surrogate in a key
        encode_entry(make_entry("h", 9)),  # 9: good
    ]
    assert b"NaN" in lines[6] and b"\\ud800" in lines[1]
    path.write_bytes(b"".join(lines))
    sessions, report, rejected = import_transcript_jsonl(path)
    assert [e.id for s in sessions for e in s.entries] == ["h:1", "h:9"]
    reasons = {line: reason for line, reason, _ in rejected}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 8]
    expected = {
        2: ("field 'content'", "lone surrogate"),
        3: ("field 'meta.nest.a.a", "nested more than 32 levels deep"),
        4: ("line 4, field 'meta'", "nested too deeply to decode"),
        5: ("field 'session_id'", "too long: 300 characters"),
        6: ("field 'v'", "unsupported wire version True"),
        7: ("field 'meta.score'", "non-finite number nan"),
        8: ("field 'meta", "lone surrogate"),
    }
    for line, (where, why) in expected.items():
        assert reasons[line].startswith(f"{path}, line {line}") and where in reasons[line] and why in reasons[line]
        assert "\n" not in reasons[line] and "\ud800" not in reasons[line]
    assert report.unparsed == [reason for _, reason, _ in rejected]

    entries_before = snapshot(store)[1]
    out = store.import_sessions(sessions, report, rejected=rejected)
    assert out.entries_appended == 2 and out.quarantined_lines == 7
    records = [r for r in store.transcript.quarantine_records() if r.session_file == "harness.jsonl"]
    assert sorted(r.line for r in records) == [2, 3, 4, 5, 6, 7, 8]
    kept = {r.line: (store.transcript.quarantine_dir / r.quarantine_file).read_bytes() for r in records}
    assert kept[2] == lines[1] and kept[7] == lines[6]  # verbatim
    assert snapshot(store)[1] == entries_before + 2
    assert store.health().healthy


def test_control_and_bidi_characters_are_stored_verbatim(tmp_path, store):
    content = "red \x1b[31mALERT\x1b[0m \u202eevil\u202c tab\t bell\x07 nul\x00 sep\u2028end"
    path = tmp_path / "harness.jsonl"
    path.write_bytes(encode_entry(make_entry("h", 1, content, meta={"note": "\u2066x\u2069"})))
    sessions, report, rejected = import_transcript_jsonl(path)
    assert not rejected
    store.import_sessions(sessions, report)
    (entry,) = store.transcript.read("h").entries
    assert entry.content == content and entry.meta == {"note": "\u2066x\u2069"}


def test_an_entry_over_the_configured_bound_is_quarantined_without_being_decoded(tmp_path, store):
    path = tmp_path / "harness.jsonl"
    big = encode_entry(make_entry("h", 2, "x" * 5000))
    path.write_bytes(encode_entry(make_entry("h", 1)) + big + encode_entry(make_entry("h", 3)))
    sessions, report, rejected = import_transcript_jsonl(path, max_entry_bytes=1000)
    assert [e.id for s in sessions for e in s.entries] == ["h:1", "h:3"]
    ((line, reason, raw),) = rejected
    assert line == 2 and raw == big
    assert f"{path}, line 2, field 'content'" in reason and "over the bound of 1,000 bytes" in reason
    out = store.import_sessions(sessions, report, rejected=rejected)
    assert out.entries_appended == 2 and out.quarantined_lines == 1
    sessions, _, rejected = import_transcript_jsonl(path)  # the default bound (1 MiB) takes it
    assert not rejected and len(sessions[0].entries) == 3


def test_a_stored_line_with_a_lone_surrogate_or_bool_version_is_quarantined_on_read(tmp_path):
    transcript = TranscriptStore(tmp_path)
    transcript.append([make_entry("s", 1)])
    path = transcript.session_path("s")
    with open(path, "ab") as handle:
        handle.write(wire_line(make_entry("s", 2), content="\udc80"))
        handle.write(wire_line(make_entry("s", 3), v=True))
    read = TranscriptStore(tmp_path).read("s")
    assert [e.id for e in read.entries] == ["s:1"]
    assert [(r.line, "lone surrogate" in r.reason or "version" in r.reason) for r in read.malformed] == [
        (2, True),
        (3, True),
    ]


# ---- live appends meet the same write rules ------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, field",
    [
        (make_entry("s", 1, meta={"score": float("inf")}), "meta.score"),
        (make_entry("s", 1, meta={"nest": deep(40)}), "meta.nest"),
        (make_entry("s", 1, "a \ud800 b"), "content"),
        (make_entry("é" * 100, 1), "session_id"),
        (make_entry("s", 1, meta={"when": object()}), "meta.when"),
    ],
)
def test_a_live_append_that_breaks_the_write_rules_writes_nothing(store, entry, field):
    before = snapshot(store)
    with pytest.raises(RecordFormatError) as info:
        store.append([make_entry("other", 1), entry])
    assert (info.value.field or "").startswith(field)
    one_line(info.value)
    assert snapshot(store) == before


# ---- conflicts: all or nothing -------------------------------------------------------------------------


def test_an_import_that_hits_a_conflicting_line_appends_nothing(tmp_path, store):
    before = snapshot(store)
    path = tmp_path / "harness.jsonl"
    path.write_bytes(
        encode_entry(make_entry("fresh", 1))
        + b"garbage\n"
        + encode_entry(make_entry("existing", 1, "a different line"))
        + encode_entry(make_entry("fresh", 2))
    )
    sessions, report, rejected = import_transcript_jsonl(path)
    with pytest.raises(TranscriptConflictError) as info:
        store.import_sessions(sessions, report, rejected=rejected)
    text = one_line(info.value)
    assert text.startswith(f"{path}, line 3, field 'id': entry 'existing:1' is already recorded")
    assert "nothing was imported" in text
    assert snapshot(store) == before  # no session appended, nothing quarantined
    assert not store.transcript.session_path("fresh").exists()


def test_an_import_that_repeats_an_id_with_different_content_appends_nothing(tmp_path, store):
    before = snapshot(store)
    path = tmp_path / "harness.jsonl"
    path.write_bytes(encode_entry(make_entry("new", 1, "one")) + encode_entry(make_entry("new", 1, "two")))
    sessions, report, rejected = import_transcript_jsonl(path)
    with pytest.raises(TranscriptConflictError, match="line 2, field 'id'.*earlier in the same import"):
        store.import_sessions(sessions, report, rejected=rejected)
    assert snapshot(store) == before


def test_a_conflict_in_a_later_benchmark_session_leaves_the_earlier_ones_unwritten(store):
    before = snapshot(store)
    sessions = [
        ImportedSession("a", (make_entry("a", 1),)),
        ImportedSession("existing", (make_entry("existing", 1, "rewritten"),)),
    ]
    with pytest.raises(TranscriptConflictError, match="'existing:1'"):
        store.import_sessions(sessions)
    assert snapshot(store) == before
    out = store.import_sessions(sessions[:1])  # the store is still usable and consistent
    assert out.entries_appended == 1 and out.entries_indexed == 1
    assert store.health().healthy
