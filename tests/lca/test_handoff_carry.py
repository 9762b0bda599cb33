"""Handoffs carry what still holds (lca.handoff.carry_in_force): a rule or a decision from an earlier session is
passed on by each session's handoff until an event replaces it, and an injected handoff rests only on what its
fitted text still shows (handoff_pointers(entry, shown))."""

from __future__ import annotations

import json

import pytest

from lca.context import ContextWindow, LiveContextManager
from lca.handoff import MAX_ITEMS, handoff_pointers, render_handoff
from lca.recall import RecallConfig
from lca.substrate import Substrate
from lca.types import EntryKind, TranscriptEntry
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

U, A = EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN
WINDOW = ContextWindow(total_tokens=400, reserve_output=20, critical_budget=40, recall_budget=40)


def turn(session: int, n: int, kind: EntryKind, content: str, event: dict | None = None) -> TranscriptEntry:
    return make_entry(
        f"scn.s{session}",
        n,
        content,
        kind=kind,
        timestamp=f"2026-03-0{session}T10:00:{n:02d}",
        channel="scenario",
        meta={"event": event} if event else {},
    )


def key(session: int, n: int) -> str:
    return f"scn.s{session}#scn.s{session}:{n}"


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        yield s


def end(store, session: int, turns: list[TranscriptEntry]) -> dict:
    """Append a session's turns and write its handoff as a host does at session end; the handoff's body."""
    store.append(turns)
    manager = LiveContextManager(store, WINDOW, session_id=f"scn.s{session}", agent_id="agent", identity="")
    manager.live = list(turns)
    notes = manager.compose_handoff()
    manager.write_handoff(notes, reason="session end", at=f"2026-03-0{session}T11:00:00")
    return json.loads(LiveContextManager.latest_handoff(store, "agent").content)


def items(body: dict, section: str) -> list[dict]:
    return [i for i in body["items"] if i["section"] == section]


RULE = "Ground rules for anything you write for us: never call the produce organic, we are not certified."


def test_a_rule_from_the_first_session_is_in_every_later_handoff_until_a_correction_replaces_it(store):
    first = end(store, 1, [turn(1, 1, U, RULE), turn(1, 2, A, "Understood.")])
    assert [i["pointers"] for i in items(first, "constraints")] == [[key(1, 1)]] and first["carried"] == 0
    second = end(store, 2, [turn(2, 1, U, "Draft the box price list."), turn(2, 2, A, "Here it is.")])
    assert [i["pointers"] for i in items(second, "constraints")] == [[key(1, 1)]] and second["carried"] == 1
    third = end(store, 3, [turn(3, 1, U, "Write the welcome note for the first box."), turn(3, 2, A, "Done.")])
    assert [i["pointers"] for i in items(third, "constraints")] == [[key(1, 1)]]  # passed on from handoff to handoff
    fixed = {"type": "correction", "of": key(1, 1), "right": "we are certified now; organic is fine"}
    fourth = end(store, 4, [turn(4, 1, U, "We got certified last week, organic is fine now.", fixed)])
    constraints = items(fourth, "constraints")
    assert [i["pointers"] for i in constraints] == [[key(4, 1)]] and fourth["carried"] == 0
    assert any("carried, rests on a turn a later event corrected or superseded" in r for r in fourth["dropped_reasons"])


def test_a_decision_that_replaced_another_is_carried_and_an_approval_of_a_replaced_choice_is_not(store):
    end(
        store,
        1,
        [
            turn(1, 1, U, "Where should the supper be?"),
            turn(1, 2, A, "The church hall is free on the 26th."),
            turn(1, 3, U, "Yes, book it.", {"type": "approval", "of": key(1, 2)}),
        ],
    )
    moved = {"type": "supersedes", "of": key(1, 2)}
    second = end(store, 2, [turn(2, 1, U, "Change of plan: the River Room at the rowing club.", moved)])
    assert [i["pointers"] for i in items(second, "decisions")] == [[key(2, 1)]]  # the approval of the hall is gone
    third = end(store, 3, [turn(3, 1, U, "Draft the thank-you letter."), turn(3, 2, A, "Here is a draft.")])
    assert [i["pointers"] for i in items(third, "decisions")] == [[key(2, 1)]]
    assert "River Room" in items(third, "decisions")[0]["text"]


def test_past_the_item_limit_the_oldest_carried_item_is_dropped_with_its_reason(store):
    end(store, 1, [turn(1, n, U, f"From now on, rule {n}: always label box {n} by hand.") for n in range(1, 5)])
    second = end(store, 2, [turn(2, n, U, f"Going forward, always weigh crate {n} twice.") for n in range(1, 4)])
    constraints = items(second, "constraints")
    assert len(constraints) == MAX_ITEMS
    assert [i["pointers"][0] for i in constraints] == [key(1, 3), key(1, 4), key(2, 1), key(2, 2), key(2, 3)]
    dropped = [r for r in second["dropped_reasons"] if "over the" in r]
    assert len(dropped) == 2 and key(1, 1) in dropped[0] and key(1, 2) in dropped[1]


def test_a_fitted_handoff_rests_only_on_the_items_and_tail_lines_its_text_still_shows(store):
    end(store, 1, [turn(1, 1, U, RULE), turn(1, 2, A, "Understood.")])
    end(store, 2, [turn(2, 1, U, "Draft the box price list."), turn(2, 2, A, "Here it is: small 15, medium 22.")])
    latest = LiveContextManager.latest_handoff(store, "agent")
    rendered = render_handoff(latest)
    whole = handoff_pointers(latest, rendered)
    assert whole == handoff_pointers(latest) and key(1, 1) in whole and key(2, 2) in whole
    lines = rendered.splitlines()
    cut = "\n".join(line for line in lines if not line.startswith(("constraints:", "tail scn.s2:2")))
    shown = handoff_pointers(latest, cut)
    assert key(1, 1) not in shown and key(2, 2) not in shown and key(2, 1) in shown
