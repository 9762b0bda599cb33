"""The experience log: known event kinds only, a prevented mistake cites its span, counts replay the log."""

from __future__ import annotations

import pytest

from lca.errors import RecordFormatError
from lca.experience import ExperienceLog


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
