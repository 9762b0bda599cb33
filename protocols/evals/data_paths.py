"""Where optional benchmark files are found: ``--data``, then ``$LCA_DATA``, then ``../shared/data``.

The file names come from the protocols' ``eval.yaml`` (``datasets``), so a new protocol's files are
found without an edit here.
"""

from __future__ import annotations

import os
from pathlib import Path

from protocols.evals.registry import DatasetFile, dataset_file

DATA_ENV = "LCA_DATA"
REPO = Path(__file__).resolve().parents[2]


def data_roots(explicit: str | Path | None = None) -> list[Path]:
    roots = []
    if explicit:
        roots.append(Path(explicit))
    if os.environ.get(DATA_ENV):
        roots.append(Path(os.environ[DATA_ENV]))
    roots.append(REPO.parent / "shared" / "data")
    return roots


def _match(root: Path, pattern: str) -> Path | None:
    """The file a known name (or glob pattern) names under ``root``; the first in sorted order."""
    if not any(ch in pattern for ch in "*?["):
        candidate = root / pattern
        return candidate if candidate.is_file() else None
    return next((p for p in sorted(root.glob(pattern)) if p.is_file()), None)


def find_data_file(name: str, explicit: str | Path | None = None) -> Path | None:
    """A benchmark file by its dataset name (``locomo``, ``longmemeval_s_dev``, ``longmemeval_oracle``:
    any ``datasets[].name`` of an ``eval.yaml``), or the explicit path itself when it is a file."""
    return locate_data_file(dataset_file(name), explicit)


def locate_data_file(declared: DatasetFile, explicit: str | Path | None = None) -> Path | None:
    """The file an ``eval.yaml`` declares (its known name under the data roots or the repository), or the
    explicit path itself when it is a file.

    An explicit path is never second-guessed: if it is neither the file nor a folder
    holding it, the answer is an error naming it, not a silent fall-back elsewhere.
    """
    roots = [REPO] if declared.location == "repository" else data_roots()
    if explicit:
        path = Path(explicit)
        if path.is_file():
            return path
        candidate = _match(path, declared.file)
        if candidate is not None:
            return candidate
        raise FileNotFoundError(f"{path}: neither a benchmark file nor a folder holding {declared.file}")
    for root in roots:
        candidate = _match(root, declared.file)
        if candidate is not None:
            return candidate
    return None
