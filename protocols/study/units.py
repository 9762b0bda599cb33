"""A study cut into work units (protocol x condition x sample shard), the plan that names them, and what each
unit's attempts left on disk.

A sharded run (``lca run STUDY.yaml --executor local|dask|slurm``, docs/cluster.md) is one run directory::

    <run_dir>/plan.json                      the units, in a fixed order, with ids; the options every unit reads
    <run_dir>/run.json                       the manifest, written at the start and completed by the merge
    <run_dir>/units/<unit_id>/unit.json      every attempt: where it ran (host, pid, worker, Slurm task), when,
                                             how long, its status and error
    <run_dir>/units/<unit_id>/attempt-<k>/   the attempt's inspect .eval log
    <run_dir>/logs/<protocol>/               the merged logs, one per condition, as the single-process run's

A unit is one condition's task of one protocol over a contiguous slice ``[start, stop)`` of the samples that run
takes (after the study's seeded shuffle, before nothing else), so the units of a protocol and condition together
hold exactly the single-process run's samples. The plan is a pure function of the study document, the data it
reads and the shard count: the same inputs give the same units and ids on any machine.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from protocols.study import manifest as mf

PLAN_FILE = "plan.json"
UNIT_FILE = "unit.json"
UNITS_DIR = "units"
PLAN_FORMAT = 1


@dataclass(frozen=True)
class WorkUnit:
    """One condition's task of one protocol over the samples ``[start, stop)`` of the run's order."""

    id: str
    protocol: str
    condition: str
    shard: int
    shards: int
    start: int
    stop: int

    @property
    def samples(self) -> int:
        return self.stop - self.start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UnitPlan:
    """``plan.json``: the study it cuts (path and sha256, to refuse a unit of an edited study), the run it
    belongs to, the units, and the run options every unit and the merge read from here, not from flags."""

    study_path: str
    study_sha256: str
    run_id: str
    shards: int
    unit_retries: int
    exploratory: bool
    data: str | None
    retry_attempts: int
    executor: str
    units: tuple[WorkUnit, ...]

    def unit(self, unit_id: str) -> WorkUnit:
        for unit in self.units:
            if unit.id == unit_id:
                return unit
        known = ", ".join(u.id for u in self.units)
        raise LCAError(f"no unit '{unit_id}' in the plan of run {self.run_id}; units: {known}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, **asdict(self), "units": [u.to_dict() for u in self.units]}


@dataclass(frozen=True)
class Attempt:
    """One attempt of a unit: where it ran and how it ended (``status`` success or error)."""

    attempt: int
    status: str
    error: str | None
    host: str
    pid: int
    worker: str | None
    slurm: str | None
    started_at: str
    seconds: float
    log_dir: str
    logs: tuple[str, ...] = ()
    code_revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "logs": list(self.logs)}


def slug(text: str) -> str:
    """A condition label as a folder name: ``full-lca[weights.temporal=0]`` -> ``full-lca_weights.temporal_0``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def shard_ranges(samples: int, shards: int) -> list[tuple[int, int]]:
    """``samples`` positions cut into at most ``shards`` contiguous slices whose sizes differ by at most one
    (no empty slice: fewer samples than shards give one slice a sample)."""
    if shards < 1:
        raise LCAError(f"--shards {shards}: at least 1")
    count = min(shards, samples)
    bounds, start = [], 0
    for k in range(count):
        stop = start + samples // count + (1 if k < samples % count else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def plan_units(counts: Sequence[tuple[str, Sequence[str], int]], shards: int) -> tuple[WorkUnit, ...]:
    """The units of a study from its protocols in document order, each with its condition labels in order and
    its sample count: protocol x condition x shard, numbered in that order (the number leads the id, so ids sort
    as the plan does)."""
    units: list[WorkUnit] = []
    for protocol, conditions, samples in counts:
        for condition in conditions:
            ranges = shard_ranges(samples, shards)
            for shard, (start, stop) in enumerate(ranges):
                unit_id = f"{len(units):03d}-{protocol}-{slug(condition)}-s{shard}"
                units.append(WorkUnit(unit_id, protocol, condition, shard, len(ranges), start, stop))
    ids = [u.id for u in units]
    assert len(set(ids)) == len(ids)  # the leading number makes them distinct
    return tuple(units)


def sample_count(plan: Any) -> int:
    """The samples one condition's task of a study's protocol runs (``protocols.study.runner.ProtocolPlan``):
    its dataset's size, at most the study's ``limit``. Building the task reads the dataset, as the run will."""
    dataset = plan.planned[0].build(plan.task_fn).dataset
    size = len(dataset)
    return size if plan.run.limit is None else min(size, plan.run.limit)


# ---- files -------------------------------------------------------------------------------------------------
def write_plan(run_dir: Path, plan: UnitPlan) -> None:
    mf.write_json(run_dir / PLAN_FILE, plan.to_dict())


def read_plan(run_dir: str | Path) -> UnitPlan:
    path = Path(run_dir) / PLAN_FILE
    if not path.is_file():
        raise LCAError(f"{run_dir} holds no {PLAN_FILE}: not the run directory of a sharded study run")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        units = tuple(WorkUnit(**unit) for unit in data.pop("units"))
        data.pop("format", None)
        return UnitPlan(**data, units=units)
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise RecordFormatError(f"not a unit plan: {exc}", path=str(path)) from None


def unit_dir(run_dir: Path, unit: WorkUnit) -> Path:
    return Path(run_dir) / UNITS_DIR / unit.id


def read_attempts(run_dir: Path, unit: WorkUnit) -> list[Attempt]:
    path = unit_dir(run_dir, unit) / UNIT_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Attempt(**{**a, "logs": tuple(a.get("logs") or ())}) for a in data["attempts"]]
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise RecordFormatError(f"not a unit record: {exc}", path=str(path)) from None


def record_attempt(run_dir: Path, unit: WorkUnit, attempt: Attempt) -> None:
    """Append one attempt to the unit's record (rewritten whole, atomically: a reader never sees half of it)."""
    attempts = [a for a in read_attempts(run_dir, unit) if a.attempt != attempt.attempt] + [attempt]
    data = {"unit": unit.to_dict(), "attempts": [a.to_dict() for a in attempts]}
    mf.write_json(unit_dir(run_dir, unit) / UNIT_FILE, data)


def slurm_task() -> str | None:
    """The Slurm job and array task this process runs in (``JOB_TASK``), if any."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID")
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else job


def host_name() -> str:
    return socket.gethostname()


def unit_status(attempts: Sequence[Attempt]) -> str:
    """``missing`` (never ran), ``success`` (an attempt succeeded) or ``failed`` (every attempt failed)."""
    if not attempts:
        return "missing"
    return "success" if any(a.status == "success" for a in attempts) else "failed"


def units_summary(run_dir: Path, plan: UnitPlan) -> list[dict[str, Any]]:
    """Per unit, as run.json records it: the unit, its status, and every attempt with where it ran."""
    out = []
    for unit in plan.units:
        attempts = read_attempts(run_dir, unit)
        out.append({**unit.to_dict(), "status": unit_status(attempts), "attempts": [a.to_dict() for a in attempts]})
    return out


def by_key(units: Sequence[WorkUnit]) -> Mapping[tuple[str, str], list[WorkUnit]]:
    """The units of each (protocol, condition), in shard order."""
    out: dict[tuple[str, str], list[WorkUnit]] = {}
    for unit in units:
        out.setdefault((unit.protocol, unit.condition), []).append(unit)
    return {key: sorted(group, key=lambda u: u.shard) for key, group in out.items()}
