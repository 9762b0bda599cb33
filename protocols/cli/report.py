"""``lca report STUDY``: the report of a study run (protocols/report, docs/reports.md)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write the report of a study run: markdown, JSON summary, per-item Parquet, plots",
        description="Read a study run (results/studies/STUDY/RUN_ID: run.json, the .eval logs, the ratings) and "
        "write results/reports/STUDY/: report.md, summary.json, items.parquet and plots/.",
    )
    p.add_argument("study", metavar="STUDY", help="the study id, or the path of its document (preregistration/ID.yaml)")
    p.add_argument("--run", dest="run_id", help="the run id (default: the latest, as STUDY/LATEST names it)")
    p.add_argument("--studies", default="results/studies", help="where study runs are (default: results/studies)")
    p.add_argument("--out", default=DEFAULT_REPORTS, help="where reports go (default: results/reports)")
    p.set_defaults(func=cmd_report)


DEFAULT_REPORTS = "results/reports"


def cmd_report(args: argparse.Namespace) -> int:
    report_run(args.study, args.run_id, args.studies, args.out)
    return 0


def report_run(study: str, run_id: str | None, studies: str, out: str) -> None:
    """Write one run's report and print its verdicts (``lca report``, and ``lca run STUDY --report``)."""
    from protocols.report import load_run, write_report  # loads pandas, pyarrow, statsmodels

    run = load_run(study, run_id, studies)
    files = write_report(run, out)
    if run.exploratory:
        print("EXPLORATORY: this run does not test the pre-registered plan (see the report's banner)")
    for outcome in files.analysis.predictions:
        print(f"{outcome.id} ({outcome.role}, {outcome.measure}): {outcome.verdict}")
    print(
        f"written: {files.report}, {files.summary}, {files.items}, {len(files.plots)} plot(s) in {files.folder / 'plots'}"
    )
