"""The experience log: known event kinds only, a prevented mistake cites its span, counts replay the log,
an event already logged (same target, kind and span) is not logged again."""

from __future__ import annotations

import pytest

from lca.errors import RecordFormatError
from lca.experience import ExperienceLog, ObservedEvent


def test_counts_replay_the_log_and_a_past_time_sees_its_prefix(tmp_path):
    log = ExperienceLog(tmp_path)
    assert log.counts() == {}
    log.record("memory:m1", "used", at=100.0)
    log.record("memory:m1", "approved", at=200.0)
    log.record("memory:m1", "prevented_mistake", span="s1#s1:2", at=300.0)
    log.record("memory:m2", "used", at=300.0)
    counts = log.counts()
    assert counts["memory:m1"] == {"used": 1, "approved": 1, "prevented_mistake": 1}
    assert counts["memory:m2"] == {"used": 1}
    assert log.counts_at(200.0) == {"memory:m1": {"used": 1, "approved": 1}}
    assert log.counts_at(None) == counts
    log.record("memory:m2", "used", at=400.0)  # the cache follows the log's size
    assert ExperienceLog(tmp_path).counts()["memory:m2"]["used"] == log.counts()["memory:m2"]["used"] == 2


def test_unknown_kinds_and_uncited_prevented_mistakes_are_refused(tmp_path):
    log = ExperienceLog(tmp_path)
    with pytest.raises(RecordFormatError, match="unknown event kind 'liked'") as info:
        log.record("memory:m1", "liked")
    assert info.value.field == "kind"
    with pytest.raises(RecordFormatError, match="must cite") as info:
        log.record("memory:m1", "prevented_mistake")
    assert info.value.field == "span" and not log.path.exists()


def test_record_new_records_each_target_kind_and_span_once(tmp_path):
    log = ExperienceLog(tmp_path)
    first = ObservedEvent("memory:m1", "corrected", "s1#s1:3")
    assert not log.recorded("memory:m1", "corrected", "s1#s1:3")
    recorded = log.record_new([first, first, ObservedEvent("memory:m1", "corrected", "s1#s1:5")], at=100.0)
    assert [e.span for e in recorded] == ["s1#s1:3", "s1#s1:5"] and all(e.at == 100.0 for e in recorded)
    assert log.recorded("memory:m1", "corrected", "s1#s1:3")
    assert log.record_new([first]) == [] and ExperienceLog(tmp_path).record_new([first]) == []
    assert log.counts()["memory:m1"] == {"corrected": 2}
    with pytest.raises(RecordFormatError, match="unknown event kind"):
        log.record_new([ObservedEvent("memory:m2", "used", "s1#s1:3"), ObservedEvent("memory:m1", "liked", "s1#s1:3")])
    assert "memory:m2" not in log.counts()  # refused as a whole


def test_an_unreadable_log_line_is_named(tmp_path):
    log = ExperienceLog(tmp_path)
    log.record("memory:m1", "used", at=1.0)
    with open(log.path, "a", encoding="utf-8") as handle:
        handle.write('{"target": "memory:m1"}\n')
    with pytest.raises(RecordFormatError, match="line 2") as info:
        log.counts()
    assert info.value.path == str(log.path)
