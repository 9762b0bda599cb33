"""The recall-budget ablation: the variant list parses (and bad variants are refused before anything loads), the
needed-in / forbidden-out check is right on hand-made pointers, and ``lca bench recall-budget`` on the shipped
mechanism scenarios with the fake embedder pairs its variants by probe, recalls nothing under ``policy=none`` and
writes the record, the table and a frontier plot. The slow test runs the real embedder (short)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conditions import ConditionRuntime
from lca.errors import LCAError
from protocols.bench import benchmark
from protocols.evals.recall_budget.bench import (
    POLICY_VARIANTS,
    against_baseline,
    default_variants,
    measure,
    pareto_front,
    parse_budget_variants,
    plot_frontier,
)
from protocols.evals.recall_budget.dataset import FIXTURE
from protocols.evals.recall_budget.scorer import probe_continuity
from protocols.harness.scenario import load_scenarios
from tests.fakes import FakeHashingEmbedder

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LABELS = ("full-lca[policy=fixed-k]", "full-lca[policy=none]", "full-lca[policy=none,handoff=0]")
THREE = ",".join(LABELS)  # a comma inside brackets belongs to its variant


def fake_runtime(workdir: Path, identity) -> ConditionRuntime:
    return ConditionRuntime(workdir=workdir, embedder=FakeHashingEmbedder(), identity=identity)


# ---- the variant list ---------------------------------------------------------------------------------
def test_the_default_variants_are_the_policies_then_each_default_term_zeroed():
    labels = default_variants()
    assert labels[:3] == POLICY_VARIANTS
    assert labels[3:] == tuple(
        f"full-lca[weights.{t}=0]" for t in ("similarity", "experience", "temporal", "authority", "task", "risk")
    )  # activation is off by default: zeroing it would be the baseline again
    variants = parse_budget_variants(",".join(labels))
    assert [v.label for v in variants] == list(labels) and {v.condition for v in variants} == {"full-lca"}
    by_label = {v.label: v.params for v in variants}
    assert by_label["full-lca[policy=none]"] == {"policy": "none", "consolidate": 0}
    assert by_label["full-lca[weights.temporal=0]"] == {"weights": "temporal=0.0", "consolidate": 0}


def test_a_variant_may_set_consolidation_and_take_other_conditions():
    variants = parse_budget_variants("transcript-recall[floor=0.3], full-lca[consolidate=1,budget_tokens=300]")
    assert [(v.label, v.params) for v in variants] == [
        ("transcript-recall[floor=0.3]", {"floor": 0.3}),
        ("full-lca[consolidate=1,budget_tokens=300]", {"consolidate": 1, "budget_tokens": 300}),
    ]


@pytest.mark.parametrize(
    "text,message",
    [
        ("full-lca[policy=sometimes]", "unknown policy 'sometimes'"),
        ("full-lca[weights.gravity=0]", "unknown weight 'gravity'"),
        ("full-lca[nope=1]", "has no parameter 'nope'"),
        ("full-lca[policy=none],full-lca[policy=none]", "twice"),
        ("hollow", "hollow"),
    ],
)
def test_a_bad_variant_is_refused_naming_it(text, message):
    with pytest.raises(LCAError, match=message):
        parse_budget_variants(text)


def test_the_command_refuses_a_bad_variant_and_a_missing_file_before_loading(tmp_path, capsys):
    bench = benchmark("recall-budget")
    args = bench.parser().parse_args(["--scenarios", str(FIXTURE), "--variants", "full-lca[policy=maybe]"])
    assert bench.run(args) == 2 and "policy=maybe" in capsys.readouterr().err
    args = bench.parser().parse_args(["--scenarios", str(tmp_path / "none.jsonl")])
    assert bench.run(args) == 2 and "none.jsonl" in capsys.readouterr().err


# ---- the measure on hand-made pointers -----------------------------------------------------------------
def test_needed_in_and_forbidden_out_are_read_from_the_pointers():
    met = probe_continuity(["s1#a", "s2#b"], evidence=["s1#a"], forbidden=["s0#old"])
    assert (met.needed_in, met.forbidden_out, met.both) == (True, True, True)
    leaked = probe_continuity(["s1#a", "s0#old"], evidence=["s1#a"], forbidden=["s0#old"])
    assert (leaked.needed_in, leaked.forbidden_out, leaked.both) == (True, False, False)
    partial = probe_continuity(["s1#a"], evidence=["s1#a", "s2#b"], forbidden=[])
    assert (partial.needed_in, partial.forbidden_out, partial.both) == (False, None, False)
    abstain = probe_continuity([], evidence=[], forbidden=[])  # nothing named: nothing to miss
    assert (abstain.needed_in, abstain.forbidden_out, abstain.both) == (None, None, True)


def test_the_frontier_keeps_only_undominated_variants():
    points = [("none", 0.0, 0.2), ("fixed", 300.0, 0.9), ("worse", 320.0, 0.8), ("same-cost", 300.0, 0.5)]
    assert [p[0] for p in pareto_front(points)] == ["none", "fixed"]


def test_variants_are_paired_by_probe_against_the_baseline():
    def row(key, base, other):
        return {
            "probe_key": key,
            "variants": {
                "a": {"needed_in_forbidden_out": base, "injected_tokens": 100},
                "b": {"needed_in_forbidden_out": other, "injected_tokens": 40},
            },
        }

    paired = against_baseline([row("s:q1", True, False), row("s:q2", False, True), row("s:q3", True, True)], "a", "b")
    assert paired["gained_probes"] == ["s:q2"] and paired["lost_probes"] == ["s:q1"]
    assert (paired["gained"], paired["lost"], paired["injected_tokens_delta_mean"]) == (1, 1, -60.0)


# ---- the bench with the fake embedder --------------------------------------------------------------------
@pytest.fixture(scope="module")
def measured():
    return measure(FIXTURE, parse_budget_variants(THREE), fake_runtime, limit=4)


def test_policy_none_recalls_nothing_and_fixed_k_injects(measured):
    for row in measured["rows"]:
        fixed, none, bare = (row["variants"][label] for label in LABELS)
        assert fixed["injected_tokens"] > 0 and none["recall_items"] == 0 and none["recall_action"] == "none"
        assert bare["injected_tokens"] == 0 and bare["items"] == 0  # no recall and no handoff: nothing at all
    figures = {label: block["figures"] for label, block in measured["variants"].items()}
    assert figures["full-lca[policy=none]"]["nothing_recalled"] == 1.0
    assert figures["full-lca[policy=fixed-k]"]["recall_items_mean"] > 0
    assert figures["full-lca[policy=none,handoff=0]"]["needed_in"] == 0.0  # nothing injected holds no turn
    assert figures["full-lca[policy=fixed-k]"]["needed_in"] == 1.0


def test_rows_pair_every_variant_on_the_same_probe(measured):
    rows = measured["rows"]
    assert len(rows) == 4 and len({r["probe_key"] for r in rows}) == 4
    assert all(set(r["variants"]) == set(LABELS) for r in rows)
    scenarios = {sc.id: sc for sc in load_scenarios(FIXTURE)[0]}
    for r in rows:  # one gold per probe, the scenario's own pointers
        scenario = scenarios[r["scenario"]]
        probe = next(p for p in scenario.probes if p.id == r["probe"])
        assert r["gold"] == scenario.evidence_pointers(probe) and r["forbidden"] == [
            scenario.pointer(ref) for ref in probe.forbidden
        ]
    for label, block in measured["variants"].items():  # the figures are the rows' own, variant by variant
        share = sum(r["variants"][label]["needed_in_forbidden_out"] for r in rows) / len(rows)
        assert block["figures"]["needed_in_forbidden_out"] == round(share, 4)
    assert "against_baseline" not in measured["variants"]["full-lca[policy=fixed-k]"]["figures"]


def test_the_plot_is_written(measured, tmp_path):
    out = plot_frontier([measured, measured], tmp_path / "plots" / "frontier.png", embedder_id="fake")
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_the_command_writes_the_record_table_and_plot(tmp_path, monkeypatch):
    from protocols.evals.benchmark import BenchmarkResult
    from protocols.harness import substrate

    monkeypatch.setattr(substrate, "runtime_factory", lambda args: (fake_runtime, FakeHashingEmbedder(), {}))
    out = tmp_path / "recall-budget.json"
    bench = benchmark("recall-budget")
    argv = ["--scenarios", str(FIXTURE), "--scenarios", str(FIXTURE), "--variants", THREE, "--limit", "2"]
    assert bench.run(bench.parser().parse_args([*argv, "--out", str(out)])) == 0
    result = BenchmarkResult.read(out)
    assert result.benchmark == "recall-budget" and result.all_pass
    assert set(result.checks) == {
        "mechanisms-v2/full-lca[policy=none]/nothing_recalled",
        "mechanisms-v2/full-lca[policy=none,handoff=0]/nothing_recalled",
    }
    assert set(result.metrics) == {str(FIXTURE), "all files"} and len(result.rows) == 4
    assert result.metrics["all files"]["full-lca[policy=none]"]["probes"] == 4
    assert result.config["baseline"] == "full-lca[policy=fixed-k]"
    assert out.with_suffix(".png").read_bytes().startswith(PNG_MAGIC)
    assert "| `full-lca[policy=none]` |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_the_real_embedder_on_the_mechanism_scenarios(tmp_path):
    from protocols.evals.benchmark import BenchmarkResult

    out = tmp_path / "recall-budget.json"
    bench = benchmark("recall-budget")
    argv = ["--scenarios", str(FIXTURE), "--variants", "full-lca[policy=fixed-k],full-lca[policy=none]"]
    assert bench.run(bench.parser().parse_args([*argv, "--limit", "3", "--out", str(out)])) == 0
    result = BenchmarkResult.read(out)
    figures = result.metrics[str(FIXTURE)]
    assert figures["full-lca[policy=none]"]["nothing_recalled"] == 1.0
    assert figures["full-lca[policy=fixed-k]"]["needed_in"] == 1.0  # the mechanism probes' turns are recalled
    assert (
        figures["full-lca[policy=fixed-k]"]["injected_tokens_mean"]
        > figures["full-lca[policy=none]"]["injected_tokens_mean"]
    )
    assert result.provenance.embedder_id != FakeHashingEmbedder().embedder_id
    assert out.with_suffix(".png").stat().st_size > 10_000
