"""`lca bench consolidation` on a tiny scenario with scripted writer and reviewer and the fake embedder: one
cycle per session, the per-cycle and per-scenario counts (proposed, written, downgraded, rejected, failed)
come from the cycles' own records, the command writes a BenchmarkResult, and bad options are refused before
anything loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lca.consolidation import ConsolidationConfig
from protocols.bench import benchmark
from protocols.bench import consolidation as bench
from protocols.evals.benchmark import BenchmarkResult
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

SCENARIO = {
    "schema_version": 1,
    "id": "tiny",
    "sessions": [
        {
            "id": "s1",
            "started_at": "2026-02-02T09:00:00",
            "turns": [
                {"role": "user", "content": "My sister Lucia works as a nurse at Santa Maria hospital."},
                {"role": "assistant", "content": "Noted, Lucia is a nurse."},
            ],
        },
        {
            "id": "s2",
            "started_at": "2026-02-09T09:00:00",
            "turns": [{"role": "user", "content": "The garage is booked for the thirteenth."}],
        },
    ],
    "probes": [{"id": "q1", "question": "Where does Lucia work?", "answer": "Santa Maria hospital"}],
}
CLAIMS = {
    "fact": ("Lucia works as a nurse at Santa Maria hospital.", [1]),
    "preference": ("The user loves jazz records.", [2]),
    "decision": ("Lucia quit her job as a doctor.", [1]),
}


def write_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps(SCENARIO) + "\n")
    return path


def write(messages) -> str:
    """Session 1: three candidates; session 2: an answer cut off mid-JSON (a malformed cycle)."""
    if "Lucia" in messages[-1]["content"]:
        return json.dumps({"memories": [{"type": t, "claim": c, "lines": n} for t, (c, n) in CLAIMS.items()]})
    return '{"memories": [{"type": "fact", "claim": "The garage'


def review(messages) -> str:
    """Accepts the nurse fact, finds the jazz preference unsupported, rejects the doctor decision."""
    task = messages[-1]["content"]
    supported, verdict = (False, "reject") if "doctor" in task else (("jazz" not in task), "accept")
    return json.dumps({"reasoning": "checked", "supported": supported, "contradicts": "none", "verdict": verdict})


def scripted_writer() -> FakeScriptedGenerator:
    return FakeScriptedGenerator(write, model_id="fake-writer")


def scripted_reviewer() -> FakeScriptedGenerator:
    return FakeScriptedGenerator(review, model_id="fake-reviewer")


def test_each_session_ends_in_a_cycle_whose_outcomes_are_counted(tmp_path):
    writer, reviewer = scripted_writer(), scripted_reviewer()
    measured = bench.measure(
        write_scenario(tmp_path), FakeHashingEmbedder(), writer, reviewer, ConsolidationConfig(seed=0)
    )
    first, second = measured["rows"]
    assert (first["session"], second["session"]) == ("s1", "s2")
    assert {k: first[k] for k in ("candidates", "written", "accepted", "downgraded", "rejected")} == {
        "candidates": 3,
        "written": 2,  # the fact, and the jazz preference as a labeled inference
        "accepted": 1,
        "downgraded": 1,
        "rejected": 1,
    }
    assert not first["with_failures"] and not first["wrote_nothing"]
    verdicts = {d["claim"]: d["verdict"] for d in first["decisions"]}
    assert verdicts == {
        CLAIMS["fact"][0]: "accept",
        CLAIMS["preference"][0]: "downgrade",
        CLAIMS["decision"][0]: "reject",
    }
    assert second["candidates"] == 0 and second["failures"] == {"extract:malformed": 1}
    assert second["with_failures"] and second["wrote_nothing"]
    total = measured["total"]
    assert measured["scenarios"]["tiny"] == total
    assert (total["cycles"], total["candidates"], total["written"], total["downgraded"], total["rejected"]) == (
        2,
        3,
        2,
        1,
        1,
    )
    assert (total["cycles_with_failures"], total["cycles_writing_nothing"], total["failures"]) == (1, 1, 1)
    assert len(writer.calls) == 2 and len(reviewer.calls) == 3
    assert all(s is not None for s in writer.schemas + reviewer.schemas)  # every call was constrained


def test_the_command_writes_a_benchmark_result_with_provenance(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_embedder", lambda args: FakeHashingEmbedder())
    # one model answers both roles, as the command runs it
    model = FakeScriptedGenerator(
        lambda messages: review(messages) if "Candidate (" in messages[-1]["content"] else write(messages),
        model_id="fake-model",
    )
    monkeypatch.setattr(bench, "_generator", lambda args: model)
    out = tmp_path / "consolidation.json"
    args = (
        benchmark("consolidation")
        .parser()
        .parse_args(["--scenarios", str(write_scenario(tmp_path)), "--out", str(out)])
    )
    assert bench.run_consolidation_bench(args) == 0
    result = BenchmarkResult.read(out)
    (figures,) = result.metrics.values()
    assert figures["total"]["written"] == 2 and figures["total"]["cycles_with_failures"] == 1
    assert result.config["model"] == "fake-model" and result.config["prompt_version"].startswith("consolidation-")
    assert len(result.rows) == 2 and result.provenance.embedder_id == FakeHashingEmbedder().embedder_id
    assert result.provenance.datasets[0].path.endswith("tiny.jsonl")
    printed = capsys.readouterr().out
    assert "tiny" in printed and "written   2" in printed


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--scenarios", "/nonexistent/x.jsonl"], "no scenario file at /nonexistent/x.jsonl"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--model", "nosuchprovider/model"], "cannot be resolved"),
    ],
)
def test_bad_options_are_refused_before_anything_loads(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(bench, "_embedder", lambda args: pytest.fail("the embedder was loaded"))
    args = benchmark("consolidation").parser().parse_args(argv)
    assert bench.run_consolidation_bench(args) == 2
    assert message in capsys.readouterr().err
