"""Reports of study runs (``lca report STUDY``): the run directory read (``run``), the per-item frame
(``items``), the findings on every prediction and measure (``findings``: verdicts, estimates, condition models,
tables), the words (``render``), the plots (``plots``) and the report folder (``writer``). ``load_run`` and
``items_frame`` are the analysis API a notebook uses; docs/reports.md is the guide."""

from protocols.report.findings import (
    VERDICTS,
    JudgedStatus,
    PredictionOutcome,
    StudyAnalysis,
    analyse,
    analyse_frame,
    judged_status,
)
from protocols.report.items import items_frame, measure_column, measure_frame
from protocols.report.run import StudyRun, load_run
from protocols.report.writer import ReportFiles, write_report

__all__ = [
    "VERDICTS",
    "JudgedStatus",
    "PredictionOutcome",
    "ReportFiles",
    "StudyAnalysis",
    "StudyRun",
    "analyse",
    "analyse_frame",
    "items_frame",
    "judged_status",
    "load_run",
    "measure_column",
    "measure_frame",
    "write_report",
]
