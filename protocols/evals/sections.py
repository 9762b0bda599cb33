"""A protocol's own section of a study report: a titled table a protocol folder contributes (its ``report.py``,
``report_section(frame) -> ReportSection``) for what the common tables do not show, such as the migration's
measures per move. Kept apart so the protocol folders and the report share one record."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import pandas as pd

from protocols.evals.registry import REGISTRY


@dataclass(frozen=True)
class ReportSection:
    title: str
    note: str
    columns: tuple[tuple[str, str], ...]  # (row key, column header)
    rows: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "note": self.note, "rows": [dict(r) for r in self.rows]}


def protocol_sections(frame: pd.DataFrame) -> tuple[ReportSection, ...]:
    """The sections of the protocols in ``frame`` whose folder has a ``report.py``, in the frame's order."""
    out = []
    names = [] if frame.empty else list(dict.fromkeys(frame["protocol"].astype(str)))
    for name in names:
        if name not in REGISTRY.folders() or not (REGISTRY.folder(name) / "report.py").is_file():
            continue
        module = importlib.import_module(f"protocols.evals.{name}.report")
        out.append(module.report_section(frame[frame["protocol"] == name]))
    return tuple(out)
