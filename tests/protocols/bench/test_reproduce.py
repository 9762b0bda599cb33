"""``lca reproduce``: a record names its command, the rerun is compared figure by figure, timings are not judged."""

from __future__ import annotations

import json

import pytest

from lca.errors import LCAError
from protocols.bench.reproduce import compare_records, reproduce
from protocols.cli import main
from protocols.evals import benchmark as benchmark_module
from protocols.evals.benchmark import (
    TIMING_FIGURES,
    BenchmarkResult,
    DatasetProvenance,
    build_provenance,
    record_command,
)


def _result(metrics, *, rows=(), sha="a" * 64):
    dataset = DatasetProvenance(path="d.jsonl", sha256=sha, name="d", official=False)
    prov = build_provenance(embedder_id="e@1").model_copy(update={"datasets": (dataset,)})
    data = {"benchmark": "gravity-well", "metrics": metrics, "rows": list(rows), "provenance": prov.model_dump()}
    return BenchmarkResult.from_dict({"format": 1, **data})


def test_compare_judges_figures_and_only_shows_timings():
    recorded = _result({"hit": 0.5, "latency": {"p50_ms": 3.0}, "n": 10}, rows=[{"q": "a", "build_ms": 1.0}])
    same = _result({"hit": 0.5 + 1e-12, "latency": {"p50_ms": 9.0}, "n": 10}, rows=[{"q": "a", "build_ms": 7.0}])
    same_run = compare_records(recorded, same, run_to_run=TIMING_FIGURES)
    assert same_run.reproduced and same_run.added == ()
    assert {p.key for p in same_run.run_to_run} == {"metrics.latency.p50_ms", "rows.0.build_ms"}
    assert same_run.compared >= 5
    moved = _result({"hit": 0.4, "latency": {"p50_ms": 3.0}, "extra": 1}, rows=[{"q": "b", "build_ms": 1.0}])
    moved_run = compare_records(recorded, moved, run_to_run=TIMING_FIGURES)
    assert {p.key for p in moved_run.differences} == {"metrics.hit", "metrics.n", "rows.0.q"}
    assert moved_run.added == ("metrics.extra",)  # written only by the rerun: listed, not judged
    other_file = _result({"hit": 0.5, "latency": {"p50_ms": 3.0}, "n": 10}, rows=[{"q": "a"}], sha="b" * 64)
    other_run = compare_records(recorded, other_file, run_to_run=TIMING_FIGURES)
    assert [p.key for p in other_run.differences] == ["provenance.datasets.d.sha256"]


@pytest.fixture(autouse=True)
def _no_leftover_command(monkeypatch):
    monkeypatch.setattr(benchmark_module, "_COMMAND", [])


def test_the_command_line_is_recorded_with_secrets_redacted():
    token = "ghp_" + "Z3kQ9vX2mL7pR4tY8wB1nC6dF0hJ5sA2eG7i"
    record_command(["bench", "gravity-well", "--note", token])
    command = build_provenance().command
    assert command[:3] == ("lca", "bench", "gravity-well") and token not in " ".join(command)


def test_a_record_is_rerun_and_a_changed_figure_is_named(tmp_path, capsys):
    out = tmp_path / "gw.json"
    assert main(["bench", "gravity-well", "--records", "200", "--queries", "300", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["provenance"]["command"][:2] == ["lca", "bench"]
    assert main(["reproduce", str(out)]) == 0
    assert "reproduced" in capsys.readouterr().out
    written["metrics"]["figures"]["use_weighted"]["gini"] += 0.01
    out.write_text(json.dumps(written))
    assert main(["reproduce", str(out)]) == 1
    assert "metrics.figures.use_weighted.gini" in capsys.readouterr().out


def test_a_record_without_a_command_is_refused_naming_it(tmp_path):
    out = tmp_path / "old.json"
    old = _result({"hit": 1.0}).model_copy(
        update={"provenance": build_provenance().model_copy(update={"command": None})}
    )
    out.write_text(old.to_json())
    with pytest.raises(LCAError, match="old.json: the record names no command"):
        reproduce(out)
    with pytest.raises(LCAError, match="only an `lca bench NAME"):
        reproduce(out, command=["lca", "ingest", "x"])
