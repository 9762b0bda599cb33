"""full-lca writes a handoff with content at each session end (lca.handoff) with its summarizer role, and
records how each was built, so a run can see an empty one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conditions import ConditionRuntime, build_condition
from conditions.checks import CONTRACT_PROBE, contract_history, replay
from lca.context import LiveContextManager
from tests.conditions.test_contract import fake_role
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


def summarizer_role(messages):
    """The contract's scripted model, but a handoff request gets JSON citing line 1."""
    if "handoff notes" in messages[0]["content"]:
        first = messages[-1]["content"].split("\n")[1]  # "[1] user: ..."
        return json.dumps({"objective": {"text": first.split(": ", 1)[1], "lines": [1]}})
    return fake_role(messages)


def runtime(tmp_path, respond):
    return ConditionRuntime(
        workdir=tmp_path,
        embedder=FakeHashingEmbedder(),
        generators={"agent": FakeScriptedGenerator(fake_role), "summarizer": FakeScriptedGenerator(respond)},
    )


def test_each_session_end_records_its_handoff_and_an_empty_one_shows(tmp_path):
    history = contract_history(texts=[["My sister Lucia moved to Lisbon.", "Noted."], [" "]])
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path, summarizer_role)), history)
    assert full.handoffs == [
        {"session": "h1", "items": 1, "built_by": "model", "dropped": 0},
        {"session": "h2", "items": 0, "built_by": "mechanical", "dropped": 0},  # nothing to hand off: visible
    ]
    full.reset()
    assert full.handoffs == []
    full.close()


def test_the_next_session_is_shown_the_items_with_their_pointers(tmp_path):
    history = contract_history(texts=[["My sister Lucia moved to Lisbon.", "Noted."]])
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path, summarizer_role)), history)
    (handoff,) = [i for i in full.build_context(CONTRACT_PROBE).items if i.kind == "handoff"]
    assert "objective: My sister Lucia moved to Lisbon. [h1:1]" in handoff.text
    latest = LiveContextManager.latest_handoff(full.substrate, "agent")
    assert LiveContextManager.handoff_pointers(latest)[0] == "h1#h1:1"
    full.close()


def test_the_critical_reserve_is_what_critical_memories_need_and_recall_keeps_the_rest(tmp_path):
    """A store holding no critical memory leaves recall all the budget identity and the handoff leave; one
    holding a critical memory gets it shown, and recall the rest."""
    from tests.conftest import make_fact

    turns = [
        f"Where does Lucia live and what is her job these days? Lisbon, where she is a nurse {n}." for n in range(4)
    ]
    history = contract_history(texts=[turns])
    full = replay(
        build_condition("full-lca", consolidate=0, handoff=0, budget_tokens=200).attach(
            runtime(tmp_path, summarizer_role)
        ),
        history,
    )
    recalled = [i for i in full.build_context(CONTRACT_PROBE).items if i.kind != "identity"]
    # all four turns fit 200 tokens, not the 150 a fixed quarter's reserve used to leave recall
    assert len(recalled) == 4 and sum(i.tokens for i in recalled) > 200 - 200 // 4
    body = "Never share Lucia's shift pattern outside the family."
    full.substrate.memory.write(make_fact("lucia-shifts", critical=True), body, approver="test-approver")
    full.substrate.ingest()
    items = full.build_context(CONTRACT_PROBE).items
    (critical,) = [i for i in items if i.kind == "critical"]
    assert critical.tokens == full.substrate.count_tokens(f"[critical] lucia-shifts: {body}")
    assert sum(i.tokens for i in items if i.kind not in ("identity", "critical")) <= 200 - critical.tokens
    full.close()


def test_recall_skips_the_turns_the_handoff_shows_whole_and_keeps_a_cut_one(tmp_path):
    """The handoff quotes its session's last turns; recall does not spend the budget on a turn the packet
    already shows whole, but may bring one the handoff cut at TAIL_QUOTE_CHARS."""
    from lca.handoff import TAIL_QUOTE_CHARS

    long_reply = "Lucia's rota, in full: " + " ".join(f"night {n} at Santa Maria" for n in range(40))
    assert len(long_reply) > TAIL_QUOTE_CHARS
    history = contract_history(texts=[["Where does my sister Lucia work nights?", long_reply]])
    condition = build_condition("full-lca", consolidate=0, handoff_tail="always")
    full = replay(condition.attach(runtime(tmp_path, summarizer_role)), history)
    latest = LiveContextManager.latest_handoff(full.substrate, "agent")
    assert list(LiveContextManager.whole_tail_quotes(latest)) == ["h1#h1:1"]  # the reply was cut
    items = full.build_context(CONTRACT_PROBE).items
    (handoff,) = [i for i in items if i.kind == "handoff"]
    recalled = {p for i in items if i.kind == "transcript" for p in i.pointers}
    assert "tail h1:1: Where does my sister Lucia work nights?" in handoff.text
    assert "h1#h1:1" not in recalled and "h1#h1:2" in recalled
    result = full.substrate.recall(full.recall_context(CONTRACT_PROBE))  # asked without the handoff: both come
    assert {c.source.split("[")[0] for c in result.items} >= {"transcript:h1#h1:1", "transcript:h1#h1:2"}
    full.close()


def test_recall_skips_a_turn_a_handoff_item_holds_whole_and_keeps_a_longer_one(tmp_path):
    """A handoff's item may hold a short turn whole (the request it names as the objective, a standing rule):
    recall does not show that turn a second time; a turn longer than an item's caption it may still bring."""
    history = contract_history(texts=[["My sister Lucia moved to Lisbon.", "Noted."]])
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path / "a", summarizer_role)), history)
    latest = LiveContextManager.latest_handoff(full.substrate, "agent")
    held = LiveContextManager.whole_item_quotes(latest, full.substrate.transcript)
    assert held == {"h1#h1:1": "My sister Lucia moved to Lisbon. [h1:1]"}
    items = full.build_context(CONTRACT_PROBE).items
    assert "h1#h1:1" in next(i for i in items if i.kind == "handoff").pointers  # the packet rests on it ...
    assert "h1#h1:1" not in {p for i in items if i.kind == "transcript" for p in i.pointers}  # ... shown once
    asked = full.substrate.recall(full.recall_context(CONTRACT_PROBE))  # asked without the handoff, it comes
    assert "transcript:h1#h1:1" in {c.source.split("[")[0] for c in asked.items}
    full.close()
    long_turn = "My sister Lucia moved to Lisbon, " + ", ".join(
        f"then to flat {n} on the Rua Augusta" for n in range(12)
    )
    history = contract_history(texts=[[long_turn, "Noted."]])
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path / "b", summarizer_role)), history)
    latest = LiveContextManager.latest_handoff(full.substrate, "agent")
    assert LiveContextManager.whole_item_quotes(latest, full.substrate.transcript) == {}  # its item is a caption
    full.close()


def test_by_default_the_handoff_quotes_its_tail_only_to_a_question_that_resumes_the_work(tmp_path):
    """The tail is where the last session stopped: a question that picks that up gets it quoted; any other
    question gets the handoff's decisions and rules, and the tail's turns compete in recall like any other."""
    history = contract_history(texts=[["Where does my sister Lucia work nights?", "At Santa Maria, on the ward."]])
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path / "a", summarizer_role)), history)
    items = full.build_context(CONTRACT_PROBE).items
    (handoff,) = [i for i in items if i.kind == "handoff"]
    assert "tail h1:" not in handoff.text
    # the reply competes in recall; the request is the handoff's objective, which shows it whole
    assert "h1#h1:2" in {p for i in items if i.kind == "transcript" for p in i.pointers}
    assert "objective: Where does my sister Lucia work nights? [h1:1]" in handoff.text
    resume = replace(CONTRACT_PROBE, signals=replace(CONTRACT_PROBE.signals, resume=True))
    (handoff,) = [i for i in full.build_context(resume).items if i.kind == "handoff"]
    assert "tail h1:1: Where does my sister Lucia work nights?" in handoff.text
    full.close()


def test_a_rule_set_in_the_first_session_reaches_a_task_three_sessions_later_that_shares_no_word_with_it(tmp_path):
    """Similarity does not bring back "never call the yarn organic" for "write the shop's spring newsletter";
    each handoff passes the rule on (lca.handoff.carry_in_force), so the packet shows it and rests on its turn."""
    history = contract_history(
        texts=[
            ["Ground rules for anything you write for me: never call the yarn organic.", "Understood."],
            ["Price the autumn colourways.", "Twelve pounds a skein."],
            ["Which courier is cheapest for parcels?", "The local one."],
            ["Restock the shelves list.", "Done."],
        ]
    )
    full = replay(build_condition("full-lca", consolidate=0).attach(runtime(tmp_path, lambda m: "no JSON")), history)
    (handoff,) = [i for i in full.build_context(CONTRACT_PROBE).items if i.kind == "handoff"]
    assert "constraints: Ground rules for anything you write for me: never call the yarn organic. [h1:1]" in (
        handoff.text
    )
    assert "h1#h1:1" in handoff.pointers
    full.close()


def test_with_handoff_tail_resume_the_quoted_tail_is_shown_only_to_a_question_that_picks_the_work_up(tmp_path):
    """The tail quotes where the last session stopped; another question gets recall's room instead, and the tail's
    turns compete there on relevance (handoff_tail="always" shows it to every question)."""
    from dataclasses import replace

    from lca.continuation import ContinuationSignals

    history = contract_history(texts=[["My sister Lucia moved to Lisbon.", "Noted."], ["Price the tiles.", "£20."]])
    resuming = replace(CONTRACT_PROBE, question="Where did we leave off?", signals=ContinuationSignals(resume=True))
    for setting, shown_to_other in (("always", True), ("resume", False)):
        full = replay(
            build_condition("full-lca", consolidate=0, handoff_tail=setting).attach(
                runtime(tmp_path / setting, summarizer_role)
            ),
            history,
        )
        (other,) = [i for i in full.build_context(CONTRACT_PROBE).items if i.kind == "handoff"]
        (resumed,) = [i for i in full.build_context(resuming).items if i.kind == "handoff"]
        assert ("tail h2:2: £20." in other.text) is shown_to_other and ("h2#h2:2" in other.pointers) is shown_to_other
        assert "tail h2:2: £20." in resumed.text and "h2#h2:2" in resumed.pointers
        full.close()
    with pytest.raises(ValueError, match="handoff_tail"):
        replay(
            build_condition("full-lca", consolidate=0, handoff_tail="never").attach(
                runtime(tmp_path / "x", summarizer_role)
            ),
            history,
        ).build_context(CONTRACT_PROBE)


def test_with_carry_off_the_rule_of_the_first_session_is_not_in_a_later_handoff(tmp_path):
    history = contract_history(
        texts=[
            ["Ground rules for anything you write for me: never call the yarn organic.", "Understood."],
            ["Price the autumn colourways.", "Twelve pounds a skein."],
        ]
    )
    for carry, held in ((1, True), (0, False)):
        full = replay(
            build_condition("full-lca", consolidate=0, carry=carry).attach(
                runtime(tmp_path / str(carry), lambda m: "no JSON")
            ),
            history,
        )
        (handoff,) = [i for i in full.build_context(CONTRACT_PROBE).items if i.kind == "handoff"]
        assert ("never call the yarn organic" in handoff.text) is held and ("h1#h1:1" in handoff.pointers) is held
        full.close()
