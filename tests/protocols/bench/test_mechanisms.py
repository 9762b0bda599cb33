"""`lca bench mechanisms`: every ablatable mechanism changes what is injected on the shipped scenario that needs
it. The slow test runs the real embedder over the shipped file (substrate level, no agent model); the fast ones
check the case table's plumbing."""

from __future__ import annotations

import pytest

from protocols.bench import benchmark
from protocols.bench.mechanisms import (
    CASES,
    DEFAULT_SCENARIOS,
    SCENARIO_FOLDER,
    MechanismCase,
    judge,
    typed_params,
    variant_with,
)
from protocols.harness.scenario import load_scenarios


def test_every_case_names_a_shipped_probe_and_a_valid_ablation():
    assert len({c.mechanism for c in CASES}) == len(CASES) == 14
    for case in CASES:
        scenarios = {
            s.id: s for s in load_scenarios(SCENARIO_FOLDER / case.file if case.file else DEFAULT_SCENARIOS)[0]
        }
        probe = next(p for p in scenarios[case.scenario].probes if p.id == case.probe)
        assert probe.evidence, case.mechanism  # the gold says what the mechanism is for
        name, on = typed_params(case.condition)
        _, off = typed_params(variant_with(case.condition, case.off))
        assert name == "full-lca" and on != off  # the one assignment changes the condition


def test_variant_with_replaces_an_assignment_of_the_same_name():
    assert variant_with("full-lca[budget_tokens=100,handoff=0]", "handoff=1") == "full-lca[budget_tokens=100,handoff=1]"
    assert variant_with("full-lca[policy=adaptive]", "weights.task=0") == "full-lca[policy=adaptive,weights.task=0]"


def row(gold_all: bool, forbidden_kept_out, *, items: int = 1, action: str = "inject", held: int = 0, shown=None):
    return {
        "needed_text": shown,
        "gold_all": gold_all,
        "forbidden_kept_out": forbidden_kept_out,
        "recall_items": items,
        "recall_action": action,
        "gold": ["a", "b", "c"],
        "pointers": ["a", "b", "c"][:held],
    }


def test_a_case_passes_only_when_the_mechanism_decided_the_outcome():
    gold = MechanismCase("T", "s", "q", "full-lca", "weights.temporal=0")
    assert judge(gold, row(True, True), row(False, False))
    assert not judge(gold, row(True, True), row(True, True))  # off did as well: the mechanism did not act
    assert not judge(gold, row(True, False), row(False, False))  # on let the forbidden turn in
    defer = MechanismCase("adaptive", "s", "q", "full-lca", "policy=fixed-k", "defer")
    assert judge(defer, row(False, None, items=0, action="defer"), row(True, None, items=3))
    assert not judge(defer, row(False, None, items=0, action="skip"), row(True, None, items=3))
    more = MechanismCase("wildcards", "s", "q", "full-lca", "living_memory=0", "more")
    assert judge(more, row(False, None, held=3), row(False, None, held=2))
    assert not judge(more, row(False, None, held=2), row(False, None, held=2))
    text = MechanismCase("excerpts", "s", "q", "full-lca", "excerpts=0", "text")
    assert judge(text, row(True, None, shown=1.0), row(True, None, shown=0.0))
    assert not judge(text, row(True, None, shown=1.0), row(True, None, shown=1.0))  # shown without it too
    assert not judge(text, row(True, None, shown=1.0), row(False, None, shown=0.0))  # off lost the turn: not the text


def test_the_command_refuses_an_unknown_case_and_a_missing_file(tmp_path, capsys):
    bench = benchmark("mechanisms")
    assert bench.run(bench.parser().parse_args(["--only", "gravity"])) == 2
    assert "known: S similarity" in capsys.readouterr().err
    assert bench.run(bench.parser().parse_args(["--scenarios", str(tmp_path / "none.jsonl")])) == 2
    assert "none.jsonl" in capsys.readouterr().err


@pytest.mark.slow
def test_every_mechanism_acts_on_the_shipped_scenarios_with_the_real_embedder(tmp_path):
    from protocols.evals.benchmark import BenchmarkResult

    bench = benchmark("mechanisms")
    out = tmp_path / "mechanisms.json"
    assert bench.run(bench.parser().parse_args(["--out", str(out)])) == 0
    result = BenchmarkResult.read(out)
    assert result.metrics == {"acted": 14, "cases": 14} and result.all_pass
    assert len(result.provenance.datasets) == 2  # mechanisms-v2 and mechanisms-shown-v1, each with its sha256
    by_mechanism = {r["mechanism"]: r for r in result.rows}
    assert by_mechanism["adaptive policy"]["with"]["recall_action"] == "defer"
    assert by_mechanism["K risk"]["without"]["forbidden_kept_out"] is False  # the conflicted memory got in
    assert by_mechanism["excerpts"]["without"]["needed_text"] == 0.0  # the opening cut stops before the hose
    assert (
        "| handoffs |" in out.with_suffix(".md").read_text() and "| resume tail |" in out.with_suffix(".md").read_text()
    )
