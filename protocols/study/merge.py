"""The units of a sharded study run merged into one run: one log per protocol and condition, one manifest.

``merge_run`` refuses, naming them, units that never ran or whose every attempt failed, unless it is told to
write a partial run (``partial=True``, ``lca study merge --partial``): the run is then marked ``partial`` in
run.json, in its deviations (which the report prints) and on the console, and a protocol missing units is not
rated. What it writes is the layout of a single-process run (``protocols.study.runner``), so ``lca report``
reads it unchanged; run.json adds ``execution`` (the executor, the shards and every unit's attempts: where each
ran, when, how long, how it ended).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from protocols.harness.planning import task_summary
from protocols.study import manifest as mf
from protocols.study.lock import Deviation
from protocols.study.runner import ProtocolPlan, StudyRunner, StudyRunResult
from protocols.study.sharded import unit_runner
from protocols.study.units import UnitPlan, WorkUnit, by_key, read_attempts, read_plan, unit_status, units_summary

MERGER = "lca study merge"


def merge_logs(files: Sequence[Path], out: Path, limit: int | None) -> Any:
    """One inspect log from a condition's shard logs, in shard order: their samples in that order, the dataset's
    sample ids, counts and token usage summed, the metrics recomputed over all samples by inspect
    (``recompute_metrics``), the run's ``limit`` as the single-process run gave it. Returns the log as read back."""
    from inspect_ai.log import read_eval_log, recompute_metrics, write_eval_log

    logs = [read_eval_log(str(file)) for file in files]
    merged = logs[0].model_copy(deep=True)
    merged.samples = [sample for log in logs for sample in log.samples or ()]
    merged.eval.dataset.sample_ids = [sample.id for sample in merged.samples]
    merged.eval.config.limit = limit
    if merged.results is not None:
        merged.results.total_samples = sum(log.results.total_samples for log in logs if log.results)
        merged.results.completed_samples = sum(log.results.completed_samples for log in logs if log.results)
    recompute_metrics(merged)
    starts = [log.stats.started_at for log in logs if log.stats.started_at]
    ends = [log.stats.completed_at for log in logs if log.stats.completed_at]
    merged.stats.started_at = min(starts) if starts else ""
    merged.stats.completed_at = max(ends) if ends else ""
    for attribute in ("model_usage", "role_usage"):
        total: dict[str, Any] = {}
        for log in logs:
            for model, usage in getattr(log.stats, attribute).items():
                total[model] = total[model] + usage if model in total else usage
        setattr(merged.stats, attribute, total)
    merged.status = "success" if all(log.status == "success" for log in logs) else "error"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(merged, str(out))
    return read_eval_log(str(out))


def _successful_logs(run_dir: Path, unit: WorkUnit) -> list[Path]:
    attempts = read_attempts(run_dir, unit)
    done = next(a for a in reversed(attempts) if a.status == "success")
    return [run_dir / log for log in done.logs]


def incomplete_units(run_dir: Path, plan: UnitPlan) -> dict[str, str]:
    """Units that cannot be merged, with why: never ran, or failed every attempt (with the last error)."""
    out = {}
    for unit in plan.units:
        attempts = read_attempts(run_dir, unit)
        status = unit_status(attempts)
        if status == "missing":
            out[unit.id] = "missing (never ran)"
        elif status == "failed":
            out[unit.id] = f"failed after {len(attempts)} attempt(s): {attempts[-1].error}"
    return out


def _protocol_entry(runner: StudyRunner, plan: ProtocolPlan, run_dir: Path, groups, bad) -> tuple[dict, list[str]]:
    entry = runner._protocol_entry(plan, run_dir)
    locations: list[str] = []
    left_out: list[str] = []
    seconds = 0.0
    for task in plan.planned:
        units = groups[(plan.run.name, task.label)]
        left_out += [unit.id for unit in units if unit.id in bad]
        if any(unit.id in bad for unit in units):
            continue  # a condition with a unit missing has no log: a partial sample set would pass for a whole one
        files = [log for unit in units for log in _successful_logs(run_dir, unit)]
        seconds += sum(a.seconds for unit in units for a in read_attempts(run_dir, unit) if a.status == "success")
        log = merge_logs(files, run_dir / "logs" / plan.run.name / files[0].name, plan.run.limit)
        summary = task_summary(log)
        entry["tasks"].append(summary)
        locations.append(str(log.location))
        for kind, count in summary["shortfalls"].items():
            entry["shortfalls"][kind] = entry["shortfalls"].get(kind, 0) + count
    entry["wall_seconds"] = round(seconds, 2)
    if left_out:
        entry["status"] = "partial" if entry["tasks"] else "error"
        entry["error"] = f"units not merged: {', '.join(left_out)}"
    else:
        entry["status"] = "success"
    return entry, locations


def merge_run(
    run_dir: str | Path, *, partial: bool = False, echo: Callable[[str], None] = print, **options: Any
) -> StudyRunResult:
    """Merge a sharded run's units into its run directory (logs, ratings, run.json, LATEST)."""
    run_dir = Path(run_dir)
    plan = read_plan(run_dir)
    bad = incomplete_units(run_dir, plan)
    if bad and not partial:
        listed = "; ".join(f"{unit_id}: {why}" for unit_id, why in bad.items())
        raise LCAError(
            f"run {plan.run_id}: cannot merge, {len(bad)} of {len(plan.units)} unit(s) incomplete: {listed}. Run them "
            f"again (lca study unit {run_dir} UNIT_ID) or merge with --partial to report the run as partial"
        )
    runner = unit_runner(plan, run_dir, echo=echo, **options)
    manifest = mf.json_safe(_read_manifest(run_dir))
    groups = by_key(plan.units)
    entries, logs = [], {}
    for protocol_plan in runner.plans:
        entry, locations = _protocol_entry(runner, protocol_plan, run_dir, groups, bad)
        entries.append(entry)
        logs[protocol_plan.run.name] = locations
        echo(f"[{runner.study.id}] {protocol_plan.run.name}: merged {len(locations)} log(s), {entry['status']}")
    for unit_id, why in bad.items():
        echo(f"[{runner.study.id}] UNIT NOT MERGED: {unit_id}: {why}")
    if bad:
        listed = "; ".join(f"{unit_id}: {why}" for unit_id, why in bad.items())
        what = f"partial run: {len(bad)} of {len(plan.units)} work unit(s) not merged ({listed})"
        why = "merged with --partial: the conditions missing a unit have no log and their protocols are not rated"
        deviation = Deviation(mf.iso(mf.utc_now()), what, why, MERGER, "deviation")
        manifest["deviations"] = [*manifest.get("deviations", []), {**deviation.to_dict(), "source": "run"}]
    drift = revision_drift(run_dir, plan, str(manifest.get("code_revision")))
    if drift:
        echo(f"[{runner.study.id}] DEVIATION: {drift}")
        why = "a unit's code is not the code the run was planned with; its figures may differ from one run"
        deviation = Deviation(mf.iso(mf.utc_now()), drift, why, MERGER, "deviation")
        manifest["deviations"] = [*manifest.get("deviations", []), {**deviation.to_dict(), "source": "run"}]
    manifest["protocols"] = entries
    manifest["ratings"] = [
        runner._rate(measure, logs.get(measure.protocol) or [], entries, run_dir)
        for measure in runner.study.judged_measures()
    ]
    finished = mf.utc_now()
    ok = not bad and all(entry["status"] == "success" for entry in entries)
    started = datetime.fromisoformat(str(manifest["started_at"]))
    execution = dict(manifest.get("execution") or {})
    execution.update(units=units_summary(run_dir, plan), partial=bool(bad), not_merged=sorted(bad))
    manifest.update(
        protocols=entries,
        served_models=mf.served_models(entries, getattr(runner.rater_factory, "made", {})),
        finished_at=mf.iso(finished),
        wall_seconds=round((finished - started).total_seconds(), 2),
        status="success" if ok else ("partial" if bad else "error"),
        execution=execution,
    )
    mf.write_json(run_dir / mf.RUN_FILE, manifest)
    mf.write_latest(run_dir.parent, plan.run_id)
    echo(f"[{runner.study.id}] run {plan.run_id} merged ({manifest['status']}) in {manifest['wall_seconds']:.1f} s")
    return StudyRunResult(plan.run_id, run_dir, ok, manifest)


def revision_drift(run_dir: Path, plan: UnitPlan, planned: str) -> str | None:
    """Units whose successful attempt ran another code revision than the plan's (a node on another checkout)."""
    other = {}
    for unit in plan.units:
        done = [a for a in read_attempts(run_dir, unit) if a.status == "success"]
        if done and done[-1].code_revision not in (None, planned):
            other[unit.id] = done[-1].code_revision
    if not other:
        return None
    listed = ", ".join(f"{unit_id} ({revision})" for unit_id, revision in other.items())
    return f"{len(other)} unit(s) ran another code revision than the plan's {planned}: {listed}"


def _read_manifest(run_dir: Path) -> dict[str, Any]:
    import json

    return dict(json.loads((run_dir / mf.RUN_FILE).read_text(encoding="utf-8")))
