"""``write_report``: a study run's report folder (``results/reports/<study>/``) with report.md, summary.json,
items.parquet and the plots, all from the run directory alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lca.fileio import atomic_write_bytes
from protocols.evals.sections import protocol_sections
from protocols.report.findings import StudyAnalysis, analyse
from protocols.report.items import items_frame
from protocols.report.plots import write_plots
from protocols.report.render import now, render_markdown, summary
from protocols.report.run import StudyRun

DEFAULT_REPORTS = Path("results/reports")


@dataclass(frozen=True)
class ReportFiles:
    folder: Path
    report: Path
    summary: Path
    items: Path
    plots: tuple[Path, ...]
    analysis: StudyAnalysis


def parquet_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The items frame as Parquet holds it: the pointer lists as lists of strings, other columns as they are."""
    out = frame.copy()
    if "injected_pointers" in out.columns:
        out["injected_pointers"] = out["injected_pointers"].map(
            lambda v: [str(p) for p in v] if isinstance(v, list) else []
        )
    return out


def write_report(run: StudyRun, out: str | Path = DEFAULT_REPORTS) -> ReportFiles:
    """Analyse ``run`` and write its report folder ``out/<study id>/``; returns what was written."""
    folder = Path(out) / run.study_id
    folder.mkdir(parents=True, exist_ok=True)
    frame = items_frame(run)
    analysis = analyse(run, frame)
    items = folder / "items.parquet"
    parquet_frame(frame).to_parquet(items, index=False)
    plots = write_plots(analysis, folder / "plots", run.exploratory)
    report, summary_path = folder / "report.md", folder / "summary.json"
    files = {
        "report": report.name,
        "summary": summary_path.name,
        "items (one row per protocol, sample, condition, epoch; pandas.read_parquet or datasets' from_parquet)": items.name,
        **{f"plot {p.stem}": f"plots/{p.name}" for p in plots},
        "run directory": str(run.run_dir),
    }
    generated = now()
    sections = protocol_sections(frame)
    atomic_write_bytes(report, render_markdown(run, analysis, files, generated, sections).encode("utf-8"))
    data = summary(run, analysis, files, generated, sections)
    atomic_write_bytes(
        summary_path, (json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    )
    return ReportFiles(folder, report, summary_path, items, tuple(plots), analysis)
