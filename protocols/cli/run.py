"""``lca run PROTOCOL --conditions a,b --model M``: an inspect eval_set, one task per condition.

Each entry of ``--conditions`` is a condition's name or a *variant* of it with its own parameters in brackets
(``full-lca[weights.temporal=0]``, ``protocols.harness.variants``), so a baseline and its ablations run as one
eval set: each entry is its own task, named by its label. Parameters for every condition come from
``--params-file FILE.yaml`` (a mapping; ``weights:`` may be a nested mapping of resonance weights), then
``-T params="a=1;b=2"`` (the older form, still accepted), then each ``--param NAME=VALUE`` (``weights.TERM=VALUE``
sets one weight); a later source overrides an earlier one, and a variant's own parameters override them all.

Everything is checked before anything loads, in this order, each failure one line and exit 2: the protocol,
``--limit``, the condition names and labels, ``--role``, the task arguments (``-T``), every condition's
parameters, the models (``--model``, each ``--role``: a missing provider package is named); only then are the
datasets read and the tasks built. A condition's parameters reach its task as the plain ``params`` string its
task function takes (inspect identifies a task by plain parameters).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import protocols.cli.common as common
from lca.errors import LCAError
from protocols.cli.report import report_run
from protocols.evals import available_protocols, protocol_metadata, protocol_task
from protocols.harness.planning import (  # noqa: F401  (re-exported: the names lca run has always had)
    PARAMS_TASK_ARG,
    RUN_ROLES,
    SHARED_FLAGS,
    PlannedTask,
    build_tasks,
    condition_params,
    file_assignments,
    gather_assignments,
    params_spec,
    parse_roles,
    plan_tasks,
    shortfall_counts,
    task_parameter_types,
    task_summary,
)
from protocols.harness.variants import split_conditions
from protocols.providers import models
from protocols.study.runner import DEFAULT_OUT, run_study

STUDY_FIXED_FLAGS = (  # a study's design is its document: these flags would change it
    ("conditions", "--conditions"),
    ("model", "--model"),
    ("role", "--role"),
    ("param", "--param"),
    ("params_file", "--params-file"),
    ("limit", "--limit"),
    ("task_arg", "-T"),
    ("log_dir", "--log-dir"),
)
STUDY_ONLY_FLAGS = (
    ("exploratory", "--exploratory"),
    ("data", "--data"),
    ("out", "--out"),
    ("report", "--report"),
    ("executor", "--executor"),
    ("emit_batch", "--emit-batch"),
)
SHARDED_FLAGS = (("shards", "--shards"), ("workers", "--workers"), ("scheduler", "--scheduler"))


def cmd_run_study(args: argparse.Namespace) -> int:
    """``lca run STUDY.yaml``: the study's protocols, conditions and models as its document says
    (``protocols.study.runner``); only where data and results live and how progress shows are flags."""
    given = [flag for name, flag in STUDY_FIXED_FLAGS if getattr(args, name, None) not in (None, [])]
    if given:
        raise LCAError(
            f"{', '.join(given)} cannot be given with a study ({args.protocol}): a study's design is its document "
            "(conditions, models, limits and arguments come from it); edit a copy and lock it, or run it "
            "--exploratory"
        )

    common.at_least(args.retry_attempts, 0, flag="--retry-attempts")
    if args.executor or args.emit_batch:
        return cmd_run_sharded(args)
    given = [flag for name, flag in SHARDED_FLAGS if getattr(args, name, None) is not None]
    if given:
        raise LCAError(f"{', '.join(given)} applies to a run by work units (--executor local|dask|slurm)")
    result = run_study(
        args.protocol,
        exploratory=args.exploratory,
        data=args.data,
        out=args.out or DEFAULT_OUT,
        display=args.display,
        retry_attempts=args.retry_attempts,
    )
    if args.report:  # a run with a failed protocol is reported too: the report says what did not finish
        report_run(args.protocol, result.run_id, args.out or DEFAULT_OUT, args.report)
    return 0 if result.ok else 1


def cmd_run_sharded(args: argparse.Namespace) -> int:
    """``lca run STUDY.yaml --executor local|dask|slurm``: the study cut into work units, run by the executor
    and merged into one run (docs/cluster.md); with slurm, the job array is written, not run."""
    import time

    from protocols.study import executors

    executor = args.executor or "slurm"
    if executor == "slurm" and not args.emit_batch:
        raise LCAError("--executor slurm needs --emit-batch DIR (the job array's files are written there)")
    if args.emit_batch and executor != "slurm":
        raise LCAError(f"--emit-batch applies to --executor slurm, not {executor}")
    shards = 1 if args.shards is None else args.shards
    common.at_least(shards, 1, flag="--shards")
    common.at_least(args.unit_retries, 0, flag="--unit-retries")
    if args.workers is not None:
        common.at_least(args.workers, 1, flag="--workers")
    if executor != "dask" and (args.workers is not None or args.scheduler):
        raise LCAError("--workers and --scheduler apply to --executor dask")
    out = args.out or DEFAULT_OUT
    options = dict(exploratory=args.exploratory, data=args.data, out=out, retry_attempts=args.retry_attempts)
    if executor == "slurm":
        from protocols.study.sharded import start_sharded_run

        _, plan, run_dir = start_sharded_run(
            args.protocol, shards=shards, unit_retries=args.unit_retries, executor="slurm", **options
        )
        files = executors.emit_slurm_batch(plan, run_dir, Path(args.emit_batch), report=args.report)
        print(f"run {plan.run_id}: {len(plan.units)} unit(s) planned in {run_dir}")
        print(f"written: {', '.join(str(f) for f in files)}")
        print(f"submit with: bash {Path(args.emit_batch).resolve() / 'submit.sh'}")
        return 0
    chosen: executors.UnitExecutor = (
        executors.DaskExecutor(workers=args.workers or 3, scheduler=args.scheduler)
        if executor == "dask"
        else executors.LocalExecutor()
    )
    clock = time.monotonic()
    result = executors.run_sharded(
        args.protocol, chosen, shards=shards, unit_retries=args.unit_retries, display=args.display, **options
    )
    print(
        f"wall time {time.monotonic() - clock:.1f} s ({executor}, {len(result.manifest['execution']['units'])} units)"
    )
    if args.report:
        report_run(args.protocol, result.run_id, out, args.report)
    return 0 if result.ok else 1


def cmd_run(args: argparse.Namespace) -> int:
    from protocols.study.runner import is_study_path  # the study runner: loaded by `lca run`, not `lca --help`

    if is_study_path(args.protocol):
        return cmd_run_study(args)
    given = [flag for name, flag in STUDY_ONLY_FLAGS + SHARDED_FLAGS if getattr(args, name, None) not in (None, False)]
    if given:
        raise LCAError(f"{', '.join(given)} applies to a study (lca run STUDY.yaml), not to a protocol run")
    missing = [flag for flag in ("--conditions", "--model") if not getattr(args, flag[2:])]
    if missing:
        raise LCAError(f"lca run {args.protocol} needs {' and '.join(missing)} (a study file, STUDY.yaml, does not)")
    return cmd_run_protocol(args)


def cmd_run_protocol(args: argparse.Namespace) -> int:
    from conditions import available_conditions  # the condition registry: not for `lca --help`

    task_fn = protocol_task(args.protocol)
    common.at_least(args.limit, 1, flag="--limit")
    common.at_least(args.retry_attempts, 0, flag="--retry-attempts")
    entries = split_conditions(args.conditions)
    if not entries:
        raise LCAError(f"--conditions is empty; known: {', '.join(available_conditions())}")
    roles = parse_roles(args.role)
    planned = plan_tasks(task_fn, entries, task_args=args.task_arg, params=args.param, params_file=args.params_file)
    models.resolve_model(args.model)
    for role_model in roles.values():
        models.resolve_model(role_model)
    tasks = [task.build(task_fn) for task in planned]

    from inspect_ai import eval_set  # heavy: loaded only once the run is checked

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    log_dir = Path(args.log_dir or f"results/logs/{args.protocol}-{stamp}")
    ok, logs = eval_set(
        tasks,
        log_dir=str(log_dir),
        model=args.model,
        model_roles=roles or None,
        limit=args.limit,
        display=args.display,
        retry_attempts=args.retry_attempts,
    )
    summary = [task_summary(log) for log in logs]
    print(json.dumps({"log_dir": str(log_dir), "ok": ok, "tasks": summary}, indent=2))
    return 0 if ok else 1


def listing() -> str:
    """The protocols and conditions ``lca run`` accepts, each with its first line of description."""
    from conditions import available_conditions, condition_class  # the condition registry, for `lca run --help`

    def first_sentence(text: str | None) -> str:
        paragraph = " ".join((text or "").strip().split("\n\n", 1)[0].split())
        return paragraph.split(". ", 1)[0].rstrip(".")

    protocols = [(name, protocol_metadata(name).title) for name in available_protocols()]
    conditions = [(name, first_sentence(condition_class(name).__doc__)) for name in available_conditions()]
    width = max((len(name) for name, _ in protocols + conditions), default=0) + 2

    def row(name: str, text: str) -> str:
        return textwrap.fill(
            text,
            width=100,
            initial_indent=f"  {name:<{width}}",
            subsequent_indent=" " * (width + 2),
            break_on_hyphens=False,
        )

    lines = ["protocols:", *(row(name, text) for name, text in protocols)]
    if not protocols:
        lines.append("  (none registered)")
    lines += ["", "conditions:", *(row(name, text) for name, text in conditions)]
    lines += [
        "",
        "condition variants (each its own task of the eval set, named by its label):",
        "  --conditions 'full-lca,full-lca[weights.temporal=0]'   a baseline and its ablation in one run;",
        "                             bracketed NAME=VALUE items (',' or ';' between them) apply to that entry",
        "                             alone and override the parameters below",
        "",
        "condition parameters for every listed condition (checked before anything loads):",
        "  --param NAME=VALUE         repeatable; weights.TERM=VALUE sets one resonance weight",
        "  --params-file FILE.yaml    a mapping of NAME: VALUE; 'weights:' may be a nested mapping",
        '  -T params="A=1;B=2"        the older form, still accepted',
    ]
    return "\n".join(lines)


class _ListingHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Writes the protocol and condition listing only when ``lca run --help`` is shown, so that
    building the parser for other commands imports neither registry."""

    def add_text(self, text: str | None) -> None:
        super().add_text(listing() if text is _LISTING else text)


_LISTING = "\0protocols and conditions\0"  # a placeholder epilog, recognised by identity


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a protocol under several conditions as an inspect eval_set",
        description="Run PROTOCOL once per condition with inspect's eval_set; logs go to\n"
        "results/logs/PROTOCOL-TIME/ (inspect view shows them).\n\n"
        "Or run a pre-registered study: lca run preregistration/STUDY.yaml [--exploratory]. Its conditions,\n"
        "models, protocols and limits come from the document (locked with lca prereg lock); the run goes to\n"
        "results/studies/STUDY/RUN_ID/ (run.json, logs/, ratings/).",
        epilog=_LISTING,
        formatter_class=_ListingHelpFormatter,
    )
    p.add_argument(
        "protocol", metavar="PROTOCOL", help="a registered protocol (listed below), or a study document STUDY.yaml"
    )
    p.add_argument(
        "--conditions",
        help="comma-separated condition names (listed below), each optionally with its own parameters: "
        "NAME[PARAM=VALUE,...]; required for a protocol, refused for a study",
    )
    p.add_argument(
        "--model", help="any inspect model string, e.g. lca-local/smollm2; required for a protocol, refused for a study"
    )
    p.add_argument(
        "--role",
        action="append",
        metavar="ROLE=MODEL",
        help=f"the model of one role ({', '.join(RUN_ROLES)}, or rater_<name> for a blind rater of judged "
        "measures, any number; default: --model); repeatable",
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="one condition parameter, e.g. policy=adaptive or weights.experience=0 (one resonance "
        "weight); checked against every listed condition; repeatable; overrides --params-file",
    )
    p.add_argument(
        "--params-file",
        metavar="FILE.yaml",
        help="condition parameters as a YAML mapping; 'weights:' may be a nested mapping of terms",
    )
    p.add_argument("--limit", type=int, help="samples per task (at least 1)")
    p.add_argument(
        "-T",
        dest="task_arg",
        action="append",
        metavar="NAME=VALUE",
        help='task argument (repeatable), e.g. data=PATH or seed=1; -T params="a=1;b=2" (condition '
        "parameters joined by ';') is still accepted",
    )
    p.add_argument("--log-dir")
    p.add_argument("--display", default="rich", choices=["full", "rich", "plain", "conversation", "log", "none"])
    p.add_argument("--retry-attempts", type=int, default=0)
    p.add_argument(
        "--exploratory",
        action="store_true",
        help="study only: run an unlocked or edited study; the console, run.json, every log and report say so",
    )
    p.add_argument(
        "--data", metavar="FOLDER", help="study only: the folder holding the benchmark files (else $LCA_DATA)"
    )
    p.add_argument("--out", metavar="FOLDER", help="study only: where study runs go (default results/studies)")
    p.add_argument(
        "--report",
        nargs="?",
        const="results/reports",
        metavar="FOLDER",
        help="study only: then write this run's report, as `lca report STUDY --run RUN_ID` would, into FOLDER "
        "(default results/reports)",
    )
    p.add_argument(
        "--executor",
        choices=["local", "dask", "slurm"],
        help="study only: run the study by work units (protocol x condition x sample shard) on this executor and "
        "merge them into one run (docs/cluster.md); slurm writes a job array (--emit-batch) instead of running",
    )
    p.add_argument("--shards", type=int, help="with --executor: sample shards a condition (default 1)")
    p.add_argument(
        "--unit-retries", type=int, default=1, help="with --executor: attempts after a failed unit (default 1)"
    )
    p.add_argument("--workers", type=int, help="with --executor dask: local worker processes (default 3)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="with --executor dask: an existing scheduler, tcp://...")
    p.add_argument(
        "--emit-batch", metavar="DIR", help="with --executor slurm: write the sbatch job array and merge job here"
    )
    p.set_defaults(func=cmd_run)
