"""Emergency compaction: when the protected turns alone overflow the window the live context manager no
longer raises; it keeps the newest protected turns that fit, prunes the rest only after verifying them in
the transcript and the index, writes a handoff with reason "emergency compaction", and records the event
(in the working set, the prune records and the prune log)."""

from __future__ import annotations

import json

import pytest

from lca.context import ContextWindow, LiveContextManager, PersistenceNotVerifiedError
from lca.recall import RecallConfig
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


def protected(n: int, words: int):
    return make_entry("live", n, " ".join(f"w{n}x{i}" for i in range(words)), meta={"protect": True})


@pytest.fixture
def substrate(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        yield s


def manager(s, total=60, **kw):
    window = ContextWindow(total_tokens=total, reserve_output=20, critical_budget=10, recall_budget=10)
    return LiveContextManager(s, window, session_id="live", agent_id="agent-test", identity="", **kw)


def test_an_overflow_of_protected_turns_compacts_instead_of_raising_and_loses_nothing(substrate):
    m = manager(substrate)  # 40 usable tokens; each turn costs one token a word
    turns = [protected(1, 30), protected(2, 25), protected(3, 10), protected(4, 10)]
    for t in turns:
        m.add(t)
    ws = m.build("status")
    assert ws.emergency_compaction
    assert ws.live_entries == ("live:3", "live:4")  # the newest that fit (10 + 10 <= 40; + 25 or + 30 would not)
    assert [(p.entry_id, p.emergency) for p in ws.pruned] == [("live:1", True), ("live:2", True)]
    assert ws.tokens["total"] <= m.window.usable
    # persist-before-prune: every turn is still in the transcript, with its content
    recorded = {e.id: e.content for e in substrate.transcript.read("live").entries if e.kind is EntryKind.USER_TURN}
    assert recorded == {t.id: t.content for t in turns}
    # the event is visible: prune records and log say so, and a handoff says why it was written
    log = [json.loads(x) for x in substrate.layout.prune_log.read_text().splitlines()]
    assert [r["entry_id"] for r in log] == ["live:1", "live:2"]
    assert all(r["emergency"] and r["reason"].startswith("emergency compaction") for r in log)
    assert "verified in transcript and index" in log[0]["reason"]
    handoff = next(e for e in substrate.transcript.read("live").entries if e.id == ws.handoff_entry)
    body = json.loads(handoff.content)
    assert body["reason"] == "emergency compaction" and body["built_by"] == "mechanical"
    assert {v["entry"] for v in body["verified_evidence"]} == {"live:1", "live:2"}


def test_a_newest_turn_that_alone_does_not_fit_goes_and_older_ones_that_fit_stay(substrate):
    m = manager(substrate)
    for t in (protected(1, 8), protected(2, 8), protected(3, 50)):
        m.add(t)
    ws = m.build("status")
    assert ws.emergency_compaction and ws.live_entries == ("live:1", "live:2")
    assert [p.entry_id for p in ws.pruned] == ["live:3"]
    assert any(e.id == "live:3" for e in substrate.transcript.read("live").entries)


def test_persist_before_prune_holds_in_an_emergency(substrate):
    m = manager(substrate)
    m.add(protected(2, 10))
    m.add(protected(3, 10))
    m.live.insert(0, protected(1, 30))  # admitted without persistence: a host bug
    with pytest.raises(PersistenceNotVerifiedError, match="live:1"):
        m.build("status")
    assert [e.id for e in m.live] == ["live:1", "live:2", "live:3"]  # nothing was cut


def test_the_emergency_handoff_is_written_by_the_summarizer_when_there_is_one(substrate):
    answer = {"objective": {"text": "finish w3x0 and w3x1", "lines": [3]}}
    model = FakeScriptedGenerator([json.dumps(answer)])
    m = manager(substrate, summarizer=model)
    for t in (protected(1, 30), protected(2, 10), protected(3, 10)):
        m.add(t)
    ws = m.build("status")
    body = json.loads(next(e for e in substrate.transcript.read("live").entries if e.id == ws.handoff_entry).content)
    assert body["reason"] == "emergency compaction" and body["built_by"] == "model"
    assert body["items"] == [{"section": "objective", "text": "finish w3x0 and w3x1", "pointers": ["live#live:3"]}]
    replay = LiveContextManager(substrate, m.window, session_id="next", agent_id="agent-test").replay_handoff()
    assert "emergency compaction" in replay and "finish w3x0 and w3x1 [live:3]" in replay


def test_a_window_with_room_is_not_an_emergency(substrate):
    m = manager(substrate, total=200)
    for t in (protected(1, 20), protected(2, 15)):
        m.add(t)
    ws = m.build("status")
    assert not ws.emergency_compaction and not ws.pruned and ws.live_entries == ("live:1", "live:2")
