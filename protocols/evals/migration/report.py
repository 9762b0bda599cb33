"""The migration protocol's section of a study report: its measures per move (binding), with downtime at p50 and
p95 over the moves of each binding, read from the items frame (``protocols.report.items``). The report calls
``report_section`` for every protocol folder that has this module (``protocols.evals.sections``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from protocols.evals.sections import ReportSection

TITLE = "Moves by binding"
NOTE = (
    "One row per move (binding) and condition, over its samples: system continuity and the effect left in flight"
    " performed exactly once (means), downtime from quiesce to resume at p50 and p95 (seconds), the whole move's"
    " seconds at p50, the checkpoint's bytes, the tokens re-derived (the index rebuilt on the target) and"
    " re-injected (the first context after the move), medians, and the operator steps the move needs"
    " (protocols/evals/migration/operator.py: OPERATOR_STEPS, the largest count among its samples)."
)
COLUMNS = (
    ("binding", "binding"),
    ("condition", "condition"),
    ("moves", "moves"),
    ("system_continuity", "system continuity"),
    ("effect_exactly_once", "effect exactly once"),
    ("downtime_p50_s", "downtime p50 s"),
    ("downtime_p95_s", "downtime p95 s"),
    ("move_p50_s", "move p50 s"),
    ("bundle_bytes", "bundle bytes"),
    ("tokens_rederived", "tokens re-derived"),
    ("tokens_reinjected", "tokens re-injected"),
    ("operator_steps", "operator steps"),
)


def _values(part: pd.DataFrame, column: str) -> pd.Series:
    if column not in part.columns:
        return pd.Series(dtype=float)
    return pd.to_numeric(part[column], errors="coerce").dropna()


def _stat(part: pd.DataFrame, column: str, how: str, q: float = 50) -> float:
    v = _values(part, column)
    if not len(v):
        return math.nan
    return float({"mean": v.mean, "max": v.max}[how]()) if how in ("mean", "max") else float(np.percentile(v, q))


def binding_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Per binding (the sample id's ``@binding``) and condition, in the order the bindings first appear."""
    if frame.empty:
        return []
    data = frame.assign(binding=frame["sample_id"].astype(str).str.rsplit("@", n=1).str[-1])
    rows = []
    for (binding, condition), part in data.groupby(["binding", "condition"], sort=False):
        ok = part[part["error"].isna()] if "error" in part.columns else part
        rows.append(
            {
                "binding": binding,
                "condition": condition,
                "moves": len(ok),
                "system_continuity": _stat(ok, "migration_system/system_continuity", "mean"),
                "effect_exactly_once": _stat(ok, "work_carried/effect_exactly_once", "mean"),
                "downtime_p50_s": _stat(ok, "migration_cost/downtime_s", "pct", 50),
                "downtime_p95_s": _stat(ok, "migration_cost/downtime_s", "pct", 95),
                "move_p50_s": _stat(ok, "migration_cost/move_seconds", "pct", 50),
                "bundle_bytes": _stat(ok, "migration_cost/bundle_bytes", "pct", 50),
                "tokens_rederived": _stat(ok, "migration_cost/tokens_rederived", "pct", 50),
                "tokens_reinjected": _stat(ok, "migration_cost/tokens_reinjected", "pct", 50),
                "operator_steps": _stat(ok, "migration_cost/operator_steps", "max"),
            }
        )
    return rows


def report_section(frame: pd.DataFrame) -> ReportSection:
    return ReportSection(TITLE, NOTE, COLUMNS, tuple(binding_rows(frame)))
