"""The compaction protocol: its scorers on hand-made packets and answers (pass and fail), the truncation
condition, the shipped scenario file's design, and scripted-model runs whose scores move the right way."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from conditions import ConditionRuntime, Probe, Session, build_condition
from conditions.base import render_items
from conditions.checks import contract_history
from protocols.evals.compaction.bench import figures, pointer_measures
from protocols.evals.compaction.compaction import RESUME_FOLLOW_UPS
from protocols.evals.compaction.compaction import compaction as compaction_task
from protocols.evals.compaction.dataset import DEFAULT_SCENARIOS
from protocols.evals.compaction.scorer import (
    MEASURES,
    compaction_values,
    constraints_missing,
    mentioned,
    repeated_mistakes,
    thread_in_context,
    turns_to_resume,
)
from protocols.harness.scenario import load_scenarios
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]


# ---- the scorers on hand-made texts ------------------------------------------------------------------------
def test_a_mention_is_found_as_whole_words_whatever_the_case_and_punctuation():
    assert mentioned("Always do a Dry-Run first.", "dry-run")
    assert mentioned("reads go through port 6432", "6432")
    assert not mentioned("reads go through port 64321", "6432")
    assert not mentioned("anything", "")


def test_constraints_missing_counts_the_rules_a_text_does_not_hold():
    rules = ["dry-run", "Priya"]
    assert constraints_missing("Do a dry-run and get Priya's review... Priya approves it.", rules) == 0
    assert constraints_missing("Run a dry-run first.", rules) == 1
    assert constraints_missing("Just apply it tonight.", rules) == 2


def test_a_mistake_repeats_only_when_the_wrong_value_stands_without_the_right_one():
    assert repeated_mistakes("Point the reads at port 5432.", ["6432"], ["5432"]) == 1  # the corrected mistake again
    assert repeated_mistakes("Use 6432; 5432 is the primary.", ["6432"], ["5432"]) == 0  # stated with its correction
    assert repeated_mistakes("Use the replica.", ["6432"], ["5432"]) == 0  # not repeated, not right either
    assert repeated_mistakes("It was DNS, Twenge says so.", ["pool"], ["DNS", "Twenge"]) == 2


def test_turns_to_resume_is_the_first_answer_naming_the_thread_or_one_past_the_last():
    thread = ["card network"]
    assert turns_to_resume(["Impact by card network was loading."], thread) == 1
    assert turns_to_resume(["I am not sure.", "Splitting the impact per card network."], thread) == 2
    assert turns_to_resume(["I am not sure.", "No idea.", "Sorry."], thread) == 4  # never: one past the last turn
    assert turns_to_resume(["anything"], []) == 2  # no thread named in gold: never counted as resumed


def test_the_open_thread_is_in_the_context_by_pointer_or_for_pointerless_items_by_its_words():
    gold = {"evidence": ["x.s4#x.s4:1"], "required_mentions": ["pagination"]}
    assert thread_in_context({"pointers": ["x.s4#x.s4:1"], "injected_text": ""}, gold)
    assert thread_in_context({"pointers": [], "injected_text": "- adding cursor pagination, last page fails"}, gold)
    assert not thread_in_context({"pointers": ["x.s1#x.s1:1"], "injected_text": "the backfill job"}, gold)


def test_each_measure_applies_to_its_category_only_and_is_nan_elsewhere():
    gold = {"required_mentions": ["dry-run", "Priya"], "forbidden_mentions": [], "evidence": []}
    values = compaction_values("constraint", gold, {"injected_text": "dry-run first"}, ["Ask Priya."])
    assert values["constraints_missing_context"] == 1.0 and values["constraints_missing_answer"] == 1.0
    assert all(math.isnan(values[m]) for m in MEASURES if not m.startswith("constraints"))
    wrong = {"required_mentions": ["6432"], "forbidden_mentions": ["5432"], "evidence": []}
    values = compaction_values("correction", wrong, {"injected_text": "port: 5432 # stale"}, ["6432, not 5432"])
    assert values["repeated_mistakes_context"] == 1.0 and values["repeated_mistakes_answer"] == 0.0
    assert math.isnan(values["turns_to_resume"]) and math.isnan(values["constraints_missing_answer"])
    thread = {"required_mentions": ["Dube"], "forbidden_mentions": [], "evidence": ["p"]}
    values = compaction_values("interruption", thread, {"pointers": [], "injected_text": ""}, ["?", "Dube 2017"])
    assert values["resume_context"] == 0.0 and values["turns_to_resume"] == 2.0


def test_pointer_level_figures_count_missing_constraint_turns_and_uncorrected_mistakes():
    rows = [
        {"category": "constraint", "gold": ["a", "b"], "forbidden": [], "pointers": ["a"], "injected_tokens": 10},
        {
            "category": "correction",
            "gold": ["fix"],
            "forbidden": ["wrong", "stale"],
            "pointers": ["stale"],
            "injected_tokens": 10,
        },
        {
            "category": "correction",
            "gold": ["fix"],
            "forbidden": ["wrong"],
            "pointers": ["wrong", "fix"],
            "injected_tokens": 10,
        },
        {"category": "interruption", "gold": ["open"], "forbidden": [], "pointers": [], "injected_tokens": 0},
    ]
    assert pointer_measures(rows[0]) == {"constraints_missing": 1.0}
    assert pointer_measures(rows[1]) == {"repeated_mistakes": 1.0}  # the stale artifact, its correction absent
    assert pointer_measures(rows[2]) == {"repeated_mistakes": 0.0}  # injected with its correction
    out = figures(rows)
    assert out["repeated_mistakes"] == 0.5 and out["resume_context"] == 0.0 and out["probes"]["repeated_mistakes"] == 2


def test_the_substrate_run_is_the_bench_plug_in_of_the_folder(tmp_path, monkeypatch, capsys):
    """``lca bench compaction`` is found in the protocol's folder and writes one BenchmarkResult."""
    import protocols.evals.compaction.bench as compaction_bench
    from protocols.bench import benchmark
    from protocols.evals.benchmark import BenchmarkResult

    def fake_runtime(workdir: Path, identity) -> ConditionRuntime:
        return ConditionRuntime(workdir=workdir, embedder=FakeHashingEmbedder(), identity=identity)

    monkeypatch.setattr(compaction_bench, "runtime_factory", lambda args: (fake_runtime, FakeHashingEmbedder(), {}))
    bench = benchmark("compaction")
    assert bench is compaction_bench.BENCHMARK
    out = tmp_path / "compaction.json"
    args = bench.parser().parse_args(
        ["--conditions", "truncation,transcript-recall", "--limit", "2", "--out", str(out)]
    )
    assert bench.run(args) == 0
    result = BenchmarkResult.read(out)
    assert result.benchmark == "compaction" and set(result.metrics) == {"truncation", "transcript-recall"}
    assert result.config["budget_tokens"] == 600 and len(result.rows) == 4
    assert "transcript-recall" in capsys.readouterr().out


# ---- the truncation condition -----------------------------------------------------------------------------
def _runtime(tmp_path) -> ConditionRuntime:
    return ConditionRuntime(workdir=tmp_path, embedder=FakeHashingEmbedder())


def test_truncation_keeps_the_newest_turns_that_fit_verbatim_and_newest_last(tmp_path):
    runtime = _runtime(tmp_path)
    sessions = contract_history()
    everything = [e for s in sessions for e in s.entries]
    full = build_condition("truncation", budget_tokens=4000).attach(runtime)
    full.reset()
    for session in sessions:
        full.ingest(session)
        full.end_session()
    packet = full.build_context(Probe("p", "Where were we?"))
    assert [i.source for i in packet.items] == [f"{e.session_id}#{e.id}" for e in everything]
    assert packet.items[-1].text == "assistant: I will keep answers brief."
    small = build_condition("truncation", budget_tokens=40).attach(_runtime(tmp_path / "small"))
    small.reset()
    for session in sessions:
        small.ingest(session)
    cut = small.build_context(Probe("p", "Where were we?"))
    kept = [i.source for i in cut.items]
    assert 0 < len(kept) < len(everything) and kept == [i.source for i in packet.items][-len(kept) :]  # a tail
    assert small.runtime.count_tokens(render_items(cut.items)) <= 40 == cut.budget_tokens
    assert cut.notes["turns_kept"] == len(kept) and cut.notes["turns_in_history"] == len(everything)


def test_truncation_keeps_no_memory_files_and_nothing_after_reset(tmp_path):
    condition = build_condition("truncation").attach(_runtime(tmp_path))
    condition.reset()
    condition.ingest(Session("s", contract_history()[0].entries))
    assert condition.build_context(Probe("p", "q")).items
    condition.reset()
    assert not condition.build_context(Probe("p", "q")).items


# ---- the shipped scenarios --------------------------------------------------------------------------------
def test_the_shipped_file_plants_constraints_a_corrected_mistake_and_an_interrupted_last_session():
    scenarios, _ = load_scenarios(DEFAULT_SCENARIOS)
    assert {s.id.split("-")[1] for s in scenarios} == {"billing", "eu", "sleep"} and len(scenarios) == 3
    for scenario in scenarios:
        assert 3 <= len(scenario.sessions) <= 4
        last = scenario.sessions[-1]
        assert last.turns[-1].event is not None and last.turns[-1].event.type == "interruption"
        by_category = {p.category: p for p in scenario.probes}
        assert {"constraint", "correction", "interruption"} <= set(by_category)
        resume = by_category["interruption"]
        assert all(r.session == last.id for r in resume.evidence)  # the open thread is in the cut session
        correction = by_category["correction"]
        (fix,) = correction.evidence
        turns = {s.id: s.turns for s in scenario.sessions}
        fixed = turns[fix.session][fix.turn - 1]
        assert fixed.event.type == "correction"
        assert repeated_mistakes(fixed.content, correction.required_mentions, correction.forbidden_mentions) == 0
        assert not constraints_missing(fixed.content, correction.required_mentions)  # it states the right value
        order = [s.id for s in scenario.sessions]
        stale = [r for r in correction.forbidden if order.index(r.session) > order.index(fix.session)]
        assert stale, "a stale artifact repeats the wrong value after the correction"
        for ref in correction.forbidden:  # the wrong value stands there without the right one
            text = turns[ref.session][ref.turn - 1].content
            assert repeated_mistakes(text, correction.required_mentions, correction.forbidden_mentions) == 1
        for probe in scenario.probes:  # the answer is not in the question
            assert constraints_missing(probe.question, probe.required_mentions) == len(probe.required_mentions)


# ---- end to end with a scripted agent -----------------------------------------------------------------------
GOOD = "pagination card network Dube dry-run Priya June explicit go Amara 2015 onwards objective page reference 6432 connection pool Mireku"
BAD = "Use 5432, it was DNS, and Twenge 2017 heads the plot."


def scripted_agent(answers):
    """inspect's mock model answering by the turn of the conversation (1 for the first user turn)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def respond(messages, tools, tool_choice, config):
        turn = sum(1 for m in messages if m.role == "user")
        output = ModelOutput.from_content(model="scripted", content=answers[min(turn, len(answers)) - 1])
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


RESUME_IDS = [
    "compaction-billing-migration:resume",
    "compaction-eu-payments-incident:resume",
    "compaction-sleep-review:resume",
]


def run(tmp_path, condition: str, answers, sample_id=None, **kw) -> dict[str, float]:
    from inspect_ai import eval as inspect_eval

    task = compaction_task(condition=condition, **kw)
    (log,) = inspect_eval(
        task, model=scripted_agent(answers), sample_id=sample_id, log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success" and len(log.samples) == (len(sample_id) if sample_id else 10)
    return {s.name: s.metrics["mean"].value for s in log.results.scores if "mean" in s.metrics}


@pytest.fixture
def fake_embedder(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))


def test_scripted_answers_and_conditions_move_the_measures_the_right_way(tmp_path, fake_embedder):
    good = run(tmp_path / "good", "truncation", [GOOD])
    bad = run(tmp_path / "bad", "truncation", [BAD])
    late = run(tmp_path / "late", "truncation", ["I am not sure.", GOOD], sample_id=RESUME_IDS)
    # behaviour: the answers
    assert good["constraints_missing_answer"] == 0 < bad["constraints_missing_answer"]
    assert good["repeated_mistakes_answer"] == 0 < bad["repeated_mistakes_answer"] == 1
    assert good["turns_to_resume"] == 1 < late["turns_to_resume"] == 2 < bad["turns_to_resume"] == 4
    none = run(tmp_path / "none", "truncation", [BAD], sample_id=RESUME_IDS, follow_ups=0)
    assert none["turns_to_resume"] == 2  # one turn, no answer named the thread
    # substrate: what the condition injected, whatever the answers
    assert good["resume_context"] == bad["resume_context"] == 1 and good["injected_tokens"] <= 600
    stateless = run(tmp_path / "s", "stateless", [BAD])
    everything = run(tmp_path / "all", "truncation", [BAD], params="budget_tokens=6000")
    assert stateless["resume_context"] == 0 < bad["resume_context"]
    assert stateless["injected_tokens"] == 0 < bad["injected_tokens"]
    assert stateless["repeated_mistakes_context"] == 0 < bad["repeated_mistakes_context"]  # the stale tail
    assert everything["constraints_missing_context"] == 0 < bad["constraints_missing_context"]
    assert everything["repeated_mistakes_context"] == 0  # the whole history holds each correction


def test_follow_ups_out_of_range_are_refused():
    from lca.errors import LCAError

    with pytest.raises(LCAError, match="follow_ups must be 0 to 3"):
        compaction_task(condition="stateless", follow_ups=len(RESUME_FOLLOW_UPS) + 1)
