"""Shared records: one JSON spelling per value, UTC times, content hashes and source pointers that round-trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lca.types import (
    Chunk,
    EntryKind,
    HealthCheck,
    HealthReport,
    HealthStatus,
    SourcePointer,
    SourceType,
    TranscriptEntry,
    as_utc,
    canonical_json,
    parse_timestamp,
    text_digest,
)


def test_canonical_json_does_not_depend_on_key_order_or_spacing():
    assert canonical_json({"b": 1, "a": [1, "é"]}) == canonical_json({"a": [1, "é"], "b": 1}) == '{"a":[1,"é"],"b":1}'


def test_times_are_read_as_utc():
    assert parse_timestamp("2026-01-01T10:00:00Z") == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert parse_timestamp("2026/01/01 12:00:00+02:00") == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert parse_timestamp("2026-01-01") == datetime(2026, 1, 1, tzinfo=UTC)  # naive is UTC
    assert parse_timestamp("yesterday-ish") is None and parse_timestamp(None) is None and parse_timestamp("") is None
    aware = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert as_utc(aware) == aware and as_utc(aware).utcoffset() == timedelta(0)


def test_the_content_hash_covers_every_field_and_is_carried_on_the_wire():
    entry = TranscriptEntry(
        id="s:1",
        session_id="s",
        agent_id="a",
        kind=EntryKind.USER_TURN,
        timestamp="2026-01-01T00:00:00",
        content="hello",
        meta={"k": 1},
    )
    wire = entry.to_wire()
    assert wire["hash"] == entry.content_hash and entry.content_hash.startswith("sha256:")
    assert wire["kind"] == "user_turn" and wire["ts"] == "2026-01-01T00:00:00"
    changed = TranscriptEntry(**{**entry.__dict__, "channel": "ops"})
    assert changed.content_hash != entry.content_hash
    assert TranscriptEntry(**{**entry.__dict__, "meta": {"k": 1}}).content_hash == entry.content_hash


def test_source_pointers_round_trip_and_key_their_source():
    transcript = SourcePointer(SourceType.TRANSCRIPT, session_id="s", entry_id="s:1", char_start=3, char_end=9)
    memory = SourcePointer(SourceType.MEMORY, memory_id="m1", path="memory/m1.md", char_end=5)
    assert transcript.key() == "transcript:s#s:1[3:9]" and memory.key() == "memory:m1[0:5]"
    for pointer in (transcript, memory):
        assert SourcePointer.from_dict(pointer.to_dict()) == pointer
    assert Chunk.make_id("text", transcript) != Chunk.make_id("text", memory)
    assert len(text_digest("text")) == 32


def test_a_report_is_unhealthy_only_when_a_check_fails():
    ok = HealthCheck("a", HealthStatus.OK, "fine")
    warn = HealthCheck("b", HealthStatus.WARN, "look")
    report = HealthReport("store", (ok, warn), {})
    assert report.healthy and report.check("b") is warn
    assert report.to_dict()["checks"][1]["status"] == "warn"
    assert not HealthReport("store", (ok, HealthCheck("c", HealthStatus.FAIL, "broken")), {}).healthy
    with pytest.raises(KeyError):
        report.check("missing")
