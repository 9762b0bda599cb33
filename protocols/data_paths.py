"""Where optional benchmark files are found: ``--data``, then ``$LCA_DATA``, then ``../shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "LCA_DATA"
KNOWN_FILES = {
    "locomo": "locomo/locomo10.json",
    "longmemeval_s_dev": "longmemeval/longmemeval_s_dev.json.xz",
    "longmemeval_oracle": "longmemeval/longmemeval_oracle.json.gz",
}


def data_roots(explicit: str | Path | None = None) -> list[Path]:
    roots = []
    if explicit:
        roots.append(Path(explicit))
    if os.environ.get(DATA_ENV):
        roots.append(Path(os.environ[DATA_ENV]))
    repo = Path(__file__).resolve().parent.parent
    roots.append(repo.parent / "shared" / "data")
    return roots


def find_data_file(name: str, explicit: str | Path | None = None) -> Path | None:
    """A benchmark file by its known name, or the explicit path itself when it is a file.

    An explicit path is never second-guessed: if it is neither the file nor a folder
    holding it, the answer is an error naming it, not a silent fall-back elsewhere.
    """
    if explicit:
        path = Path(explicit)
        if path.is_file():
            return path
        candidate = path / KNOWN_FILES[name]
        if candidate.is_file():
            return candidate
        raise FileNotFoundError(f"{path}: neither a benchmark file nor a folder holding {KNOWN_FILES[name]}")
    for root in data_roots():
        candidate = root / KNOWN_FILES[name]
        if candidate.is_file():
            return candidate
    return None
