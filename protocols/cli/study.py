"""``lca study plan|unit|merge|compare``: a study run by work units (docs/cluster.md).

``lca run STUDY.yaml --executor local|dask|slurm`` starts such a run; these commands are its parts, for a
scheduler (a Slurm job array runs ``lca study unit`` per task and ``lca study merge`` after) or by hand."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import protocols.cli.common as common
from lca.errors import LCAError
from protocols.cli.report import DEFAULT_REPORTS, report_run


def add_parser(sub) -> None:
    p = sub.add_parser("study", help="a study run by work units: plan, run one unit, merge, compare reports")
    inner = p.add_subparsers(dest="study_command", required=True)

    plan = inner.add_parser("plan", help="list a study's work units (protocol x condition x shard) without running")
    plan.add_argument("study", metavar="STUDY.yaml")
    plan.add_argument("--shards", type=int, default=1, help="sample shards a condition (default 1)")
    plan.add_argument("--exploratory", action="store_true", help="plan an unlocked or edited study")
    plan.add_argument("--data", metavar="FOLDER", help="the folder holding the benchmark files (else $LCA_DATA)")
    plan.add_argument("--json", action="store_true", help="the units as JSON")
    plan.set_defaults(func=cmd_plan)

    unit = inner.add_parser("unit", help="run one work unit of a planned run into its folder (with its retries)")
    unit.add_argument("run_dir", metavar="RUN_DIR", help="the run directory holding plan.json")
    unit.add_argument("unit", metavar="UNIT_ID")
    unit.add_argument("--retries", type=int, help="attempts after a failed one (default: the plan's --unit-retries)")
    unit.set_defaults(func=cmd_unit)

    merge = inner.add_parser("merge", help="merge a run's units into one run (refuses a missing or failed unit)")
    merge.add_argument("run_dir", metavar="RUN_DIR")
    merge.add_argument(
        "--partial", action="store_true", help="merge although units are missing or failed, and mark the run partial"
    )
    merge.add_argument("--report", nargs="?", const=DEFAULT_REPORTS, metavar="FOLDER", help="then write its report")
    merge.set_defaults(func=cmd_merge)

    compare = inner.add_parser(
        "compare", help="the figures two report folders differ in, timings, run ids and paths aside (exit 1 if any)"
    )
    compare.add_argument("first", metavar="REPORT_DIR")
    compare.add_argument("second", metavar="REPORT_DIR")
    compare.set_defaults(func=cmd_compare)


def cmd_plan(args: argparse.Namespace) -> int:
    from protocols.study.runner import StudyRunner
    from protocols.study.sharded import study_units

    common.at_least(args.shards, 1, flag="--shards")
    runner = StudyRunner(args.study, exploratory=args.exploratory, data=args.data, echo=lambda line: None)
    runner.prepare()
    units = study_units(runner, args.shards)
    if args.json:
        print(json.dumps([u.to_dict() for u in units], indent=2))
    else:
        for u in units:
            print(f"{u.id}\t{u.protocol}\t{u.condition}\tshard {u.shard + 1}/{u.shards}\tsamples {u.start}:{u.stop}")
    return 0


def cmd_unit(args: argparse.Namespace) -> int:
    from protocols.study.sharded import run_unit

    if args.retries is not None:
        common.at_least(args.retries, 0, flag="--retries")
    return 0 if run_unit(args.run_dir, args.unit, retries=args.retries) == "success" else 1


def cmd_merge(args: argparse.Namespace) -> int:
    from protocols.study.merge import merge_run
    from protocols.study.units import read_plan

    result = merge_run(args.run_dir, partial=args.partial)
    if args.report:  # the plan names the study by its absolute path: the merge may run in another folder
        study_path = read_plan(args.run_dir).study_path
        report_run(study_path, result.run_id, str(Path(args.run_dir).parent.parent), args.report)
    return 0 if result.ok else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from protocols.report.compare import report_differences

    for folder in (args.first, args.second):
        if not (Path(folder) / "summary.json").is_file():
            raise LCAError(f"{folder}: no summary.json (a report folder, results/reports/STUDY, is expected)")
    differences = report_differences(args.first, args.second)
    for line in differences:
        print(line)
    print(f"{len(differences)} difference(s) outside timings, run ids and paths")
    return 1 if differences else 0
