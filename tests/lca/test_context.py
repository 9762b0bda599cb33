from __future__ import annotations

import json
from datetime import datetime

import pytest

from lca.context import ContextWindow, HandoffNotes, LiveContextManager, PersistenceNotVerifiedError
from lca.errors import RecordFormatError
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.recall import RecallConfig
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def turn(n: int, words: int = 20, **kw):
    return make_entry("live", n, " ".join(f"w{n}x{i}" for i in range(words)), **kw)


@pytest.fixture
def substrate(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        yield s


def manager(s, total=200, **kw):
    window = ContextWindow(
        total_tokens=total,
        reserve_output=20,
        critical_budget=kw.pop("critical_budget", 40),
        recall_budget=40,
        pressure_threshold=kw.pop("pressure", 0.99),
    )
    return LiveContextManager(s, window, session_id="live", agent_id="agent-test", **kw)


def test_window_settings_are_validated():
    with pytest.raises(RecordFormatError) as info:
        ContextWindow(total_tokens=100, reserve_output=-1)
    assert info.value.field == "reserve_output"
    with pytest.raises(RecordFormatError):
        ContextWindow(total_tokens=100, reserve_output=100)


def test_working_set_fits_the_window_and_prunes_oldest_first_after_verifying(substrate):
    m = manager(substrate)
    for n in range(1, 13):
        m.add(turn(n))
    ws = m.build("w12x1 status")
    assert ws.tokens["total"] <= m.window.usable
    assert [p.entry_id for p in ws.pruned] == [f"live:{n}" for n in range(1, 1 + len(ws.pruned))]
    assert ws.live_entries[-1] == "live:12" and ws.pruned
    log = [json.loads(x) for x in substrate.layout.prune_log.read_text().splitlines()]
    assert [r["entry_id"] for r in log] == [p.entry_id for p in ws.pruned]
    assert all("verified" in r["reason"] for r in log)
    # pruned is not deleted: still in the transcript and recallable
    assert any(h.pointer.entry_id == "live:1" for h in substrate.search("w1x3 w1x4 w1x5", k=3))
    assert len(substrate.transcript.read("live").entries) >= 12


def test_protected_turns_are_never_pruned(substrate):
    m = manager(substrate)
    m.add(turn(1, meta={"protect": True}))
    for n in range(2, 13):
        m.add(turn(n))
    ws = m.build("status")
    assert "live:1" in ws.live_entries and "live:1" not in {p.entry_id for p in ws.pruned}


def test_pruning_an_unpersisted_turn_fails_loudly(substrate):
    m = manager(substrate)
    for n in range(1, 13):
        m.add(turn(n))
    m.live.insert(0, turn(99))  # admitted without persistence: a host bug
    with pytest.raises(PersistenceNotVerifiedError, match="live:99"):
        m.build("status")


def test_protected_turns_that_cannot_fit_are_compacted_in_an_emergency_not_a_silent_cut(substrate):
    # it used to raise; now the newest protected turns that fit stay and the cut is recorded
    # (more in tests/lca/test_emergency_compaction.py)
    m = manager(substrate, total=60)
    m.add(turn(1, words=50, meta={"protect": True}))
    m.add(turn(2, words=10))
    ws = m.build("status", recall_config=RecallConfig(policy="none"))  # the window is the live turns' alone
    assert ws.emergency_compaction and ws.live_entries == ("live:2",)
    assert [(p.entry_id, p.emergency) for p in ws.pruned] == [("live:1", True)]
    assert "emergency compaction" in ws.pruned[0].reason


def test_critical_set_is_chosen_by_weight_and_overflow_is_reported(substrate):
    def crit(id_, authority, hits=0):
        substrate.memory.write(
            MemoryRecord(
                id=id_,
                type=MemoryType.PROCEDURE,
                created=datetime(2026, 1, 1),
                authority=authority,
                privacy=Privacy.PUBLIC,
                critical=True,
                hits=hits,
            ),
            "never deploy on friday without a rollback plan and an on call engineer",
            approver="test-approver",
        )

    crit("a-unreviewed", Authority.UNREVIEWED)
    crit("z-approved", Authority.APPROVED)
    crit("m-approved-used", Authority.APPROVED, hits=9)
    m = manager(substrate, critical_budget=50)
    m.add(turn(1))
    ws = m.build("deploy")
    assert ws.critical_ids == ("m-approved-used", "z-approved")  # by weight, not alphabetical
    assert ws.critical_overflow == ("a-unreviewed",)
    assert "[critical] m-approved-used" in ws.messages[0]["content"]
    substrate.critical_budget = 30
    check = substrate.health().check("critical_set")
    assert check.status.value == "warn" and check.data["memories"] == 3


def test_handoff_is_written_under_pressure_and_replayed_next_session(substrate):
    m = manager(substrate, pressure=0.3)
    for n in range(1, 6):
        m.add(turn(n))
    ws = m.build(
        "status",
        notes=HandoffNotes(
            objective="ship the migration", next_actions=("run the dry run",), must_not_lose=("the fencing epoch is 7",)
        ),
    )
    assert ws.handoff_entry is not None
    entry = next(e for e in substrate.transcript.read("live").entries if e.id == ws.handoff_entry)
    assert entry.kind is EntryKind.HANDOFF
    body = json.loads(entry.content)
    assert body["objective"] == "ship the migration" and body["recent_tail"][-1]["entry"] == "live:5"
    assert len(substrate.transcript.read("live").entries) == 6  # the handoff is added; nothing is replaced
    fresh = LiveContextManager(substrate, m.window, session_id="next", agent_id="agent-test")
    replay = fresh.replay_handoff()
    assert "ship the migration" in replay and "the fencing epoch is 7" in replay and "live:5" in replay
    assert LiveContextManager(substrate, m.window, session_id="x", agent_id="someone-else").replay_handoff() == ""


def test_fixed_consolidation_triggers_fire_before_pruning_under_pressure_and_at_session_end(substrate):
    from lca.ledger import Ledger
    from tests.fakes import FakeScriptedGenerator

    seen_by_cycle: list[tuple[str, int]] = []
    writer = FakeScriptedGenerator(lambda m: "NONE")
    reviewer = FakeScriptedGenerator(lambda m: "SUPPORTED: yes\nVERDICT: accept")

    def consolidate(trigger):
        # what the cycle sees: every live turn is still in the window when it runs
        seen_by_cycle.append((trigger, len(m.live)))
        substrate.checkpoint(writer, reviewer=reviewer, trigger=trigger, session_id="live")

    m = manager(substrate, consolidate=consolidate, pressure=0.5)
    m.add(turn(1, words=5))
    m.build("status")  # low pressure: nothing fires
    assert seen_by_cycle == []
    for n in range(2, 13):
        m.add(turn(n))
    ws = m.build("w12x1 status")
    assert ws.pruned and seen_by_cycle == [("pre_compaction", 12)]
    assert "w1x0" in writer.calls[0][-1]["content"]  # the cycle read the turns before they left the window
    m.end_session()
    assert [t for t, _ in seen_by_cycle] == ["pre_compaction", "session_end"]
    cycles = Ledger(substrate.home).state().cycles
    assert [c["trigger"] for c in cycles] == ["pre_compaction", "session_end"]
    assert substrate.transcript.read("live").entries[-1].kind is EntryKind.HANDOFF


def test_older_exchanges_are_classified_and_pruned_filler_and_tool_output_first(substrate):
    from lca.context import classify_turn

    filler = " ".join(["thanks"] * 1)
    turns = [
        make_entry("live", 1, "From now on, never deploy on Fridays without a rollback plan. " + "x " * 10),
        make_entry("live", 2, "ok thanks", kind=EntryKind.ASSISTANT_TURN),
        make_entry("live", 3, "routine note about lunch plans and the weather today " + "y " * 10),
        make_entry("live", 4, "stdout: 4,211 lines of build log " + "z " * 12, kind=EntryKind.TOOL_RESULT),
        make_entry("live", 5, "Run the database migration on production tonight " + "w " * 10),
        make_entry("live", 6, filler, kind=EntryKind.ASSISTANT_TURN),
        turn(7),
        turn(8),
    ]
    labels = [classify_turn(t).label for t in turns[:6]]
    assert labels == ["instruction", "chatter", "routine", "tool_output", "high_risk", "chatter"]
    assert classify_turn(make_entry("live", 9, "never mind", meta={"protect": True})).label == "host_protected"
    m = manager(substrate, total=110)
    for t in turns:
        m.add(t)
    ws = m.build("w8x1 status")
    order = [p.entry_id for p in ws.pruned]
    # filler and tool output before routine; the instruction and the production step are kept longest
    assert order[:3] == ["live:2", "live:4", "live:6"]
    assert order.index("live:3") > 2
    assert len(order) >= 4, order
    for kept_long in ("live:1", "live:5"):  # soft-protected: only after every unprotected turn
        if kept_long in order:
            assert all(order.index(kept_long) > order.index(x) for x in ("live:2", "live:3", "live:4", "live:6"))
    assert "live:7" not in order and "live:8" not in order  # in flight
    log = [json.loads(x) for x in substrate.layout.prune_log.read_text().splitlines()]
    assert "chatter" in log[0]["reason"] and "tool_output" in log[1]["reason"]
