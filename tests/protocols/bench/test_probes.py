"""`lca bench probes` on a tiny scenario with the fake embedder: the per-condition shares come from the
injected items' pointers, stateless injects nothing, and bad options are refused before anything loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conditions import ConditionRuntime
from protocols.bench import benchmark
from protocols.bench.probes import measure
from protocols.harness.substrate import condition_params
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

SCENARIO = {
    "schema_version": 1,
    "id": "tiny",
    "sessions": [
        {
            "id": "s1",
            "started_at": "2026-02-02T09:00:00",
            "turns": [
                {"role": "user", "content": "sister lucia works night shifts nurse santa maria hospital lisbon"},
                {"role": "assistant", "content": "noted lucia nurse santa maria"},
            ],
        },
        {
            "id": "s2",
            "started_at": "2026-02-09T09:00:00",
            "turns": [{"role": "user", "content": "garage booked truck four thirteenth"}],
        },
    ],
    "probes": [
        {
            "id": "q1",
            "question": "where does my sister lucia work as a nurse",
            "answer": "Santa Maria hospital",
            "evidence": [{"session": "s1", "turn": 1}],
            "asked_at": "2026-03-01T10:00:00",
        },
        {
            "id": "q2",
            "question": "which day did I book the garage for truck four",
            "answer": "the thirteenth",
            "evidence": [{"session": "s2", "turn": 1}],
            "asked_at": "2026-03-01T10:05:00",
        },
    ],
}


@pytest.fixture
def scenario_file(tmp_path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps(SCENARIO) + "\n")
    return path


def fake_runtime(workdir: Path, identity) -> ConditionRuntime:
    return ConditionRuntime(workdir=workdir, embedder=FakeHashingEmbedder(), identity=identity)


def test_probes_share_is_read_from_the_injected_pointers(scenario_file):
    conditions = {"stateless": {}, "transcript-recall": {}, "full-lca": {"consolidate": 0}}
    out = measure(scenario_file, conditions, fake_runtime)
    assert len(out["sha256"]) == 64 and set(out["conditions"]) == set(conditions)
    stateless = out["conditions"]["stateless"]["figures"]
    assert stateless["probes"] == 2 and stateless["gold_all"] == 0.0 and stateless["nothing_injected"] == 1.0
    for name in ("transcript-recall", "full-lca"):
        block = out["conditions"][name]
        assert block["figures"]["gold_all"] == 1.0 and block["figures"]["injected_tokens_mean"] > 0
        for row in block["rows"]:
            assert set(row["gold"]) <= set(row["pointers"]) and row["forbidden_kept_out"] is None
    assert out["conditions"]["transcript-recall"]["rows"][0]["gold"] == ["tiny.s1#tiny.s1:1"]


def test_condition_parameters_are_typed_and_unknown_ones_refused():
    params = condition_params(
        ["transcript-recall", "full-lca"], ["transcript-recall:floor=0.4", "full-lca:consolidate=0"]
    )
    assert params == {"transcript-recall": {"floor": 0.4}, "full-lca": {"consolidate": 0}}
    with pytest.raises(Exception, match="nope"):
        condition_params(["transcript-recall"], ["transcript-recall:nope=1"])
    with pytest.raises(ValueError, match="CONDITION:NAME=VALUE"):
        condition_params(["transcript-recall"], ["stateless:budget_tokens=5"])


def test_the_command_refuses_a_missing_file_and_a_bad_parameter(tmp_path, capsys):
    bench = benchmark("probes")
    args = bench.parser().parse_args(["--scenarios", str(tmp_path / "none.jsonl")])
    assert bench.run(args) == 2 and "no scenario file" in capsys.readouterr().err
    args = bench.parser().parse_args(["--param", "stateless:nope=1", "--conditions", "stateless"])
    assert bench.run(args) == 2 and "nope" in capsys.readouterr().err
    # a summary condition with no model to write its summaries is refused, not run empty
    args = bench.parser().parse_args(["--conditions", "stateless,adversarial-summary"])
    assert bench.run(args) == 2 and "adversarial-summary write summaries with a model" in capsys.readouterr().err


def test_the_command_writes_a_benchmark_result_with_its_checks_and_rows(scenario_file, tmp_path, monkeypatch):
    from protocols.evals.benchmark import BenchmarkResult
    from protocols.harness import substrate

    monkeypatch.setattr(substrate, "runtime_factory", lambda args: (fake_runtime, FakeHashingEmbedder(), {}))
    out = tmp_path / "probes.json"
    bench = benchmark("probes")
    args = bench.parser().parse_args(["--scenarios", str(scenario_file), "--out", str(out)])
    assert bench.run(args) == 0
    result = BenchmarkResult.read(out)
    assert result.benchmark == "probes" and result.provenance.embedder_id == FakeHashingEmbedder().embedder_id
    figures = result.metrics[str(scenario_file)]
    assert figures["stateless"]["gold_all"] == 0.0 and figures["transcript-recall"]["gold_all"] == 1.0
    assert set(result.checks) == {"tiny/transcript-recall/gold_all", "tiny/full-lca/gold_all"} and result.all_pass
    assert {row["condition"] for row in result.rows} == {"stateless", "transcript-recall", "full-lca"}
    assert result.config["full_lca_consolidation"].startswith("off")


def test_text_level_twins_score_a_pointer_free_summary_by_its_prose(tmp_path):
    """A summary injects prose without pointers: ``needed_text`` (required mentions in the injected text) is the
    twin it can meet, while the pointer share stays 0; stateless meets neither."""
    scenario = {
        **SCENARIO,
        "schema_version": 2,
        "probes": [{**SCENARIO["probes"][0], "required_mentions": ["santa maria"], "forbidden_mentions": ["porto"]}],
    }
    path = tmp_path / "tiny-v2.jsonl"
    path.write_text(json.dumps(scenario) + "\n")
    fake_summarizer = FakeScriptedGenerator(lambda messages: "Lucia, the user's sister, is a nurse at Santa Maria.")

    def runtime(workdir: Path, identity) -> ConditionRuntime:
        return ConditionRuntime(
            workdir=workdir,
            embedder=FakeHashingEmbedder(),
            identity=identity,
            generators={"summarizer": fake_summarizer},
        )

    out = measure(path, {"stateless": {}, "summary": {}, "transcript-recall": {}}, runtime)
    rows = {name: block["rows"][0] for name, block in out["conditions"].items()}
    assert rows["stateless"]["needed_text"] is False and rows["stateless"]["gold_all"] is False
    assert rows["summary"]["gold_all"] is False and rows["summary"]["needed_text"] is True
    assert rows["transcript-recall"]["gold_all"] is True and rows["transcript-recall"]["needed_text"] is True
    assert all(row["forbidden_out"] is True for row in rows.values())
    assert out["conditions"]["summary"]["figures"]["needed_text"] == 1.0


def test_identical_summarizer_calls_across_probes_are_made_once():
    """The bench's summarizer is shared by the probes of a scenario: the same prompt is generated once, a
    different prompt or setting is a new call."""
    from protocols.harness.solvers import SharedRoleCalls
    from protocols.providers.models import SharedCallsGenerator

    inner = FakeScriptedGenerator(lambda messages: f"summary of {messages[-1]['content']}")
    shared = SharedCallsGenerator(inner, SharedRoleCalls())
    session = [{"role": "user", "content": "session one"}]
    first = shared.generate(session, max_tokens=64)
    assert shared.generate(session, max_tokens=64) == first == "summary of session one"
    shared.generate(session, max_tokens=32)
    shared.generate([{"role": "user", "content": "session two"}], max_tokens=64)
    assert len(inner.calls) == 3 and shared.calls == 4 and shared.shared_calls == 1
    assert shared.model_id == inner.model_id


CHANGED = {
    "schema_version": 2,
    "id": "budget",
    "sessions": [
        {
            "id": "s1",
            "started_at": "2026-03-01T09:00:00",
            "turns": [
                {"role": "user", "content": "The monthly grocery budget is $120 for the household."},
                {"role": "assistant", "content": "Noted."},
            ],
        },
        {
            "id": "s2",
            "started_at": "2026-03-10T09:00:00",
            "turns": [
                {
                    "role": "user",
                    "content": "Change of plan: the monthly grocery budget is now $150 for the household.",
                },
                {"role": "assistant", "content": "Got it."},
            ],
        },
    ],
    "probes": [
        {
            "id": "q1",
            "question": "what is my monthly grocery budget for the household now",
            "answer": "$150",
            "evidence": [{"session": "s2", "turn": 1}],
            "forbidden": [{"session": "s1", "turn": 1}],
            "asked_at": "2026-03-11T10:00:00",
            "category": "current-state",
        }
    ],
    "gold_events": [{"type": "supersedes", "of": {"session": "s1", "turn": 1}, "by": {"session": "s2", "turn": 1}}],
}


def test_unlabelled_measures_separate_the_conditions_and_are_checked_against_the_targets(tmp_path):
    """A change no turn labels: transcript-recall injects the replaced turn unmarked, full-lca infers the event at
    ingest and holds the turn back; both hold nothing still in force. The targets are checked for full-lca only."""
    from protocols.bench.probes import unlabelled_checks

    path = tmp_path / "budget.jsonl"
    path.write_text(json.dumps(CHANGED) + "\n")
    out = measure(path, {"transcript-recall": {}, "full-lca": {"consolidate": 0}}, fake_runtime)
    plain, lca = (out["conditions"][n]["figures"] for n in ("transcript-recall", "full-lca"))
    assert plain["stale_injected"] == 1 and plain["stale_unmarked"] == 1.0
    assert plain["current_state_forbidden_kept_out"] == 0.0 and plain["inferred_kept"] == 0
    assert lca["inferred_kept"] == 1 and lca["inferred_kept_precision"] == 1.0 and lca["inferred_kept_recall"] == 1.0
    # held back, or shown with its marker: never injected silently
    assert lca["stale_injected"] == 0 or lca["stale_unmarked"] == 0.0
    assert plain["false_hold"] == lca["false_hold"] == 0.0
    checks = unlabelled_checks(lca)
    assert set(checks) == {
        "current_state_forbidden_kept_out",
        "stale_unmarked",
        "false_hold",
        "inferred_held_precision",
    }
    assert checks["false_hold"]["pass"] and checks["false_hold"]["value"] == 0.0
    assert checks["stale_unmarked"]["pass"] == (lca["stale_unmarked"] is not None and lca["stale_unmarked"] <= 0.1)
    assert unlabelled_checks({**lca, "gold_unlabelled_events": 0}) == {}
