from __future__ import annotations

import gzip
import json
import lzma
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from lca.importers import (
    ImportedSession,
    history_end,
    import_locomo,
    import_longmemeval,
    import_transcript_jsonl,
    load_official_json,
)
from lca.substrate import Substrate
from lca.transcript import encode_entry
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "locomo_fixture.json"


def test_real_locomo_conversation_imports_every_turn_in_order(locomo_file):
    sessions, report = import_locomo(locomo_file, sample_ids=["conv-26"])
    data = {r["sample_id"]: r for r in json.loads(locomo_file.read_text())}
    conv = data["conv-26"]["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if k.startswith("session_") and not k.endswith("date_time"))
    assert [s.session_id for s in sessions] == [f"locomo:conv-26:session_{n}" for n in numbers]
    assert report.entries == sum(len(conv[f"session_{n}"]) for n in numbers) == 419
    assert report.repaired["locomo_date_keys_without_session"] == 16  # 35 date keys, 19 sessions
    first = sessions[0].entries[0]
    assert first.meta["dia_id"] == "D1:1" and first.author == conv["session_1"][0]["speaker"]
    assert first.timestamp == "2023-05-08T13:56:00"
    assert all(b.parent_id == a.id for s in sessions for a, b in zip(s.entries, s.entries[1:]))


def test_all_of_locomo_counts_match_the_data_card(locomo_file):
    sessions, report = import_locomo(locomo_file)
    assert report.sessions == 272 and report.entries == 5882
    assert not report.unparsed


def test_a_historys_end_is_its_latest_readable_entry_time():
    sessions, _ = import_locomo(FIXTURE)
    assert history_end(sessions) == datetime(2024, 3, 21, 18, 45) and history_end(sessions[:1]) < history_end(sessions)
    mixed = ImportedSession(
        "s",
        (
            make_entry("s", 1, timestamp="2026-01-02T09:00:00+02:00"),  # 07:00 UTC
            make_entry("s", 2, timestamp="2026-01-02T08:00:00"),  # naive: read as UTC, so the latest
            make_entry("s", 3, timestamp="not a time"),
        ),
    )
    assert history_end([mixed]) == datetime(2026, 1, 2, 8, 0)
    assert history_end([]) is None


def test_locomo_unknown_sample_is_refused_with_the_known_ones(locomo_file):
    with pytest.raises(RecordFormatError, match="no conversation with sample_id conv-999") as info:
        import_locomo(locomo_file, sample_ids=["conv-999"])
    assert "conv-26" in str(info.value) and info.value.field == "sample_id"


def test_longmemeval_haystack_becomes_ordered_sessions_with_official_turn_ids(longmemeval_oracle):
    data = load_official_json(longmemeval_oracle)
    record = data[0]
    sessions, report = import_longmemeval(longmemeval_oracle, question_ids=[record["question_id"]])
    assert report.sessions == len(record["haystack_session_ids"])
    assert {s.session_id for s in sessions} == {
        f"lme:{record['question_id']}:{sid}" for sid in record["haystack_session_ids"]
    }
    stamps = [s.entries[0].timestamp for s in sessions]
    assert stamps == sorted(stamps)
    by_sid = dict(zip(record["haystack_session_ids"], record["haystack_sessions"]))
    for session in sessions:
        turns = by_sid[session.entries[0].meta["haystack_session_id"]]
        assert [e.content for e in session.entries] == [t["content"] for t in turns]
        assert [e.kind for e in session.entries] == [
            EntryKind.USER_TURN if t["role"] == "user" else EntryKind.ASSISTANT_TURN for t in turns
        ]
        sid = session.entries[0].meta["haystack_session_id"]
        assert [e.meta["turn_id"] for e in session.entries] == [f"{sid}_{i + 1}" for i in range(len(turns))]
        assert [e.meta.get("has_answer") for e in session.entries] == [t.get("has_answer") for t in turns]


def test_longmemeval_reorders_unsorted_dates_and_counts_it(tmp_path):
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "?",
        "answer": 3,
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["late", "early"],
        "haystack_dates": ["2023/05/30 (Tue) 20:00", "2023/05/30 (Tue) 09:15"],
        "haystack_sessions": [
            [{"role": "user", "content": "b"}],
            [{"role": "user", "content": "a", "has_answer": True}],
        ],
        "answer_session_ids": ["early"],
    }
    path = tmp_path / "lme.json.xz"
    with lzma.open(path, "wt") as handle:
        json.dump([record], handle)
    sessions, report = import_longmemeval(path)
    assert [s.entries[0].content for s in sessions] == ["a", "b"]
    assert report.repaired["longmemeval_haystack_reordered_by_date"] == 1
    assert sessions[0].entries[0].timestamp == "2023-05-30T09:15:00"


def test_a_session_id_repeated_within_a_haystack_is_imported_again_under_its_own_name(tmp_path):
    record = {
        "question_id": "q1",
        "question_type": "multi-session",
        "question": "?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s1", "s1", "s2"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 10:00"],
        "haystack_sessions": [
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            [{"role": "user", "content": "c"}],
            [{"role": "user", "content": "d"}],
        ],
        "answer_session_ids": [],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([record]))
    sessions, report = import_longmemeval(path)
    assert [s.session_id for s in sessions] == ["lme:q1:s1", "lme:q1:s1~2", "lme:q1:s2"]
    assert sessions[1].entries[0].id == "lme:q1:s1~2:1" and sessions[1].entries[0].content == "c"
    assert sessions[1].entries[0].meta["turn_id"] == "s1_1"  # the official turn id is kept
    assert report.repaired["longmemeval_repeated_session_id_renamed"] == 1
    substrate_home = tmp_path / "store"
    from lca.substrate import Substrate
    from tests.fakes import FakeHashingEmbedder

    with Substrate(substrate_home, embedder=FakeHashingEmbedder()) as substrate:
        substrate.import_sessions(sessions)
        assert [e.content for e in substrate.transcript.iter_entries()] == ["a", "b", "c", "d"]  # nothing merged


def test_longmemeval_shared_sessions_import_each_session_once(tmp_path):
    base = {
        "question_type": "x",
        "question": "?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer_session_ids": [],
    }
    turns = [{"role": "user", "content": "same"}]
    records = [
        dict(
            base,
            question_id="q1",
            haystack_session_ids=["s"],
            haystack_dates=["2023/05/01 (Mon) 10:00"],
            haystack_sessions=[turns],
        ),
        dict(
            base,
            question_id="q2",
            haystack_session_ids=["s"],
            haystack_dates=["2023/05/02 (Tue) 10:00"],
            haystack_sessions=[turns],
        ),
    ]
    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(records, handle)
    per_question, _ = import_longmemeval(path)
    shared, report = import_longmemeval(path, share_sessions=True)
    assert len(per_question) == 2 and len(shared) == 1
    assert report.repaired["longmemeval_shared_session_date_conflicts"] == 1


def test_broken_official_files_are_named(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"sample_id": "x",')
    with pytest.raises(RecordFormatError, match="broken.json.*not valid JSON"):
        import_locomo(bad)
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        import_locomo(missing)
    not_locomo = tmp_path / "other.json"
    not_locomo.write_text('[{"qa": []}]')
    with pytest.raises(RecordFormatError, match="conversation"):
        import_locomo(not_locomo)


def test_foreign_transcript_import_quarantines_bad_lines_and_keeps_the_rest(tmp_path):
    path = tmp_path / "other-harness.jsonl"
    good = [make_entry("h", 1), make_entry("h", 2, kind=EntryKind.TOOL_CALL)]
    path.write_bytes(encode_entry(good[0]) + b"garbage line\n" + encode_entry(good[1]))
    sessions, report, rejected = import_transcript_jsonl(path)
    assert [e.id for s in sessions for e in s.entries] == ["h:1", "h:2"]
    assert [(line, raw) for line, _, raw in rejected] == [(2, b"garbage line\n")]
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder()) as s:
        out = s.import_sessions(sessions, report, rejected=rejected)
        assert out.entries_appended == 2 and out.quarantined_lines == 1
        (record,) = s.transcript.quarantine_records()
        assert record.session_file == "other-harness.jsonl" and record.line == 2
        assert Counter(e.kind for e in s.transcript.iter_entries()) == {EntryKind.USER_TURN: 1, EntryKind.TOOL_CALL: 1}
