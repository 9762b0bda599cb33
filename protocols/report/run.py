"""One run of a study, as the study runner left it on disk (``results/studies/<study>/<run_id>/``).

The run directory is the only input of a report: its ``run.json`` manifest (lock state, code revision, models and
their files, embedder, packages, datasets, protocols, deviations), the inspect ``.eval`` logs under
``logs/<protocol>/`` and the ratings of judged measures under ``ratings/``. Reading it never runs anything, so a
third party with the directory reproduces the report. What is missing or odd is kept as a note, never skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai.log import read_eval_log

from lca.errors import LCAError, RecordFormatError
from protocols.study.lock import file_sha256, read_deviations
from protocols.study.schema import Study, load_study

RUN_FILE = "run.json"
LATEST_FILE = "LATEST"
DEFAULT_STUDIES = Path("results/studies")
RATING_COLUMNS = ("sheet_item_id", "sample_id", "protocol", "condition", "rater", "value", "raw", "missing_reason")
STUDY_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LogHeader:
    """What a report needs from one task log without its samples: which protocol and condition it ran, how it
    ended, and the provenance inspect and the task recorded (models, embedder, dataset hash, code revision)."""

    protocol: str
    task: str
    condition: str
    status: str
    location: str
    model: str
    model_roles: dict[str, str]
    embedder: str | None
    code_version: str | None
    dataset: str | None
    dataset_sha256: str | None
    exploratory: bool
    packages: dict[str, str]


@dataclass(frozen=True)
class StudyRun:
    """A study's run directory, read: the study document, the manifest, the task logs per protocol, the ratings
    and agreement records per judged measure, and the notes on anything missing or changed since the run."""

    study: Study
    study_path: Path
    run_id: str
    run_dir: Path
    manifest: Mapping[str, Any]
    logs: Mapping[str, tuple[LogHeader, ...]]
    ratings: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    agreement: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def study_id(self) -> str:
        return self.study.id

    @property
    def lock_state(self) -> str:
        return str(self.manifest.get("lock_state") or "unknown")

    @property
    def exploratory(self) -> bool:
        """A run is exploratory when it said so, when its study was not locked as run, or when a log says so:
        every output of it then carries the label."""
        logs = any(h.exploratory for headers in self.logs.values() for h in headers)
        return bool(self.manifest.get("exploratory")) or self.lock_state != "locked" or logs

    @property
    def deviations(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self.manifest.get("deviations") or ()]


def _is_study_file(study: str | Path) -> bool:
    return str(study).endswith(STUDY_SUFFIXES)


def run_directory(study_id: str, run_id: str | None, studies: Path) -> Path:
    """The run's directory: ``run_id`` if given, else the one ``LATEST`` names, else the newest holding a
    manifest. Refuses with the command that makes one when the study has no run."""
    root = studies / study_id
    if run_id:
        path = root / run_id
        if not (path / RUN_FILE).is_file():
            known = sorted(p.parent.name for p in root.glob(f"*/{RUN_FILE}")) if root.is_dir() else []
            raise LCAError(f"no run '{run_id}' of study '{study_id}' under {root}; runs: {', '.join(known) or 'none'}")
        return path
    latest = root / LATEST_FILE
    if latest.is_file():
        name = latest.read_text(encoding="utf-8").strip()
        if (root / name / RUN_FILE).is_file():
            return root / name
    runs = sorted(p.parent for p in root.glob(f"*/{RUN_FILE}")) if root.is_dir() else []
    if not runs:
        raise LCAError(
            f"study '{study_id}' has no run under {root}; run it with `lca run preregistration/{study_id}.yaml`"
        )
    return runs[-1]


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordFormatError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    if not isinstance(data, dict):
        raise RecordFormatError("expected a JSON object (the run manifest)", path=str(path))
    return data


def _study_document(study: str | Path, manifest: Mapping[str, Any], run_dir: Path) -> Path:
    if _is_study_file(study):
        return Path(study)
    recorded = manifest.get("study_path")
    candidates = [Path(recorded)] if recorded else []
    if recorded and not Path(recorded).is_absolute():
        candidates.append(run_dir / recorded)
    candidates.append(Path("preregistration") / f"{study}.yaml")
    for path in candidates:
        if path.is_file():
            return path
    raise LCAError(
        f"the study document of run {run_dir} is not found (tried {', '.join(map(str, candidates))}); "
        "pass its path as STUDY"
    )


def load_run(study: str | Path, run_id: str | None = None, studies: str | Path = DEFAULT_STUDIES) -> StudyRun:
    """Read one run of ``study`` (its id, or the path of its document) from ``studies``; the latest run when
    ``run_id`` is None. The logs are indexed by their headers here; ``items_frame`` reads their samples."""
    studies = Path(studies)
    study_id = Path(study).stem if _is_study_file(study) else str(study)
    run_dir = run_directory(study_id, run_id, studies)
    manifest = read_manifest(run_dir)
    notes: list[str] = []
    if manifest.get("study_id") not in (None, study_id):
        raise RecordFormatError(
            f"the run is of study '{manifest.get('study_id')}', not '{study_id}'", path=str(run_dir / RUN_FILE)
        )
    path = _study_document(study, manifest, run_dir)
    document = load_study(path, registered=False)
    now = file_sha256(path)
    then = manifest.get("study_sha256")
    if then and then != now:
        notes.append(
            f"the study document {path} changed since this run (sha256 {str(then)[:12]} at run time, {now[:12]} "
            "now); this report reads the document as it is now"
        )
    notes.extend(_late_deviations(path, manifest))
    logs = _log_headers(run_dir, manifest, notes)
    ratings, agreement = _ratings(run_dir, notes)
    return StudyRun(document, path, run_dir.name, run_dir, manifest, logs, ratings, agreement, tuple(notes))


def _late_deviations(path: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Deviations logged for the study after the run (not in its manifest): named, since they may bear on it."""
    try:
        logged = read_deviations(path)
    except LCAError as exc:
        return [f"the study's deviations log could not be read: {exc}"]
    known = {(d.get("at"), d.get("what")) for d in manifest.get("deviations") or () if isinstance(d, Mapping)}
    late = [d for d in logged if (d.at, d.what) not in known and d.at > str(manifest.get("finished_at") or "")]
    return [f"deviation recorded after the run ({d.at}, {d.kind}): {d.what} (why: {d.why})" for d in late]


def _protocol_dirs(run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, Path]:
    dirs: dict[str, Path] = {}
    for entry in manifest.get("protocols") or ():
        name = entry.get("name")
        if not name:
            continue
        log_dir = Path(entry.get("log_dir") or Path("logs") / name)
        dirs[name] = log_dir if log_dir.is_absolute() or log_dir.exists() else run_dir / log_dir
        if not dirs[name].exists() and (run_dir / "logs" / name).exists():
            dirs[name] = run_dir / "logs" / name
    for folder in sorted((run_dir / "logs").glob("*/")) if (run_dir / "logs").is_dir() else ():
        dirs.setdefault(folder.name, folder)
    return dirs


def _log_headers(run_dir: Path, manifest: Mapping[str, Any], notes: list[str]) -> dict[str, tuple[LogHeader, ...]]:
    """Per protocol, one header per task: a task retried by eval_set keeps its successful (else latest) log;
    the others are named in the notes."""
    out: dict[str, tuple[LogHeader, ...]] = {}
    for protocol, folder in _protocol_dirs(run_dir, manifest).items():
        by_task: dict[str, list[LogHeader]] = {}
        for file in sorted(folder.glob("*.eval")):
            log = read_eval_log(str(file), header_only=True)
            meta = log.eval.metadata or {}
            header = LogHeader(
                protocol=str(meta.get("protocol") or protocol),
                task=log.eval.task,
                condition=str(meta.get("condition_label") or meta.get("condition") or log.eval.task),
                status=str(log.status),
                location=str(file),
                model=str(log.eval.model),
                model_roles={k: str(getattr(v, "model", v)) for k, v in (log.eval.model_roles or {}).items()},
                embedder=meta.get("embedder"),
                code_version=meta.get("code_version"),
                dataset=meta.get("dataset"),
                dataset_sha256=meta.get("dataset_sha256"),
                exploratory=bool(meta.get("exploratory")),
                packages=dict(log.eval.packages or {}),
            )
            by_task.setdefault(header.task, []).append(header)
        kept = []
        for task, headers in by_task.items():
            ok = [h for h in headers if h.status == "success"]
            chosen = (ok or headers)[-1]
            if len(headers) > 1:
                notes.append(f"{protocol}: {len(headers)} logs of task {task}; read {Path(chosen.location).name}")
            kept.append(chosen)
        out[protocol] = tuple(kept)
        if not kept:
            notes.append(f"{protocol}: no .eval logs in {folder}")
    return out


def _ratings(run_dir: Path, notes: list[str]) -> tuple[dict[str, pd.DataFrame], dict[str, dict[str, Any]]]:
    folder = run_dir / "ratings"
    ratings: dict[str, pd.DataFrame] = {}
    agreement: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return ratings, agreement
    for file in sorted(folder.glob("*.csv")):
        frame = pd.read_csv(file, dtype=str, keep_default_na=False)
        missing = [c for c in ("sample_id", "condition", "rater", "value") if c not in frame.columns]
        if missing:
            raise RecordFormatError(
                f"a ratings file needs the columns {', '.join(RATING_COLUMNS)}; lacks {missing}", path=str(file)
            )
        ratings[file.stem] = frame
    for file in sorted(folder.glob("*.agreement.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"not valid JSON: {exc.msg}", path=str(file), line=exc.lineno) from None
        agreement[file.name.removesuffix(".agreement.json")] = data
    for measure in sorted(set(agreement) - set(ratings)):
        notes.append(f"ratings/{measure}.agreement.json has no ratings/{measure}.csv beside it")
    return ratings, agreement


def finite(value: Any) -> float | None:
    """A JSON-safe number: None for missing or non-finite values."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
