"""Contract tests over every registered condition (scikit-learn style: one suite, every implementation)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from conditions import (Condition, ConditionRuntime, Probe, Session, available_conditions, build_condition,
                        condition_class, register_condition)
from lca.errors import LCAError
from lca.types import EntryKind, TranscriptEntry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

HISTORY = [
    ["My sister Lucia lives in Lisbon and works as a nurse.", "Noted: Lucia, a nurse in Lisbon.",
     "We decided the billing service moves to PostgreSQL 16.", "Understood, PostgreSQL 16 it is."],
    ["I adopted a grey cat called Pebble last week.", "Congratulations on Pebble!",
     "Please always answer me briefly.", "I will keep answers brief."],
]


def fake_role(messages):
    """One scripted model for every role, answering by the prompt it gets (deterministic)."""
    system, task = messages[0]["content"], messages[-1]["content"]
    lines = re.findall(r"^\[(\d+)\] (?:user|assistant): (.+)$", task, flags=re.M)
    if "extract memories" in system:
        return "\n".join(f"fact | {text} | {n}" for n, text in lines[:2]) or "NONE"
    if "strict reviewer" in system:
        return "REASONING: the cited line says it.\nSUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept"
    if "check a summary" in system:
        return "NONE"
    if "memory summary" in system:
        said = re.findall(r"^(?:\[[\d-]+\] )?(?:user|assistant): (.+)$", task, flags=re.M)
        previous = task.split("New conversation lines:")[0].replace("Current summary:", "").strip()
        kept = [] if previous in ("(empty)", "") else [previous]
        return "\n".join(kept + [f"- {s}" for s in said[::2]])
    return "I do not know."


def history(prefix="h"):
    sessions = []
    for s, turns in enumerate(HISTORY, 1):
        entries = tuple(TranscriptEntry(id=f"{prefix}{s}:{n}", session_id=f"{prefix}{s}", agent_id="agent",
                                        kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
                                        timestamp=f"2026-03-0{s}T10:00:0{n}", content=text)
                        for n, text in enumerate(turns, 1))
        sessions.append(Session(f"{prefix}{s}", entries))
    return sessions


def runtime(tmp_path):
    generator = FakeScriptedGenerator(fake_role, model_id="fake-role")
    return ConditionRuntime(workdir=tmp_path, embedder=FakeHashingEmbedder(), generators={"agent": generator},
                            identity={"identity": "You are Atlas, a careful assistant.", "user": "The user is Ana."})


def replay(condition, sessions):
    condition.reset()
    for session in sessions:
        condition.ingest(session)
        condition.end_session()


PROBE = Probe("p1", "Where does Lucia live and what is her job?", "2026-03-05T09:00:00")
ALL = available_conditions()


def test_the_six_conditions_of_the_protocol_are_registered():
    assert set(ALL) >= {"stateless", "identity-only", "summary", "transcript-recall", "full-lca",
                        "adversarial-summary"}


@pytest.mark.parametrize("name", ALL)
def test_constructor_only_stores_plain_parameters(name):
    cls = condition_class(name)
    default = build_condition(name)
    params = default.get_params()
    assert all(isinstance(v, (str, int, float)) for v in params.values())
    assert build_condition(name, **params).get_params() == params
    assert not hasattr(default, "runtime")   # nothing heavy is built by the constructor
    with pytest.raises(LCAError, match="has no parameter"):
        build_condition(name, no_such_parameter=1)
    with pytest.raises(LCAError, match="plain string or number"):
        build_condition(name, budget_tokens=[1, 2])
    assert cls.name == name


@pytest.mark.parametrize("name", ALL)
def test_interface_packet_and_determinism(name, tmp_path):
    packets = []
    for run in ("a", "b"):
        condition = build_condition(name).attach(runtime(tmp_path / run))
        replay(condition, history())
        packets.append(condition.build_context(PROBE))
        condition.close()
    first, second = packets
    assert first.condition == name
    assert first.messages[-1] == {"role": "user", "content": PROBE.question}
    assert first.messages == second.messages and first.injected_tokens == second.injected_tokens
    assert [i.source for i in first.items] == [i.source for i in second.items]
    assert first.recall_latency_ms >= 0.0


@pytest.mark.parametrize("name", ALL)
def test_injected_tokens_never_exceed_the_stated_budget(name, tmp_path):
    for budget in (12, 40, 400):
        condition = build_condition(name, budget_tokens=budget).attach(runtime(tmp_path / str(budget)))
        replay(condition, history())
        packet = condition.build_context(PROBE)
        rendered = packet.messages[0]["content"] if packet.messages[0]["role"] == "system" else ""
        assert packet.injected_tokens <= budget
        assert condition.runtime.count_tokens(rendered) == packet.injected_tokens
        condition.close()


@pytest.mark.parametrize("name", ALL)
def test_no_condition_can_see_gold(name, tmp_path):
    fields = {f.name for f in dataclasses.fields(Probe)}
    assert fields == {"id", "question", "asked_at"}   # no answer, no evidence: nothing to read
    condition = build_condition(name).attach(runtime(tmp_path))
    replay(condition, history())
    packet = condition.build_context(PROBE)
    assert "gold" not in " ".join(str(v) for v in packet.notes.values()).lower()
    condition.close()


def test_reset_forgets_the_history(tmp_path):
    condition = build_condition("transcript-recall", floor=0.0).attach(runtime(tmp_path))
    replay(condition, history())
    assert condition.build_context(PROBE).items
    condition.reset()
    assert condition.build_context(PROBE).items == ()
    condition.close()


def test_stateless_injects_nothing_and_recall_conditions_bring_back_evidence(tmp_path):
    stateless = build_condition("stateless").attach(runtime(tmp_path / "s"))
    replay(stateless, history())
    packet = stateless.build_context(PROBE)
    assert packet.items == () and packet.injected_tokens == 0 and len(packet.messages) == 1
    recall = build_condition("transcript-recall", floor=0.0).attach(runtime(tmp_path / "t"))
    replay(recall, history())
    pointers = {p for item in recall.build_context(PROBE).items for p in item.pointers}
    assert "h1#h1:1" in pointers   # the turn that says where Lucia lives
    recall.close()


def test_adversarial_summary_matches_full_lca_budget_measured_on_the_same_history(tmp_path):
    rt = runtime(tmp_path)
    adversarial = build_condition("adversarial-summary").attach(rt)
    replay(adversarial, history())
    packet = adversarial.build_context(PROBE)
    full = build_condition("full-lca").attach(runtime(tmp_path / "full"))
    replay(full, history())
    measured = full.build_context(PROBE).injected_tokens
    assert packet.notes["full_lca_injected"] == measured and packet.notes["matched_budget"] == measured
    assert packet.injected_tokens <= measured
    adversarial.close()
    full.close()


def test_registry_refuses_duplicates_unknown_names_and_required_parameters():
    with pytest.raises(LCAError, match="unknown condition 'nope'; known: adversarial-summary"):
        build_condition("nope")

    class Impostor(Condition):
        name = "stateless"

    with pytest.raises(LCAError, match="already registered"):
        register_condition(Impostor)

    class NeedsArgument(Condition):
        name = "needs-argument"

        def __init__(self, required) -> None:
            self.required = required

    with pytest.raises(LCAError, match="needs a default"):
        register_condition(NeedsArgument)
    assert "needs-argument" not in available_conditions()


def test_full_lca_consolidates_at_session_end_and_ablations_are_parameters(tmp_path):
    full = build_condition("full-lca").attach(runtime(tmp_path / "v"))
    replay(full, history())
    assert len(full.cycles) == 2 and full.cycles[0]["candidates"] >= 1
    kinds = {i.kind for i in full.build_context(PROBE).items}
    assert {"identity", "handoff"} <= kinds
    memories = full.substrate.memory.load().files
    assert memories and all(m.record.authority.value == "reviewed" for m in memories)
    full.close()
    unverified = build_condition("full-lca", verify=0).attach(runtime(tmp_path / "u"))
    replay(unverified, history())
    assert all(m.record.authority.value == "unreviewed" for m in unverified.substrate.memory.load().files)
    unverified.close()
    with pytest.raises(LCAError, match="TERM=VALUE"):
        build_condition("full-lca", weights="gravity=1").attach(runtime(tmp_path / "w")).reset()
