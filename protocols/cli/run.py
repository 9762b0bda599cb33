"""``lca run PROTOCOL --conditions a,b --model M``: an inspect eval_set, one task per condition.

Condition parameters come from ``--params-file FILE.yaml`` (a mapping; ``weights:`` may be a nested mapping
of resonance weights), then ``-T params="a=1;b=2"`` (the older form, still accepted), then each
``--param NAME=VALUE`` (``weights.TERM=VALUE`` sets one weight); a later source overrides an earlier one.
All of them are typed and checked against every listed condition's parameters before anything loads, and
reach each task as the plain ``params`` string its task function takes (inspect identifies a task by
plain parameters).
"""

from __future__ import annotations

import argparse
import inspect as pyinspect
import json
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from lca.params import ParameterError, coerce, format_assignments, parse_assignments, split_assignment

WEIGHTS = "weights"  # the condition parameter a dotted ``weights.TERM`` name gathers into
PARAMS_TASK_ARG = "params"  # the task parameter that carries a condition's parameters
RUN_ROLES = ("summarizer", "reviewer", "grader")


@dataclass(frozen=True)
class Assignment:
    """One condition parameter as the user gave it: the flag (or file) it came from, for error messages."""

    flag: str
    name: str
    value: str

    @property
    def item(self) -> str:
        return f"{self.name}={self.value}"


def _text(value: Any, *, flag: str, name: str) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"  # int switches (verify, living_memory) and booleans both read 1/0
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ParameterError(flag, f"{name}: {value!r}", "takes a number or a string")


def file_assignments(path: str | Path) -> list[Assignment]:
    """A ``--params-file``: a YAML (or JSON) mapping of parameter names to values; a nested mapping
    (``weights: {experience: 0}``) stands for dotted names (``weights.experience=0``)."""
    import yaml

    flag = f"--params-file {path}"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RecordFormatError(f"not valid YAML: {exc}", path=str(path)) from None
    if data is None:
        return []
    if not isinstance(data, Mapping):
        raise RecordFormatError("expected a mapping of condition parameters", path=str(path))
    out = []
    for name, value in data.items():
        if isinstance(value, Mapping):
            out += [
                Assignment(flag, f"{name}.{inner}", _text(v, flag=flag, name=f"{name}.{inner}"))
                for inner, v in value.items()
            ]
        else:
            out.append(Assignment(flag, str(name), _text(value, flag=flag, name=str(name))))
    return out


def gather_assignments(
    *, params: Iterable[str] | None = None, params_file: str | None = None, legacy_spec: str | None = None
) -> dict[str, Assignment]:
    """The condition parameters of one run by name: the file's, then ``-T params=...``'s, then
    ``--param``'s, a later one overriding an earlier one of the same name."""
    gathered: dict[str, Assignment] = {}
    sources: list[Assignment] = file_assignments(params_file) if params_file else []
    for part in filter(None, (p.strip() for p in (legacy_spec or "").split(";"))):
        sources.append(Assignment("-T params", *split_assignment(part, flag="-T params")))
    given = parse_assignments(params, flag="--param")  # malformed items and repeated names fail here
    sources += [Assignment("--param", name, value) for name, value in given.items()]
    for assignment in sources:
        gathered[assignment.name] = assignment
    return gathered


def condition_params(condition: str, assignments: Mapping[str, Assignment]) -> dict[str, Any]:
    """The typed parameters ``assignments`` give ``condition``: every name must be one of its constructor's
    parameters (typed by its default); ``weights.TERM`` names are gathered into its ``weights`` string."""
    from conditions.recall import parse_weights
    from lca.recall import TERMS, ResonanceWeights
    from protocols.harness.solvers import condition_parameter_types

    types = condition_parameter_types(condition)
    out: dict[str, Any] = {}
    weights: dict[str, float] = {}
    for assignment in assignments.values():
        name, _, term = assignment.name.partition(".")
        if name not in types:
            raise ParameterError(
                assignment.flag,
                assignment.item,
                f"condition '{condition}' has no parameter '{name}'; it takes: {', '.join(types)}",
            )
        if term and name != WEIGHTS:
            raise ParameterError(
                assignment.flag, assignment.item, f"only '{WEIGHTS}' takes dotted names ({WEIGHTS}.TERM=VALUE)"
            )
        if name != WEIGHTS:
            if ";" in assignment.value:
                raise ParameterError(
                    assignment.flag,
                    assignment.item,
                    "a value may not hold ';' (it separates parameters in the task's params string)",
                )
            out[name] = coerce(assignment.value, types[name], flag=assignment.flag, item=assignment.item)
            continue
        try:
            if term:
                if term not in TERMS:
                    raise LCAError(f"unknown weight '{term}'; known: {', '.join(TERMS)}")
                given = {term: coerce(assignment.value, float, flag=WEIGHTS, item=term)}
            else:
                given = parse_weights(assignment.value)
            ResonanceWeights().with_overrides(given)  # a negative or non-finite weight is refused now
        except LCAError as exc:
            reason = exc.reason if isinstance(exc, ParameterError) else str(exc)
            raise ParameterError(assignment.flag, assignment.item, reason) from None
        weights = {**weights, **given} if term else {**given, **weights}  # a dotted weight beats the string
    if weights:
        out[WEIGHTS] = ",".join(format_assignments(weights))
    return out


def params_spec(params: Mapping[str, Any]) -> str:
    """Typed condition parameters as the task's ``params`` string (``name=value`` joined by ';')."""
    return ";".join(format_assignments(params))


def task_parameter_types(task_fn) -> dict[str, type]:
    """The ``-T`` names a protocol's task takes, typed by their defaults (str when the default says nothing)."""
    out: dict[str, type] = {}
    for name, p in pyinspect.signature(task_fn).parameters.items():
        default = p.default
        out[name] = type(default) if isinstance(default, (bool, int, float)) else str
    return out


def build_tasks(
    task_fn,
    conditions: list[str],
    *,
    task_args: Iterable[str] | None = None,
    params: Iterable[str] | None = None,
    params_file: str | None = None,
) -> list:
    """One inspect Task per condition, every argument checked before any task (or dataset) is built."""
    from conditions import condition_class

    for name in conditions:
        condition_class(name)  # refuses unknown names with the list
    known = task_parameter_types(task_fn)
    known.pop("condition", None)  # --conditions sets it
    typed = parse_assignments(task_args, flag="-T", known=known)
    legacy = typed.pop(PARAMS_TASK_ARG, None)
    gathered = gather_assignments(params=params, params_file=params_file, legacy_spec=legacy)
    specs = {name: params_spec(condition_params(name, gathered)) for name in conditions}
    return [
        task_fn(condition=name, **typed, **({PARAMS_TASK_ARG: specs[name]} if gathered else {})) for name in conditions
    ]


def cmd_run(args: argparse.Namespace) -> int:
    from inspect_ai import eval_set

    from conditions import available_conditions
    from protocols.evals import protocol_task
    from protocols.providers.models import resolve_model

    task_fn = protocol_task(args.protocol)
    names = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if not names:
        raise LCAError(f"--conditions is empty; known: {', '.join(available_conditions())}")
    roles = parse_assignments(args.role, flag="--role", known={role: str for role in RUN_ROLES})
    tasks = build_tasks(task_fn, names, task_args=args.task_arg, params=args.param, params_file=args.params_file)
    resolve_model(args.model)
    for role_model in roles.values():
        resolve_model(role_model)
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
    summary = []
    for log in logs:
        scores = {}
        for result in log.results.scores if log.results else []:
            for metric_name, metric in result.metrics.items():
                scores[f"{result.scorer}/{result.name}/{metric_name}"] = round(metric.value, 4)
        summary.append(
            {
                "task": log.eval.task,
                "status": log.status,
                "samples": log.results.completed_samples if log.results else 0,
                "scores": scores,
                "log": log.location,
            }
        )
    print(json.dumps({"log_dir": str(log_dir), "ok": ok, "tasks": summary}, indent=2))
    return 0 if ok else 1


def listing() -> str:
    """The protocols and conditions ``lca run`` accepts, each with its first line of description."""
    from conditions import available_conditions, condition_class
    from protocols.evals import available_protocols, protocol_metadata

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
        "condition parameters (checked against every listed condition before anything loads):",
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
        "results/logs/PROTOCOL-TIME/ (inspect view shows them).",
        epilog=_LISTING,
        formatter_class=_ListingHelpFormatter,
    )
    p.add_argument("protocol", metavar="PROTOCOL", help="a registered protocol (listed below)")
    p.add_argument("--conditions", required=True, help="comma-separated condition names (listed below)")
    p.add_argument("--model", required=True, help="any inspect model string, e.g. lca-local/smollm2")
    p.add_argument(
        "--role",
        action="append",
        metavar="ROLE=MODEL",
        help=f"the model of one role ({', '.join(RUN_ROLES)}; default: --model); repeatable",
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
    p.add_argument("--limit", type=int, help="samples per task")
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
    p.set_defaults(func=cmd_run)
