"""`lca bench probes` on a tiny scenario with the fake embedder: the per-condition shares come from the
injected items' pointers, stateless injects nothing, and bad options are refused before anything loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conditions import ConditionRuntime
from protocols.bench import benchmark
from protocols.bench.probes import condition_params, measure
from tests.fakes import FakeHashingEmbedder

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


def test_the_command_writes_a_benchmark_result_with_its_checks_and_rows(scenario_file, tmp_path, monkeypatch):
    from protocols.bench import probes
    from protocols.bench.result import BenchmarkResult

    monkeypatch.setattr(probes, "_runtime_factory", lambda args: (fake_runtime, FakeHashingEmbedder(), {}))
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
