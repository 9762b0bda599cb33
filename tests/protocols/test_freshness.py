"""The freshness protocol's fault scenarios: each fault is injected and seen by the check that should see it; the
same steps without the fault report nothing (no false alarm); a miss would be reported as undetected, not faked.
Fresh real stores (SQLite, faiss, bm25s) with the fake embedder."""

from __future__ import annotations

import json

import pytest

from lca.errors import RecordFormatError
from protocols.evals.freshness.bench import BENCHMARK, summarize
from protocols.evals.freshness.dataset import DEFAULT_FAULTS, freshness_samples
from protocols.evals.freshness.faults import FaultSpec, OversizeRejectingEmbedder, load_faults, run_fault, table
from tests.fakes import FakeHashingEmbedder

SPECS = {spec.id: spec for spec in load_faults(DEFAULT_FAULTS)}
# where health sees each fault today: (check, status, a phrase of its message, steps after the onset)
DETECTED = {
    "stale-writer": ("code_version", "warn", "last written by 0.0.1+g000000000000", 0),
    "oversize-embedder": ("embeddings", "fail", "held back after failed embedding", 0),
    "nested-schema-drift": ("memory_files", "fail", "1 failed to load", 0),
    "critical-overflow": ("critical_set", "warn", "of a 80-token budget", 2),
    "duplicate-writers": ("duplicates", "warn", "above 0.25", 3),
    # the writer record keeps the stale version after the current build wrote last (lca.ingest.record_writer)
    "stale-writer-overwritten": ("code_version", "warn", "also written by 0.0.1+g000000000000", 0),
    # the prune log against the ledger's cycle spans: the turns were consolidated only after they left the window
    "late-pre-compaction": ("compaction", "warn", "read only after their prune, by", 0),
}


def embedder() -> FakeHashingEmbedder:
    return FakeHashingEmbedder(max_input_tokens=200)


def test_the_shipped_fault_file_covers_the_six_faults():
    assert set(DETECTED) == set(SPECS)
    assert {s.fault for s in SPECS.values()} == {
        "stale_writer",
        "oversize_embedder",
        "schema_drift",
        "critical_overflow",
        "duplicate_writers",
        "late_pre_compaction",
    }
    samples, digest, meta = freshness_samples(DEFAULT_FAULTS)
    assert [s.id for s in samples] == list(SPECS) and len(digest) == 64 and meta["faults"] == list(SPECS)


@pytest.mark.parametrize("fault_id", sorted(DETECTED))
def test_each_detectable_fault_is_detected_by_its_check(fault_id, tmp_path):
    spec = SPECS[fault_id]
    check, status, phrase, lag = DETECTED[fault_id]
    run = run_fault(spec, embedder(), workdir=tmp_path).summary()
    assert run["onset_step"] is not None and run["onset_step"] >= spec.inject_at
    assert run["detected"] and run["check"] == check and run["status"] == status, run
    assert phrase in run["message"]
    assert run["steps_to_detection"] == lag and run["seconds_to_detection"] > 0
    assert run["false_alarm_steps"] == []  # nothing before the onset
    assert list(tmp_path.iterdir()) == []  # the scenario's store is removed


@pytest.mark.parametrize("fault_id", sorted(SPECS))
def test_a_healthy_store_reports_nothing_for_the_same_steps(fault_id, tmp_path):
    run = run_fault(SPECS[fault_id], embedder(), inject=False, workdir=tmp_path)
    assert run.onset_step is None and run.detection is None
    assert [s.findings for s in run.steps] == [()] * SPECS[fault_id].steps


def test_the_overwritten_stale_writer_is_seen_though_the_current_build_wrote_last(tmp_path):
    run = run_fault(SPECS["stale-writer-overwritten"], embedder(), workdir=tmp_path)
    found = next(s for s in run.steps if s.findings)
    check = found.findings[0]
    assert check.check == "code_version" and "last written by 0.0.1" not in check.message  # not the last writer
    assert all(any(f.check == "code_version" for f in s.findings) for s in run.steps if s.step >= run.onset_step)


def test_the_late_cycle_is_seen_and_its_cycles_recorded_no_failure(tmp_path):
    run = run_fault(SPECS["late-pre-compaction"], embedder(), workdir=tmp_path)
    assert run.onset_step is not None and run.onset_step >= SPECS["late-pre-compaction"].inject_at  # once it prunes
    assert run.notes["cycles"] and all(c["failures"] == 0 for c in run.notes["cycles"])
    late = [c["trigger"] for c in run.notes["cycles"]]
    assert late.count("pre_compaction") == len(late)  # only the trigger's moment differs, not its name
    assert [f.check for s in run.steps if s.step >= run.onset_step for f in s.findings] == ["compaction"] * (
        SPECS["late-pre-compaction"].steps - run.onset_step
    )


def test_the_compaction_scenario_prunes_and_consolidates_in_the_right_order_before_the_injection(tmp_path):
    spec = SPECS["late-pre-compaction"]
    healthy = run_fault(spec, embedder(), inject=False, workdir=tmp_path)
    assert len(healthy.notes["cycles"]) >= 2  # the manager's own trigger fired before its prunes


def test_the_oversize_endpoint_raises_over_its_limit_and_passes_the_rest():
    inner = embedder()
    endpoint = OversizeRejectingEmbedder(inner, limit=6)
    assert endpoint.embedder_id == inner.embedder_id and endpoint.max_input_tokens == 200
    assert endpoint.embed(["two words"]).shape == (1, inner.dimension)
    with pytest.raises(Exception, match="over this endpoint's limit of 6"):
        endpoint.embed(["one two three four five six seven"])
    assert endpoint.rejected == 1


def test_a_bad_fault_line_is_refused_naming_file_line_and_field(tmp_path):
    good = SPECS["stale-writer"].model_dump(mode="json")
    path = tmp_path / "faults.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "x", "inject_at": 9}) + "\n")
    with pytest.raises(RecordFormatError) as info:
        load_faults(path)
    assert str(path) in str(info.value) and "line 2" in str(info.value) and "inject_at 9" in str(info.value)
    path.write_text(json.dumps({**good, "fault": "gremlins"}) + "\n")
    with pytest.raises(RecordFormatError, match="fault"):
        load_faults(path)
    with pytest.raises(ValueError):
        FaultSpec.model_validate({**good, "steps": 1})


def test_the_table_and_summary_report_misses_as_misses():
    rows = [
        {
            "id": "a",
            "onset_step": 2,
            "detected": True,
            "steps_to_detection": 1,
            "seconds_to_detection": 0.5,
            "check": "duplicates",
            "status": "warn",
            "message": "m",
            "false_alarm": False,
        },
        {"id": "b", "onset_step": 3, "detected": False, "false_alarm": True},
    ]
    text = table(rows)
    assert (
        "| a | 2 | yes | 1 / 0.500 | duplicates (warn): m | no |" in text and "| b | 3 | NO | - | none | YES |" in text
    )
    summary = summarize(rows)
    assert summary["detection_rate"] == 0.5 and summary["mean_steps_to_detection"] == 1
    assert summary["false_alarms"] == 1 and summary["undetected"] == ["b"]


def test_the_bench_refuses_an_unknown_fault_before_loading_a_model(capsys):
    args = BENCHMARK.parser().parse_args(["--only", "gremlins"])
    assert BENCHMARK.run(args) == 2
    assert "unknown fault gremlins" in capsys.readouterr().out


def test_the_task_runs_with_mockllm_and_reports_detection_without_calling_the_model(tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    import protocols.harness.solvers as solvers
    from protocols.evals import protocol_task
    from tests.protocols.test_harness import fake_agent

    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(embedder()))
    task = protocol_task("freshness")()
    (log,) = inspect_eval(task, model=fake_agent(), log_dir=str(tmp_path), display="none")
    assert log.status == "success" and len(log.samples) == len(SPECS)
    runs = {s.id: s.store.get("freshness_run") for s in log.samples}
    alarms = {i: (r["false_alarm_steps"], r["baseline_findings"]) for i, r in runs.items() if r["false_alarm"]}
    assert not any(alarms.values()), alarms
    scores = {s.name: next(iter(s.metrics.values())).value for s in log.results.scores}
    assert scores["detected"] == pytest.approx(len(DETECTED) / len(SPECS)) and scores["false_alarm"] == 0
    assert scores["steps_to_detection"] == pytest.approx(sum(d[3] for d in DETECTED.values()) / len(DETECTED))
    assert all(s.output.usage.total_tokens == 0 and s.output.model == "none" for s in log.samples)


def test_the_bench_names_the_protocols_fault_file():
    from protocols.evals.freshness.bench import DEFAULT_FAULTS as BENCH
    from protocols.evals.freshness.dataset import DEFAULT_FAULTS

    assert BENCH == DEFAULT_FAULTS and BENCH.exists()
