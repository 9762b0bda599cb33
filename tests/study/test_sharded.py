"""A study run by work units (protocols/study/units.py, sharded.py, merge.py, executors.py): the plan is
deterministic, the merged run reports what the single-process run reports, a failing unit is retried and then
reported, a missing unit stops the merge by name, and the Slurm files run by hand give the same report.

The fast tests use inspect's mockllm scripted as the agent and the fake embedder (tests/study/test_runner.py's
fixtures); the slow one runs the embedded SmolLM2 and MiniLM on a local Dask cluster of three worker processes."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from lca.errors import LCAError
from protocols import cli
from protocols.report import load_run, write_report
from protocols.report.compare import report_differences
from protocols.study.executors import LocalExecutor, emit_slurm_batch, run_sharded
from protocols.study.merge import merge_run
from protocols.study.runner import StudyRunner, run_study
from protocols.study.sharded import start_sharded_run, study_units
from protocols.study.units import plan_units, read_attempts, read_plan, shard_ranges
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator
from tests.protocols.test_hollow_copy import scripted_agent
from tests.study.test_runner import write_study

REPO = Path(__file__).resolve().parents[2]
QUIET = {"display": "none", "echo": lambda line: None}


def same_rating(role, model):
    return FakeScriptedGenerator(lambda messages: '{"rating": 3}', model_id=f"fake-{role}")


@pytest.fixture(autouse=True)
def fake_models(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    monkeypatch.setattr(StudyRunner, "model_factory", staticmethod(lambda model: scripted_agent("pass")))


def single_report(path: Path, tmp_path: Path) -> Path:
    result = run_study(path, exploratory=True, out=tmp_path / "single", rater_factory=same_rating, **QUIET)
    assert result.ok
    return write_report(load_run(path, result.run_id, tmp_path / "single"), tmp_path / "reports-single").folder


def test_the_plan_is_deterministic_and_its_shards_cover_every_sample_once(tmp_path):
    for samples in range(0, 12):
        for shards in range(1, 5):
            ranges = shard_ranges(samples, shards)
            covered = [i for start, stop in ranges for i in range(start, stop)]
            assert covered == list(range(samples))  # contiguous, in order, each sample once
            assert all(stop > start for start, stop in ranges)  # no empty shard
            assert max((b - a for a, b in ranges), default=0) - min((b - a for a, b in ranges), default=0) <= 1
    with pytest.raises(LCAError, match="--shards 0"):
        shard_ranges(3, 0)
    counts = [("hollow_copy", ["stateless", "full-lca[weights.temporal=0]"], 5), ("locomo", ["summary"], 1)]
    units = plan_units(counts, 2)
    assert units == plan_units(counts, 2)
    assert [u.id for u in units] == [
        "000-hollow_copy-stateless-s0",
        "001-hollow_copy-stateless-s1",
        "002-hollow_copy-full-lca_weights.temporal_0-s0",
        "003-hollow_copy-full-lca_weights.temporal_0-s1",
        "004-locomo-summary-s0",
    ]
    assert [(u.start, u.stop) for u in units[:2]] == [(0, 3), (3, 5)]
    # from a study: two prepared runners plan the same units
    path = write_study(tmp_path, locomo=True)
    plans = []
    for _ in range(2):
        runner = StudyRunner(path, exploratory=True, echo=lambda line: None)
        runner.prepare()
        plans.append(study_units(runner, 2))
    assert plans[0] == plans[1] and len(plans[0]) == 2 * 2 + 1  # hollow_copy limit 3 in 2 shards x 2; locomo 1


def test_a_merged_run_reports_exactly_what_the_single_process_run_reports(tmp_path):
    path = write_study(tmp_path, locomo=True)
    single = single_report(path, tmp_path)
    executor = LocalExecutor(options={"rater_factory": same_rating}, echo=lambda line: None)
    result = run_sharded(path, executor, shards=2, exploratory=True, out=tmp_path / "sharded", **QUIET)
    assert result.ok and result.manifest["status"] == "success"
    sharded = write_report(load_run(path, result.run_id, tmp_path / "sharded"), tmp_path / "reports-sharded").folder
    assert report_differences(single, sharded) == []
    # one log per condition, as the single-process run writes, and every unit's attempt with where it ran
    assert len(list((result.run_dir / "logs" / "hollow_copy").glob("*.eval"))) == 2
    units = result.manifest["execution"]["units"]
    assert len(units) == 5 and {u["status"] for u in units} == {"success"}
    assert all(len(u["attempts"]) == 1 and u["attempts"][0]["host"] and u["attempts"][0]["pid"] for u in units)
    # the comparison is not blind: one changed figure is named
    summary = json.loads((sharded / "summary.json").read_text())
    summary["protocols"][0]["tasks"][0]["samples"] += 1
    (sharded / "summary.json").write_text(json.dumps(summary))
    assert report_differences(single, sharded) == [
        f"protocols.0.tasks.0.samples: {summary['protocols'][0]['tasks'][0]['samples'] - 1} != "
        f"{summary['protocols'][0]['tasks'][0]['samples']}"
    ]


def failing_evaluate(fail_times: int, condition: str):
    """``StudyRunner.evaluate``, but a unit of ``condition`` fails its first ``fail_times`` attempts (as a worker
    losing its model would)."""
    built = {"count": 0}

    def evaluate(self, plan, run_id, log_dir, entry, planned, limit, label=None):
        if planned[0].label == condition and len(planned) == 1 and built["count"] < fail_times:
            built["count"] += 1
            raise RuntimeError(f"worker lost its model (failure {built['count']})")
        return original(self, plan, run_id, log_dir, entry, planned, limit, label)

    original = StudyRunner.evaluate
    return evaluate, built


def test_a_failing_unit_is_retried_then_reported_never_dropped(tmp_path, monkeypatch):
    path = write_study(tmp_path)
    evaluate, built = failing_evaluate(1, "transcript-recall")
    monkeypatch.setattr(StudyRunner, "evaluate", evaluate)
    executor = LocalExecutor(options={"rater_factory": same_rating}, echo=lambda line: None)
    result = run_sharded(path, executor, shards=1, unit_retries=1, exploratory=True, out=tmp_path / "a", **QUIET)
    assert result.ok and built["count"] == 1
    retried = next(u for u in result.manifest["execution"]["units"] if "transcript-recall" in u["id"])
    assert [a["status"] for a in retried["attempts"]] == ["error", "success"]
    assert "worker lost its model (failure 1)" in retried["attempts"][0]["error"]

    # failing every attempt: the merge refuses, naming the unit and its error
    evaluate, built = failing_evaluate(99, "transcript-recall")
    monkeypatch.setattr(StudyRunner, "evaluate", evaluate)
    with pytest.raises(LCAError) as refused:
        run_sharded(path, executor, shards=1, unit_retries=2, exploratory=True, out=tmp_path / "b", **QUIET)
    assert built["count"] == 3  # 1 + 2 retries
    message = str(refused.value)
    assert "001-hollow_copy-transcript-recall-s0: failed after 3 attempt(s)" in message
    assert "worker lost its model (failure 3)" in message and "--partial" in message
    # told to, it writes a partial run and says so in run.json, its deviations, the console and the report
    run_dir = next((tmp_path / "b" / "tiny_study").glob("*-exploratory"))
    lines: list[str] = []
    partial = merge_run(run_dir, partial=True, rater_factory=same_rating, display="none", echo=lines.append)
    assert not partial.ok and partial.manifest["status"] == "partial"
    assert partial.manifest["execution"]["not_merged"] == ["001-hollow_copy-transcript-recall-s0"]
    assert any("UNIT NOT MERGED: 001-hollow_copy-transcript-recall-s0" in line for line in lines)
    entry = partial.manifest["protocols"][0]
    assert entry["status"] == "partial" and "001-hollow_copy-transcript-recall-s0" in entry["error"]
    assert [t["condition"] for t in entry["tasks"]] == ["stateless"]
    assert partial.manifest["ratings"][0]["refused"] is True  # a protocol missing units is not rated
    files = write_report(load_run(path, partial.run_id, tmp_path / "b"), tmp_path / "reports")
    assert "partial run: 1 of 2 work unit(s) not merged" in files.report.read_text()


def test_the_merge_refuses_a_missing_unit_naming_it(tmp_path, capsys):
    path = write_study(tmp_path)
    _, plan, run_dir = start_sharded_run(path, shards=2, exploratory=True, out=tmp_path / "runs", **QUIET)
    executor = LocalExecutor(options={"rater_factory": same_rating}, echo=lambda line: None)
    executor.run(run_dir, [u for u in plan.units if u.id != "002-hollow_copy-transcript-recall-s0"])
    assert cli.main(["study", "merge", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "002-hollow_copy-transcript-recall-s0: missing (never ran)" in err and "1 of 4 unit(s)" in err
    assert not (run_dir / "logs").exists()  # nothing merged
    # a unit of an edited study cannot join the run
    path.write_text(path.read_text().replace("A tiny study", "An edited study"))
    assert cli.main(["study", "unit", str(run_dir), "002-hollow_copy-transcript-recall-s0"]) == 2
    assert "changed since run" in capsys.readouterr().err


def test_the_slurm_array_run_by_hand_then_merged_reports_what_the_single_run_reports(tmp_path, monkeypatch):
    import protocols.study.runner as runner

    monkeypatch.setattr(runner, "default_rater_factory", lambda: same_rating)
    path = write_study(tmp_path)
    single = single_report(path, tmp_path)
    batch, out = tmp_path / "batch", tmp_path / "slurm"
    argv = ["run", str(path), "--exploratory", "--out", str(out), "--executor", "slurm", "--shards", "2"]
    reports = tmp_path / "reports-merge"
    assert cli.main([*argv, "--emit-batch", str(batch), "--unit-retries", "2", "--report", str(reports)]) == 0
    plan_run = next((out / "tiny_study").glob("*-exploratory"))
    plan = read_plan(plan_run)
    assert plan.unit_retries == 2 and len(plan.units) == 4
    sbatch = (batch / "study.sbatch").read_text()
    assert "#SBATCH --array=0-3" in sbatch and 'sed -n "$((SLURM_ARRAY_TASK_ID + 1))p"' in sbatch
    assert "afterany" in (batch / "submit.sh").read_text()  # the merge runs even when a unit failed
    lines = (batch / "units.txt").read_text().splitlines()
    assert len(lines) == 4
    for line, unit in zip(lines, plan.units):  # each array task's command, run here in its place
        words = shlex.split(line)
        assert words[-4:] == ["study", "unit", str(plan_run.resolve()), unit.id]
        assert cli.main(words[-4:]) == 0
        assert [a.status for a in read_attempts(plan_run, unit)] == ["success"]
    merge = shlex.split((batch / "merge.sh").read_text().splitlines()[-1])
    assert merge[-5:] == ["study", "merge", str(plan_run.resolve()), "--report", str(reports)]
    assert cli.main(merge[-5:]) == 0
    assert report_differences(single, reports / "tiny_study") == []  # the merge job's own report
    sharded = write_report(load_run(path, plan.run_id, out), tmp_path / "reports-slurm").folder
    assert report_differences(single, sharded) == []
    # the files name absolute paths, so they run from any folder of a node sharing the file system
    assert emit_slurm_batch(plan, plan_run, tmp_path / "again", report=None)[0].name == "units.txt"
    assert f"cd {Path.cwd()}" in sbatch  # the jobs start where lca run ran, so its relative paths hold


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("LCA_CLUSTER_E2E"),
    reason="three Dask workers each loading the real models had not finished after 9 minutes on 2 cores in CI; "
    "set LCA_CLUSTER_E2E=1 to run it (the unit-level equality is tested above with scripted models)",
)
def test_a_study_on_a_local_dask_cluster_of_three_workers_reports_what_one_process_reports(tmp_path, monkeypatch):
    """The embedded models (SmolLM2 through llama.cpp, MiniLM) on a tiny slice: one process, then six units on
    three Dask worker processes; the reports agree figure for figure (timings, ids and paths aside)."""
    pytest.importorskip("distributed")
    from protocols.study.executors import DaskExecutor

    monkeypatch.undo()  # the real embedder and model, in this process and in the workers
    shutil.copy(REPO / "tests" / "study" / "tiny_real.yaml", tmp_path / "tiny_real.yaml")
    path = tmp_path / "tiny_real.yaml"
    monkeypatch.chdir(tmp_path)
    result = run_study(path, exploratory=True, out=tmp_path / "single", **QUIET)
    assert result.ok
    single = write_report(load_run(path, result.run_id, tmp_path / "single"), tmp_path / "r1").folder
    dask = DaskExecutor(workers=3, echo=lambda line: None)
    sharded = run_sharded(path, dask, shards=3, exploratory=True, out=tmp_path / "dask", **QUIET)
    assert sharded.ok
    workers = {a["worker"] for u in sharded.manifest["execution"]["units"] for a in u["attempts"]}
    assert len(sharded.manifest["execution"]["units"]) == 6 and all(w.startswith("dask:") for w in workers)
    merged = write_report(load_run(path, sharded.run_id, tmp_path / "dask"), tmp_path / "r2").folder
    assert report_differences(single, merged) == []


def test_a_unit_that_ran_other_code_is_named_in_the_deviations(tmp_path):
    path = write_study(tmp_path)
    executor = LocalExecutor(options={"rater_factory": same_rating}, echo=lambda line: None)
    result = run_sharded(path, executor, shards=1, exploratory=True, out=tmp_path / "runs", **QUIET)
    assert result.ok and not [d for d in result.manifest["deviations"] if "code revision" in d["what"]]
    record = result.run_dir / "units" / "000-hollow_copy-stateless-s0" / "unit.json"
    data = json.loads(record.read_text())
    assert data["attempts"][0]["code_revision"] == result.manifest["code_revision"]
    data["attempts"][0]["code_revision"] = "0123456789ab"
    record.write_text(json.dumps(data))
    merged = merge_run(result.run_dir, rater_factory=same_rating, **QUIET)
    drift = [d["what"] for d in merged.manifest["deviations"] if "code revision" in d["what"]]
    assert drift == [
        f"1 unit(s) ran another code revision than the plan's {result.manifest['code_revision']}: "
        "000-hollow_copy-stateless-s0 (0123456789ab)"
    ]
