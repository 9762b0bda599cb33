"""``lca bench imprinting`` with the fake embedder: one replay per agent serves every checkpoint, checkpoint 0
brings no lesson in, met lessons come in and their E mass grows with approvals, out-of-domain cases bring in no
lesson, asking leaves no trace in the store, the arms pair up, a procedural arm that writes rules has procedural
memories and one that writes nothing reports the shortfall; the command writes the record, table and plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conditions import ConditionRuntime
from protocols.bench import benchmark
from protocols.evals.domain_imprinting.bench import arm_params, leaves_no_trace, measure, spearman, timelines
from protocols.evals.domain_imprinting.scenarios import Parameters, generate
from protocols.harness.scenario import Scenario
from protocols.scenarios.card import scenario_lines
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PARAMS = Parameters(seed=11, domains=("software-engineering", "incident-response"), epochs=2, reinforce=1.0)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("imprinting") / "small.jsonl"
    path.write_bytes(scenario_lines(generate(PARAMS)))
    return path


def runtime_factory(generator=None):
    generators = {"summarizer": generator, "reviewer": generator} if generator else {}

    def make(workdir: Path, identity, *, with_model: bool = False) -> ConditionRuntime:
        return ConditionRuntime(
            workdir=workdir, embedder=FakeHashingEmbedder(), generators=generators, identity=identity
        )

    return make


def test_the_recall_arms_give_curves_e_mass_and_a_paired_ablation(small):
    measured = measure(small, {a: arm_params(a, "x") for a in ("recall", "recall-no-e")}, runtime_factory())
    rows = measured["rows"]
    assert len(rows) == 2 * 2 * 3 * 12  # arms x agents x checkpoints x cases (6 lessons a domain)
    recall = measured["figures"]["recall"]["curves"]
    assert recall[0]["in_domain_lesson_in_context"] == 0.0 and recall[0]["domain_e_mass"] == 0.0
    assert recall[2]["lessons_seen"] == 1.0 and recall[2]["in_domain_lesson_in_context"] > 0.0
    assert recall[2]["domain_e_mass"] > recall[1]["domain_e_mass"] > 0.0  # every met lesson reinforced
    assert all(r["lesson_in_context"] is None for r in rows if not r["in_domain"])
    assert recall[2]["in_domain_lesson_in_recall"] <= recall[2]["in_domain_lesson_in_context"]
    met = [r for r in rows if r["arm"] == "recall" and r["in_domain"] and r["teaching_turns"]]
    assert all(r["e_mass"] > 0 for r in met if r["approvals"]) and any(r["corrections"] for r in met)
    ablation = measured["figures"]["e_ablation"]
    assert ablation["cases"] == 2 * 3 * 6 and ablation["gained"] >= 0 and ablation["lost"] >= 0
    tracking = measured["figures"]["recall"]["tracking"]
    assert len(tracking["points"]) == 6 and tracking["agent_checkpoint_e_mass_vs_share"]["n"] == 6
    assert measured["states"]["recall/software-engineering"]["cycles"] == 0  # consolidation off


def test_a_history_that_is_not_a_prefix_is_refused():
    broken = json.loads(json.dumps(generate(PARAMS)))
    c2 = next(s for s in broken if s["id"] == "imprint-se-c2")
    c2["sessions"][1]["turns"][0]["content"] = "A turn the earlier checkpoint never saw."
    with pytest.raises(ValueError, match="not the start of the next checkpoint"):
        timelines([Scenario.model_validate(s) for s in broken])


def test_asking_leaves_no_trace(tmp_path):
    from lca.layout import StoreLayout

    layout = StoreLayout(tmp_path)
    layout.recall_log.parent.mkdir(parents=True, exist_ok=True)
    layout.recall_log.write_text('{"at": 1}\n')
    with leaves_no_trace(tmp_path):
        with open(layout.recall_log, "a") as handle:
            handle.write('{"at": 2}\n')
        layout.retrieval_log.parent.mkdir(parents=True, exist_ok=True)
        layout.retrieval_log.write_text("{}\n")
    assert layout.recall_log.read_text() == '{"at": 1}\n' and not layout.retrieval_log.exists()


def rule_writer(messages):
    """Writes every assistant line it is shown as a rule (a procedural memory); the reviewer accepts."""
    system, task = messages[0]["content"], messages[-1]["content"]
    if "extract memories" in system:
        lines = re.findall(r"^\[(\d+)\] assistant: (.+)$", task, flags=re.M)
        memories = [{"type": "rule", "claim": text[:150], "lines": [int(n)]} for n, text in lines if len(text) > 12]
        return json.dumps({"memories": memories[:3]})
    if "strict reviewer" in system:
        return json.dumps(
            {"reasoning": "the line says it", "supported": True, "contradicts": "none", "verdict": "accept"}
        )
    return "NONE"


def test_the_procedural_arm_writes_procedures_through_the_gate_or_reports_the_shortfall(small):
    params = {"procedural": arm_params("procedural", "imprinting-test")}
    wrote = measure(small, params, runtime_factory(FakeScriptedGenerator(rule_writer)))
    state = wrote["states"]["procedural/software-engineering"]
    assert (
        state["cycles"] == 1 + PARAMS.epochs * PARAMS.sessions_per_epoch
        and state["procedural_memories"] > 0
        and "no_procedural_memory" not in state["shortfalls"]
    )
    silent = measure(small, params, runtime_factory(FakeScriptedGenerator(lambda m: '{"memories": []}')))
    shortfalls = silent["states"]["procedural/software-engineering"]["shortfalls"]
    assert "no_procedural_memory" in shortfalls and "no_memories_written" in shortfalls


def test_spearman_is_none_where_a_side_is_constant():
    assert spearman([1, 2, 3], [0, 0, 0])["rho"] is None
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4])["rho"] == pytest.approx(0.8)


def test_the_command_writes_the_record_table_and_plot(small, tmp_path, monkeypatch, capsys):
    import protocols.evals.domain_imprinting.bench as bench

    def fake_factory(args, with_model):
        embedder = FakeHashingEmbedder()
        return runtime_factory(), embedder, None

    monkeypatch.setattr(bench, "_runtime_factory", fake_factory)
    out = tmp_path / "imprinting.json"
    spec = benchmark("imprinting")
    assert spec.run(spec.parser().parse_args(["--scenarios", str(small), "--arms", "recall", "--out", str(out)])) == 0
    record = json.loads(out.read_text())
    assert record["benchmark"] == "imprinting" and "recall" in record["metrics"]
    assert out.with_suffix(".png").read_bytes()[:8] == PNG_MAGIC
    assert "Spearman" in out.with_suffix(".md").read_text() and len(record["rows"]) == 3 * 2 * 12
    small_out = tmp_path / "small.json"
    assert spec.run(spec.parser().parse_args(["--scenarios", str(small), "--no-rows", "--out", str(small_out)])) == 0
    assert json.loads(small_out.read_text())["rows"] == []
    assert spec.run(spec.parser().parse_args(["--scenarios", str(small), "--arms", "recall,cheese"])) == 2
    assert "unknown arm 'cheese'" in capsys.readouterr().err
