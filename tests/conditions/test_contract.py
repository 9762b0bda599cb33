"""Contract tests over every registered condition (scikit-learn style: one suite, every implementation).

The generic contract lives in ``conditions.checks``; here it runs over every registered condition with
fake models, broken conditions show that each check catches what it is about, and the tests that are
particular to one condition follow.
"""

from __future__ import annotations

import itertools
import re

import pytest

from conditions import (
    Condition,
    ConditionRuntime,
    ContextPacket,
    InjectedItem,
    Probe,
    Session,
    available_conditions,
    build_condition,
    clone,
    condition_class,
    register_condition,
)
from conditions.checks import (
    CONTRACT_PROBE,
    ConditionCheckError,
    check_condition,
    condition_checks,
    contract_history,
    parametrize_with_checks,
    replay,
)
from conditions.recall import parse_weights
from lca.errors import LCAError
from lca.params import ParameterError
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


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


def runtime(tmp_path):
    """The runtime factory the contract checks get: fake embedder, one scripted model for every role."""
    generator = FakeScriptedGenerator(fake_role, model_id="fake-role")
    return ConditionRuntime(
        workdir=tmp_path,
        embedder=FakeHashingEmbedder(),
        generators={"agent": generator},
        identity={"identity": "You are Atlas, a careful assistant.", "user": "The user is Ana."},
    )


PROBE = CONTRACT_PROBE
ALL = available_conditions()
CHECK_NAMES = [name for name, _ in condition_checks("stateless")]


# ---- the generic contract, over every registered condition -----------------------------------------
@parametrize_with_checks(ALL + [build_condition("transcript-recall", floor=0.0)], runtime_factory=runtime)
def test_every_condition_meets_the_contract(condition, check):
    check()


def test_the_six_conditions_of_the_protocol_are_registered():
    assert set(ALL) >= {"stateless", "identity-only", "summary", "transcript-recall", "full-lca", "adversarial-summary"}


def test_the_contract_has_the_checks_the_brief_names():
    assert CHECK_NAMES == [
        "check_constructor_stores_plain_parameters",
        "check_get_params_round_trip",
        "check_set_params",
        "check_clone",
        "check_interface_packet_and_determinism",
        "check_injected_tokens_within_budget",
        "check_no_access_to_gold",
        "check_reset_forgets_history",
    ]


def test_parametrize_with_checks_names_each_case_by_condition_and_check():
    mark = parametrize_with_checks(["stateless", build_condition("full-lca", verify=0)])
    argnames, cases = mark.args
    ids = mark.kwargs["ids"]
    assert argnames == "condition, check" and len(cases) == len(ids) == 2 * len(CHECK_NAMES)
    assert "stateless-check_clone" in ids and "full-lca(verify=0)-check_reset_forgets_history" in ids
    assert all(isinstance(condition, Condition) for condition, _ in cases)


def test_a_runtime_check_without_a_runtime_factory_says_so(tmp_path):
    checks = dict(condition_checks("stateless"))
    checks["check_clone"]()  # the parameter checks need no runtime
    with pytest.raises(ConditionCheckError, match="check_no_access_to_gold failed for condition stateless: needs a"):
        checks["check_no_access_to_gold"]()
    checks["check_no_access_to_gold"](runtime)  # given at the call instead


def test_the_checks_work_on_clones_and_leave_the_given_condition_alone():
    condition = build_condition("transcript-recall", floor=0.0, k=3)
    check_condition(condition, runtime)
    assert condition.get_params() == {
        "budget_tokens": 1200,
        "k": 3,
        "floor": 0.0,
        "resume_turns": 4,
        "exchanges": 1,
        "excerpts": 1,
        "agent_turn_risk": 0.1,
        "reply_inheritance": 0.0,
    }
    assert not hasattr(condition, "runtime")


# ---- broken conditions: each check catches what it is about -----------------------------------------
class Remembering(Condition):
    """A correct condition that injects the user's turns it has seen (the base of the broken ones)."""

    name = "remembering"

    def __init__(self, budget_tokens: int = 1200, labels: str = "a,b") -> None:
        self.budget_tokens = budget_tokens
        self.labels = labels

    def reset(self) -> None:
        super().reset()
        self.seen: list[str] = []

    def ingest(self, session: Session) -> None:
        self.seen.extend(e.content for e in session.entries if e.kind.value == "user_turn")

    def build_context(self, probe: Probe) -> ContextPacket:
        items = [
            InjectedItem("transcript", f"seen:{n}", text, self.runtime.count_tokens(text))
            for n, text in enumerate(self.seen)
        ]
        return self._packet(probe, items)


class MutatesParameter(Remembering):
    def __init__(self, budget_tokens: int = 1200, labels: str = "a,b") -> None:
        self.budget_tokens = budget_tokens
        self.labels = labels.split(",")  # a constructor that "helps" by parsing


class BuildsInConstructor(Remembering):
    def __init__(self, budget_tokens: int = 1200, labels: str = "a,b") -> None:
        self.budget_tokens = budget_tokens
        self.labels = labels
        self.cache: dict[str, str] = {}


class SetParamsReturnsNothing(Remembering):
    def set_params(self, **params):
        for name, value in params.items():
            setattr(self, name, value)


class NotDeterministic(Remembering):
    calls = itertools.count()

    def build_context(self, probe: Probe) -> ContextPacket:
        text = f"call {next(self.calls)}"
        return self._packet(probe, [InjectedItem("memory", "counter", text, self.runtime.count_tokens(text))])


class LeaksPastBudget(Remembering):
    def build_context(self, probe: Probe) -> ContextPacket:
        text = "\n".join(self.seen)
        tokens = self.runtime.count_tokens(text)
        messages = ({"role": "system", "content": text}, {"role": "user", "content": probe.question})
        return ContextPacket(
            self.name, messages, (InjectedItem("transcript", "seen", text, tokens),), tokens, self.budget_tokens
        )


class PeeksAtGold(Remembering):
    def build_context(self, probe: Probe, gold: str | None = None) -> ContextPacket:
        return super().build_context(probe)


class ResetKeepsHistory(Remembering):
    def reset(self) -> None:
        Condition.reset(self)
        if not hasattr(self, "seen"):
            self.seen = []


def test_a_correct_condition_written_elsewhere_passes_every_check():
    check_condition(Remembering(), runtime)
    check_condition(Remembering(budget_tokens=30, labels="x"), runtime)


@pytest.mark.parametrize(
    "broken, failing_check",
    [
        (MutatesParameter, "check_constructor_stores_plain_parameters"),
        (BuildsInConstructor, "check_constructor_stores_plain_parameters"),
        (SetParamsReturnsNothing, "check_set_params"),
        (NotDeterministic, "check_interface_packet_and_determinism"),
        (LeaksPastBudget, "check_injected_tokens_within_budget"),
        (PeeksAtGold, "check_no_access_to_gold"),
        (ResetKeepsHistory, "check_reset_forgets_history"),
    ],
)
def test_a_broken_condition_fails_the_matching_check_by_name(broken, failing_check):
    condition = broken()
    with pytest.raises(ConditionCheckError, match=f"^{failing_check} failed for condition remembering: ") as caught:
        check_condition(condition, runtime)
    assert caught.value.check == failing_check and caught.value.condition == "remembering"
    with pytest.raises(ConditionCheckError, match=failing_check):
        dict(condition_checks(condition, runtime))[failing_check]()


def test_the_broken_conditions_fail_for_the_reason_they_are_broken():
    def reason(condition, check):
        with pytest.raises(ConditionCheckError) as caught:
            dict(condition_checks(condition, runtime))[check]()
        return caught.value.reason

    assert "stored parameter 'labels' as ['a', 'b-check']" in reason(
        MutatesParameter(), "check_constructor_stores_plain_parameters"
    )
    assert "set attribute(s) cache" in reason(BuildsInConstructor(), "check_constructor_stores_plain_parameters")
    assert "over a budget of 12" in reason(LeaksPastBudget(), "check_injected_tokens_within_budget")
    assert "never saw the history" in reason(ResetKeepsHistory(), "check_reset_forgets_history")
    assert "['probe', 'gold']" in reason(PeeksAtGold(), "check_no_access_to_gold")


# ---- parameters: set_params, clone, the registry -----------------------------------------------------
def test_set_params_refuses_an_unknown_name_like_the_registry():
    condition = build_condition("transcript-recall")
    expected = "condition 'transcript-recall' has no parameter(s) nope; it takes: budget_tokens, k, floor"
    with pytest.raises(LCAError, match=re.escape(expected)):
        condition.set_params(nope=1, k=2)
    with pytest.raises(LCAError, match=re.escape(expected)):
        build_condition("transcript-recall", nope=1)
    assert condition.k == 6  # nothing was set
    with pytest.raises(LCAError, match="plain string or number"):
        condition.set_params(k=[1])
    assert condition.set_params(k=2, floor=0.0) is condition and condition.get_params()["k"] == 2


def test_clone_is_unattached_with_equal_independent_parameters(tmp_path):
    original = build_condition("full-lca", verify=0).attach(runtime(tmp_path))
    copy = clone(original)
    assert type(copy) is type(original) and copy.get_params() == original.get_params()
    assert not hasattr(copy, "runtime")
    copy.set_params(verify=1)
    assert original.verify == 0


@pytest.mark.parametrize("name", ALL)
def test_registry_refuses_unknown_and_non_plain_parameters(name):
    with pytest.raises(LCAError, match="has no parameter"):
        build_condition(name, no_such_parameter=1)
    with pytest.raises(LCAError, match="plain string or number"):
        build_condition(name, budget_tokens=[1, 2])
    assert condition_class(name).name == name


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


def test_weights_speak_the_one_parameter_language():
    assert parse_weights("") == {} and parse_weights(" , ") == {}
    assert parse_weights("experience=0, temporal=0.1,") == {"experience": 0.0, "temporal": 0.1}
    assert parse_weights("risk=2") == {"risk": 2.0} and isinstance(parse_weights("risk=2")["risk"], float)
    with pytest.raises(
        ParameterError,
        match=re.escape(
            "weights 'gravity=1': unknown name 'gravity'; known: "
            "activation, authority, experience, risk, similarity, "
            "task, temporal"
        ),
    ):
        parse_weights("experience=0,gravity=1")
    with pytest.raises(ParameterError, match=re.escape("weights 'experience': expected NAME=VALUE")):
        parse_weights("experience")
    with pytest.raises(ParameterError, match=re.escape("weights 'temporal=soon': takes a number, not 'soon'")):
        parse_weights("temporal=soon")
    with pytest.raises(ParameterError, match="given twice"):
        parse_weights("risk=1,risk=2")


# ---- what is particular to one condition -------------------------------------------------------------
def test_stateless_injects_nothing_and_recall_conditions_bring_back_evidence(tmp_path):
    stateless = build_condition("stateless").attach(runtime(tmp_path / "s"))
    replay(stateless, contract_history())
    packet = stateless.build_context(PROBE)
    assert packet.items == () and packet.injected_tokens == 0 and len(packet.messages) == 1
    recall = build_condition("transcript-recall", floor=0.0).attach(runtime(tmp_path / "t"))
    replay(recall, contract_history())
    pointers = {p for item in recall.build_context(PROBE).items for p in item.pointers}
    assert "h1#h1:1" in pointers  # the turn that says where Lucia lives
    recall.reset()
    assert recall.build_context(PROBE).items == ()  # and reset forgets it
    recall.close()


def test_adversarial_summary_matches_full_lca_budget_measured_on_the_same_history(tmp_path):
    rt = runtime(tmp_path)
    adversarial = build_condition("adversarial-summary").attach(rt)
    replay(adversarial, contract_history())
    packet = adversarial.build_context(PROBE)
    full = build_condition("full-lca").attach(runtime(tmp_path / "full"))
    replay(full, contract_history())
    measured = full.build_context(PROBE).injected_tokens
    assert packet.notes["full_lca_injected"] == measured and packet.notes["matched_budget"] == measured
    assert packet.injected_tokens <= measured
    adversarial.close()
    full.close()


def test_full_lca_consolidates_at_session_end_and_ablations_are_parameters(tmp_path):
    full = build_condition("full-lca").attach(runtime(tmp_path / "v"))
    replay(full, contract_history())
    assert len(full.cycles) == 2 and full.cycles[0]["candidates"] >= 1
    kinds = {i.kind for i in full.build_context(PROBE).items}
    assert {"identity", "handoff"} <= kinds
    memories = full.substrate.memory.load().files
    assert memories and all(m.record.authority.value == "reviewed" for m in memories)
    full.close()
    unverified = build_condition("full-lca", verify=0).attach(runtime(tmp_path / "u"))
    replay(unverified, contract_history())
    assert all(m.record.authority.value == "unreviewed" for m in unverified.substrate.memory.load().files)
    unverified.close()
    with pytest.raises(ParameterError, match=re.escape("weights 'gravity=1': unknown name 'gravity'")):
        build_condition("full-lca", weights="gravity=1").attach(runtime(tmp_path / "w")).reset()


TWO_SENTENCES = "I moved to Lisbon in May this year. The flat has a blue door and a small garden."


@pytest.mark.parametrize("name", ["transcript-recall", "full-lca"])
def test_a_substrate_condition_ranks_by_its_runtimes_retrieval_config_and_by_the_stores_without_one(tmp_path, name):
    """A benchmark task hands its retrieval.yaml to the conditions through the runtime: their stores rank (and
    index) by it, so the recall they inject is what the benchmark's retrieval figures measure."""
    from lca.retrieval import RetrievalConfig

    chosen = RetrievalConfig(context_weight=0.5, question_weight=2.0, sentence_keys=True)
    for config, expected in ((chosen, chosen), (None, RetrievalConfig())):
        run = runtime(tmp_path / str(config is None))
        run.retrieval = config
        condition = build_condition(name, verify=0) if name == "full-lca" else build_condition(name)
        try:
            replay(condition.attach(run), contract_history(texts=[[TWO_SENTENCES, "Noted, the blue door."]]))
            assert condition.substrate.index.retrieval == expected
            keys = condition.substrate.index.catalog_.db.execute("SELECT count(*) FROM sentence_keys").fetchone()[0]
            assert (keys > 0) == (config is not None)  # what the index keeps follows the config too
        finally:
            condition.close()


@pytest.mark.parametrize("name", ["transcript-recall", "full-lca"])
def test_what_a_chosen_turn_shows_is_an_ablation_of_both_recall_conditions(name):
    on = build_condition(name).recall_config()
    off = build_condition(name, exchanges=0, excerpts=0).recall_config()
    assert (on.exchanges, on.excerpts) == (True, True)
    assert (off.exchanges, off.excerpts) == (False, False)
