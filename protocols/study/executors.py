"""Where a sharded study's units run: one small port, ``UnitExecutor``, and its executors.

- ``LocalExecutor``: every unit in this process, one after the other (the single-machine behaviour, by units).
- ``DaskExecutor``: each unit a task on a Dask distributed cluster: a local cluster of N worker processes, or
  the scheduler at an address (``dask scheduler`` / ``dask worker`` started by the lab, or dask-jobqueue).
- Slurm: not an executor in this process but a job array written to a folder (``emit_slurm_batch``): one array
  task a unit, each running ``lca study unit``, then ``lca study merge`` as a job depending on the array.

Every executor runs the same function, ``protocols.study.sharded.run_unit``, which retries a failed unit up to
the plan's ``unit_retries`` and records every attempt; what an engine loses (a worker that died) is recorded as a
failed attempt too. No executor decides what a unit does or how the run merges. docs/cluster.md is the guide.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lca.errors import LCAError
from protocols.study.sharded import record_lost, run_unit, start_sharded_run
from protocols.study.units import UnitPlan, WorkUnit

EXECUTORS = ("local", "dask", "slurm")


class UnitExecutor(Protocol):
    """Runs units of a planned run (``run_unit`` on each, wherever) and returns each unit's final status."""

    name: str

    def run(self, run_dir: Path, units: Sequence[WorkUnit]) -> dict[str, str]: ...


@dataclass
class LocalExecutor:
    """Every unit in this process, in plan order. ``options`` reach the runner (tests give fake models here)."""

    options: dict[str, Any] = field(default_factory=dict)
    echo: Callable[[str], None] = print
    name: str = "local"

    def run(self, run_dir: Path, units: Sequence[WorkUnit]) -> dict[str, str]:
        return {u.id: run_unit(run_dir, u.id, worker="local", echo=self.echo, **self.options) for u in units}


def _dask_unit(run_dir: str, unit_id: str) -> str:
    """A unit on a Dask worker (module-level: the worker imports it by name)."""
    import os

    from distributed import get_worker

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # as `lca` sets them: nothing is fetched at run time
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    worker = get_worker()
    name = f"dask:{worker.name}@{worker.address}"
    return run_unit(run_dir, unit_id, worker=name, echo=lambda line: print(line, flush=True))


@dataclass
class DaskExecutor:
    """Units as tasks of a Dask distributed cluster: ``scheduler`` (an address such as ``tcp://host:8786``), or
    a local cluster of ``workers`` processes with one thread each, started and stopped here."""

    workers: int = 3
    scheduler: str | None = None
    echo: Callable[[str], None] = print
    name: str = "dask"

    def run(self, run_dir: Path, units: Sequence[WorkUnit]) -> dict[str, str]:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise LCAError("--executor dask needs dask and distributed: pip install 'lca-framework[cluster]'") from None
        cluster = None
        if self.scheduler is None:
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        statuses: dict[str, str] = {}
        try:
            with Client(self.scheduler or cluster) as client:
                self.echo(f"dask: {len(client.scheduler_info()['workers'])} worker(s) at {client.scheduler.address}")
                futures = {
                    client.submit(
                        _dask_unit, str(run_dir.resolve()), unit.id, key=f"lca-unit-{run_dir.name}-{unit.id}"
                    ): unit
                    for unit in units
                }
                for future in as_completed(futures):
                    unit = futures[future]
                    try:
                        statuses[unit.id] = future.result()
                    except Exception as exc:  # the engine lost it: recorded as a failed attempt, never dropped
                        record_lost(run_dir, unit, f"dask: {type(exc).__name__}: {exc}")
                        statuses[unit.id] = "failed"
                    self.echo(f"dask: {unit.id}: {statuses[unit.id]} ({len(statuses)}/{len(units)})")
        finally:
            if cluster is not None:
                cluster.close()
        return statuses


def lca_command() -> list[str]:
    """The ``lca`` of this installation (the venv's script beside this interpreter, else ``python -m``)."""
    script = Path(sys.executable).with_name("lca")
    return [str(script)] if script.exists() else [sys.executable, "-m", "protocols.cli"]


SBATCH = """#!/bin/bash
# A Slurm job array: one array task a work unit of run {run_id} of study {study_id} (written by
# `lca run ... --executor slurm --emit-batch`; docs/cluster.md). Submit with submit.sh, which queues
# merge.sbatch to run after every array task has ended, whatever its state, so the merge reports a failed unit.
#SBATCH --job-name=lca-{study_id}
#SBATCH --array=0-{last}
#SBATCH --cpus-per-task={cpus}
#SBATCH --output={folder}/logs/unit-%A_%a.out
set -euo pipefail
cd {cwd}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
line=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {folder}/units.txt)
echo "unit $SLURM_ARRAY_TASK_ID on $(hostname): $line"
eval "$line"
"""

MERGE_SBATCH = """#!/bin/bash
#SBATCH --job-name=lca-{study_id}-merge
#SBATCH --cpus-per-task={cpus}
#SBATCH --output={folder}/logs/merge-%j.out
set -euo pipefail
cd {cwd}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
{merge}
"""

SUBMIT = """#!/bin/bash
# Queue the units' array, then the merge once every array task has ended (afterany: a failed unit is reported).
set -euo pipefail
cd {folder}
array=$(sbatch --parsable study.sbatch)
sbatch --dependency=afterany:${{array%%;*}} merge.sbatch
echo "array job $array; the merge runs after it"
"""


def emit_slurm_batch(plan: UnitPlan, run_dir: Path, folder: Path, *, report: str | None, cpus: int = 1) -> list[Path]:
    """Write the Slurm files of a planned run into ``folder``: ``units.txt`` (one ``lca study unit`` command a
    line, line k for array task k-1), ``study.sbatch`` (the array), ``merge.sbatch`` and ``merge.sh`` (the merge,
    with the report when asked), ``submit.sh`` (both, chained). Paths are absolute and the jobs start in this
    folder (the one ``lca run`` ran in): the cluster's nodes share the file system holding the installation and
    the run directory."""
    folder = folder.resolve()
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    run_dir = run_dir.resolve()
    lca = lca_command()
    unit_lines = [shlex.join([*lca, "study", "unit", str(run_dir), unit.id]) for unit in plan.units]
    reports = ["--report", str(Path(report).resolve())] if report else []
    merge = shlex.join([*lca, "study", "merge", str(run_dir), *reports])
    fields = dict(
        run_id=plan.run_id,
        study_id=run_dir.parent.name,
        last=len(plan.units) - 1,
        cpus=cpus,
        folder=shlex.quote(str(folder)),
        cwd=shlex.quote(str(Path.cwd())),
        merge=merge,
    )
    files = {
        "units.txt": "\n".join(unit_lines) + "\n",
        "study.sbatch": SBATCH.format(**fields),
        "merge.sbatch": MERGE_SBATCH.format(**fields),
        "merge.sh": f"#!/bin/bash\nset -euo pipefail\ncd {fields['cwd']}\n{merge}\n",
        "submit.sh": SUBMIT.format(**fields),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        if name.endswith((".sh", ".sbatch")):
            path.chmod(0o755)
        written.append(path)
    return written


def run_sharded(
    path: str | Path,
    executor: UnitExecutor,
    *,
    shards: int,
    unit_retries: int = 1,
    partial: bool = False,
    echo: Callable[[str], None] = print,
    **options: Any,
):
    """A study run by units on ``executor``, then merged (``protocols.study.merge``): one run directory, as the
    single-process run writes it, with every unit's attempts in its run.json."""
    from protocols.study.merge import merge_run

    runner_options = dict(getattr(executor, "options", {}))
    _, plan, run_dir = start_sharded_run(
        path, shards=shards, unit_retries=unit_retries, executor=executor.name, echo=echo, **options, **runner_options
    )
    statuses = executor.run(run_dir, plan.units)
    failed = [unit_id for unit_id, status in statuses.items() if status != "success"]
    if failed:
        echo(f"{len(failed)} unit(s) failed after every attempt: {', '.join(failed)}")
    keep = {k: v for k, v in options.items() if k in ("display", "rater_factory", "model_factory")}
    return merge_run(run_dir, partial=partial, echo=echo, **keep, **runner_options)
