"""A sharded study run: its start (the plan of units, the run directory, the manifest) and one unit's attempts.

Both go through ``StudyRunner``: the start checks everything as ``lca run STUDY.yaml`` does (``prepare``) and
writes the same manifest; a unit runs its condition's task over its slice with ``StudyRunner.evaluate``, the
call the single-process run makes for a whole protocol. Nothing here schedules work: an executor
(``protocols.study.executors``: in-process, Dask, or a Slurm job array) calls ``run_unit`` wherever it runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.provenance import code_version
from protocols.study import manifest as mf
from protocols.study.runner import DEFAULT_OUT, ProtocolPlan, StudyRunner
from protocols.study.units import (
    Attempt,
    UnitPlan,
    WorkUnit,
    host_name,
    plan_units,
    read_attempts,
    read_plan,
    record_attempt,
    sample_count,
    slurm_task,
    unit_dir,
    unit_status,
    write_plan,
)


def study_units(runner: StudyRunner, shards: int) -> tuple[WorkUnit, ...]:
    """The units of a prepared study: every protocol's conditions, each cut into ``shards`` slices."""
    counts = [(p.run.name, [t.label for t in p.planned], sample_count(p)) for p in runner.plans]
    return plan_units(counts, shards)


def start_sharded_run(
    path: str | Path,
    *,
    shards: int,
    unit_retries: int = 1,
    executor: str = "local",
    exploratory: bool = False,
    data: str | None = None,
    out: str | Path = DEFAULT_OUT,
    retry_attempts: int = 0,
    echo: Callable[[str], None] = print,
    **options: Any,
) -> tuple[StudyRunner, UnitPlan, Path]:
    """Check the study, plan its units, make the run directory and write ``plan.json`` and the manifest (with
    the run's own deviations, recorded once, here, never by a unit)."""
    if unit_retries < 0:
        raise LCAError(f"--unit-retries {unit_retries}: at least 0")
    runner = StudyRunner(
        path, exploratory=exploratory, data=data, out=out, retry_attempts=retry_attempts, echo=echo, **options
    )
    runner.prepare()
    units = study_units(runner, shards)
    started = mf.utc_now()
    run_id, run_dir = mf.new_run_dir(Path(out) / runner.study.id, started, exploratory)
    data_dir = str(Path(data).resolve()) if data else None
    plan = UnitPlan(
        str(Path(path).resolve()),
        runner.status.sha256,
        run_id,
        shards,
        unit_retries,
        exploratory,
        data_dir,
        retry_attempts,
        executor,
        units,
    )
    write_plan(run_dir, plan)
    label = "EXPLORATORY" if exploratory else "confirmatory"
    echo(f"[{runner.study.id}] {label} run {run_id}: {runner.status.detail}; lock {runner.signature.short()}")
    echo(f"[{runner.study.id}] {len(units)} work unit(s), {shards} shard(s) a condition, executor {executor}")
    manifest = runner._manifest(run_id, started, runner._deviations())
    manifest["execution"] = {"executor": executor, "shards": shards, "unit_retries": unit_retries, "units": []}
    mf.write_json(run_dir / mf.RUN_FILE, manifest)
    return runner, plan, run_dir


def unit_runner(plan: UnitPlan, run_dir: Path, **options: Any) -> StudyRunner:
    """A prepared runner for the plan's study, with the plan's options; refuses a study edited since the plan."""
    options.setdefault("display", "none")
    runner = StudyRunner(
        plan.study_path,
        exploratory=plan.exploratory,
        data=plan.data,
        out=Path(run_dir).parent.parent,
        retry_attempts=plan.retry_attempts,
        **options,
    )
    runner.prepare()
    if runner.status.sha256 != plan.study_sha256:
        raise LCAError(
            f"{plan.study_path} changed since run {plan.run_id} was planned (sha256 {plan.study_sha256[:12]} then, "
            f"{runner.status.sha256[:12]} now); its units cannot join that run"
        )
    return runner


def unit_task(runner: StudyRunner, unit: WorkUnit) -> tuple[ProtocolPlan, Any]:
    plan = next(p for p in runner.plans if p.run.name == unit.protocol)
    task = next(t for t in plan.planned if t.label == unit.condition)
    return plan, task


def run_unit(
    run_dir: str | Path,
    unit_id: str,
    *,
    retries: int | None = None,
    worker: str | None = None,
    echo: Callable[[str], None] = print,
    **options: Any,
) -> str:
    """Run one unit of a planned run into its folder, up to ``1 + retries`` attempts (default the plan's
    ``unit_retries``), each recorded in ``unit.json`` with where it ran; a unit that already succeeded is not
    run again. Returns ``success`` or ``failed``; a failure is recorded, never dropped."""
    run_dir = Path(run_dir)
    plan = read_plan(run_dir)
    unit = plan.unit(unit_id)
    done = read_attempts(run_dir, unit)
    if unit_status(done) == "success":
        echo(f"[{unit.id}] already succeeded (attempt {next(a.attempt for a in done if a.status == 'success')})")
        return "success"
    runner = unit_runner(plan, run_dir, echo=echo, **options)
    protocol_plan, task = unit_task(runner, unit)
    retries = plan.unit_retries if retries is None else retries
    first = max((a.attempt for a in done), default=0) + 1
    for number in range(first, first + retries + 1):
        log_dir = unit_dir(run_dir, unit) / f"attempt-{number}"
        started, clock = mf.utc_now(), time.monotonic()
        entry: dict[str, Any] = {"status": "pending", "error": None, "tasks": [], "shortfalls": {}}
        try:
            entry, locations = runner.evaluate(
                protocol_plan, plan.run_id, log_dir, entry, (task,), (unit.start, unit.stop), label=unit.id
            )
        except Exception as exc:  # recorded as the attempt's error; the next attempt (or the merge) sees it
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
            locations = []
        attempt = Attempt(
            attempt=number,
            status="success" if entry["status"] == "success" else "error",
            error=entry.get("error"),
            host=host_name(),
            pid=os.getpid(),
            worker=worker,
            slurm=slurm_task(),
            started_at=mf.iso(started),
            seconds=round(time.monotonic() - clock, 2),
            log_dir=str(log_dir.relative_to(run_dir)),
            logs=tuple(str(Path(loc).relative_to(run_dir.resolve())) for loc in locations if loc),
            code_revision=code_version(),
        )
        record_attempt(run_dir, unit, attempt)
        if attempt.status == "success":
            return "success"
        more = number < first + retries
        echo(f"[{unit.id}] attempt {number} FAILED: {attempt.error}" + ("; retrying" if more else ""))
    return "failed"


def record_lost(run_dir: Path, unit: WorkUnit, error: str, worker: str | None = None) -> None:
    """An attempt the engine lost (a worker that died, a task it gave up on): recorded like any failed one."""
    number = max((a.attempt for a in read_attempts(run_dir, unit)), default=0) + 1
    attempt = Attempt(number, "error", error, "?", 0, worker, None, mf.iso(mf.utc_now()), 0.0, "")
    record_attempt(run_dir, unit, attempt)
