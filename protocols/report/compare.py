"""Two reports of one study compared, figure by figure, with what varies from run to run set aside.

A sharded run (docs/cluster.md) must report what the single-process run reports on the same slice. Two runs
always differ in their run id, their folders and paths, when they ran and how long things took; every other
figure of ``summary.json`` and every cell of ``items.parquet`` must be equal. ``report_differences`` lists those
that are not (empty: the reports agree), so a test or a user can check a sharded run against a single one.
"""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from protocols.evals.benchmark import TIMING_FIGURES

RUN_TO_RUN = (
    *TIMING_FIGURES,
    "*run_id",
    "*run_dir",
    "*generated_at",
    "*started_at",
    "*finished_at",
    "*log_dir",
    "*.log",
    "files.*",
    "*.files.*",
    "*latency*",
    "*.location",
)


def _varies(key: str) -> bool:
    return any(fnmatch(key, pattern) for pattern in RUN_TO_RUN)


def _walk(a: Any, b: Any, key: str, out: list[str]) -> None:
    if _varies(key):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(set(a) | set(b)):
            inner = f"{key}.{name}" if key else str(name)
            if name not in a or name not in b:
                if not _varies(inner):
                    out.append(f"{inner}: only in {'the second' if name not in a else 'the first'}")
                continue
            _walk(a[name], b[name], inner, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{key}.{index}", out)
    elif a != b:
        out.append(f"{key}: {a!r} != {b!r}")


def _same_cell(x: Any, y: Any) -> bool:
    if hasattr(x, "__len__") and not isinstance(x, str):  # a list cell (injected pointers) read as an array
        return hasattr(y, "__len__") and list(x) == list(y)
    return bool(x == y) or (x != x and y != y)  # NaN equals NaN here


def report_differences(first: str | Path, second: str | Path) -> list[str]:
    """The figures that differ between two report folders (``summary.json`` and ``items.parquet``), timings,
    run ids and paths aside; each named by its dotted key, or its row and column."""
    import pandas as pd

    first, second = Path(first), Path(second)
    out: list[str] = []
    a = json.loads((first / "summary.json").read_text(encoding="utf-8"))
    b = json.loads((second / "summary.json").read_text(encoding="utf-8"))
    _walk(a, b, "", out)
    items_a = pd.read_parquet(first / "items.parquet")
    items_b = pd.read_parquet(second / "items.parquet")
    keys = ["protocol", "condition", "sample_id", "epoch"]
    items_a, items_b = (f.sort_values(keys).reset_index(drop=True) for f in (items_a, items_b))
    columns = [c for c in items_a.columns if not _varies(c)]
    if list(items_a.columns) != list(items_b.columns) or len(items_a) != len(items_b):
        out.append(f"items.parquet: shapes differ ({items_a.shape} and {items_b.shape})")
        return out
    for column in columns:
        for row, (x, y) in enumerate(zip(items_a[column].tolist(), items_b[column].tolist())):
            if not _same_cell(x, y):
                out.append(f"items.parquet row {row} ({items_a.loc[row, 'sample_id']}) {column}: {x!r} != {y!r}")
    return out
