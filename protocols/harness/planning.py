"""Planning the tasks of a run: every condition, task argument and parameter checked before anything loads.

Shared by ``lca run PROTOCOL`` (protocols/cli/run.py, whose docstring gives the order of the checks) and
``lca run STUDY.yaml`` (protocols/study/runner.py), so a study's tasks are checked and built exactly as a
protocol run's; ``task_summary`` is the per-task summary both print or record.
"""

from __future__ import annotations

import inspect as pyinspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lca.errors import RecordFormatError
from lca.params import ParameterError, parse_assignments, split_assignment
from protocols.harness.variants import (
    Assignment,
    Variant,
    checked_condition,
    condition_parameter_types,
    parse_variants,
    variant_params,
)
from protocols.harness.variants import condition_params as typed_condition_params
from protocols.harness.variants import params_spec as typed_params_spec

PARAMS_TASK_ARG = "params"  # the task parameter that carries a condition's parameters
RUN_ROLES = ("summarizer", "reviewer", "grader", "migrated")  # migrated: the agent after a model binding change
SHARED_FLAGS = ("--param", "-T params", "--params-file")  # sources that give every condition a parameter


def _assignment(flag: str, name: str, value: str) -> Assignment:
    return Assignment(flag, name, value)


def _text(value: Any, *, flag: str, name: str) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"  # int switches (verify, living_memory) and booleans both read 1/0
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ParameterError(flag, f"{name}: {value!r}", "takes a number or a string")


def file_assignments(path: str | Path) -> list[Assignment]:
    """A ``--params-file``: a YAML (or JSON) mapping of parameter names to values; a nested mapping
    (``weights: {experience: 0}``) stands for dotted names (``weights.experience=0``)."""
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
                _assignment(flag, f"{name}.{inner}", _text(v, flag=flag, name=f"{name}.{inner}"))
                for inner, v in value.items()
            ]
        else:
            out.append(_assignment(flag, str(name), _text(value, flag=flag, name=str(name))))
    return out


def gather_assignments(
    *, params: Iterable[str] | None = None, params_file: str | None = None, legacy_spec: str | None = None
) -> dict[str, Assignment]:
    """The condition parameters of one run, given to every condition, by name: the file's, then
    ``-T params=...``'s, then ``--param``'s, a later one overriding an earlier one of the same name."""
    gathered: dict[str, Assignment] = {}
    sources: list[Assignment] = file_assignments(params_file) if params_file else []
    for part in filter(None, (p.strip() for p in (legacy_spec or "").split(";"))):
        sources.append(_assignment("-T params", *split_assignment(part, flag="-T params")))
    given = parse_assignments(params, flag="--param")  # malformed items and repeated names fail here
    sources += [_assignment("--param", name, value) for name, value in given.items()]
    for assignment in sources:
        gathered[assignment.name] = assignment
    return gathered


def condition_params(condition: str, assignments: Mapping[str, Assignment]) -> dict[str, Any]:
    """The typed parameters ``assignments`` give ``condition`` (``protocols.harness.variants.condition_params``)."""
    return typed_condition_params(condition, assignments)


def params_spec(params: Mapping[str, Any]) -> str:
    """Typed condition parameters as the task's ``params`` string (``name=value`` joined by ';')."""
    return typed_params_spec(params)


def task_parameter_types(task_fn) -> dict[str, type]:
    """The ``-T`` names a protocol's task takes, typed by their defaults (str when the default says nothing)."""
    out: dict[str, type] = {}
    for name, p in pyinspect.signature(task_fn).parameters.items():
        default = p.default
        out[name] = type(default) if isinstance(default, (bool, int, float)) else str
    return out


@dataclass(frozen=True)
class PlannedTask:
    """One task of a run, every argument checked: the variant's label (the task's ``condition``), the typed
    task arguments and the condition's parameters as the task's ``params`` string (empty: its defaults)."""

    label: str
    task_args: dict[str, Any] = field(default_factory=dict)
    params: str = ""

    def build(self, task_fn):
        return task_fn(
            condition=self.label, **self.task_args, **({PARAMS_TASK_ARG: self.params} if self.params else {})
        )


def _variant_params(variant: Variant, shared: Mapping[str, Assignment], variants: list[Variant]) -> dict[str, Any]:
    """A variant's typed parameters; a parameter given to every condition that one of them lacks is refused
    with the bracketed form that gives it to those that take it."""
    try:
        return variant_params(variant, shared.values())
    except ParameterError as exc:
        if exc.flag.startswith(SHARED_FLAGS) and "has no parameter" in exc.reason and len(variants) > 1:
            name = exc.item.partition("=")[0].partition(".")[0]
            takers = [v for v in variants if name in condition_parameter_types(v.condition)]
            if takers:
                example = f"{takers[0].condition}[{exc.item}]"
                raise ParameterError(
                    exc.flag, exc.item, f"{exc.reason}; to give it to some conditions only, write e.g. '{example}'"
                ) from None
        raise


def plan_tasks(
    task_fn,
    conditions: list[str],
    *,
    task_args: Iterable[str] | None = None,
    params: Iterable[str] | None = None,
    params_file: str | None = None,
) -> list[PlannedTask]:
    """Every task of a run, checked without loading anything: the condition names and variant labels
    (distinct), the task arguments (``-T``, typed by the task function) and each condition's parameters
    (typed by its constructor, then the condition built from them)."""
    variants = parse_variants(conditions)
    known = task_parameter_types(task_fn)
    known.pop("condition", None)  # --conditions sets it
    typed = parse_assignments(task_args, flag="-T", known=known)
    legacy = typed.pop(PARAMS_TASK_ARG, None)
    gathered = gather_assignments(params=params, params_file=params_file, legacy_spec=legacy)
    planned = []
    for variant in variants:
        resolved = _variant_params(variant, gathered, variants)
        checked_condition(variant.label, variant.condition, resolved)
        planned.append(PlannedTask(variant.label, dict(typed), params_spec(resolved)))
    return planned


def build_tasks(
    task_fn,
    conditions: list[str],
    *,
    task_args: Iterable[str] | None = None,
    params: Iterable[str] | None = None,
    params_file: str | None = None,
) -> list:
    """One inspect Task per condition, every argument checked (``plan_tasks``) before any task (or dataset)
    is built."""
    planned = plan_tasks(task_fn, conditions, task_args=task_args, params=params, params_file=params_file)
    return [task.build(task_fn) for task in planned]


def parse_roles(items: Iterable[str] | None) -> dict[str, str]:
    """``--role ROLE=MODEL`` items: the fixed roles and any number of ``rater_<name>`` roles. A rater role only
    reaches the protocols' rating steps (``protocols.analysis.raters``), which never show it the condition;
    conditions get their own roles only (``conditions.ROLES``)."""
    items = list(items or ())
    names = [split_assignment(item, flag="--role")[0] for item in items]
    known: dict[str, type | str] = {role: str for role in RUN_ROLES}
    if set(names) - set(RUN_ROLES):  # the analysis package loads only when a rater may be named
        from protocols.analysis.raters import is_rater_role

        known.update({name: str for name in names if is_rater_role(name)})
    for item, name in zip(items, names):
        if name not in known:
            raise ParameterError(
                "--role",
                item,
                f"unknown name '{name}'; known: {', '.join(sorted(RUN_ROLES))}, or any number of "
                "rater_<name> roles (lower-case letters, digits, _)",
            )
    return parse_assignments(items, flag="--role", known=known)


def task_summary(log) -> dict[str, Any]:
    """One task of an eval set as the run's JSON summary (and a study's run.json) gives it: its condition,
    status, completed samples, every metric, the shortfall counts, the tokens each model used and the names
    the models' APIs answered with."""
    scores = {}
    for result in log.results.scores if log.results else []:
        for metric_name, metric in result.metrics.items():
            scores[f"{result.scorer}/{result.name}/{metric_name}"] = round(metric.value, 4)
    metadata = log.eval.metadata or {}
    samples = log_samples(log)
    return {
        "task": log.eval.task,
        "condition": metadata.get("condition_label", metadata.get("condition")),
        "condition_params": metadata.get("condition_params"),
        "status": log.status,
        "samples": log.results.completed_samples if log.results else 0,
        "scores": scores,
        "shortfalls": shortfall_counts(log, samples),
        "model_usage": model_usage(log),
        "served_models": served_models(log, samples),
        "log": log.location,
    }


def log_samples(log) -> list[Any]:
    """A task log's samples, read from its file when the log in hand is its header only (eval_set's)."""
    from inspect_ai.log import read_eval_log

    samples = log.samples
    if samples is None and log.location:
        samples = read_eval_log(log.location).samples
    return list(samples or ())


def shortfall_counts(log, samples: Iterable[Any] | None = None) -> dict[str, int]:
    """How many samples of a task's log did less than their condition claims, by kind (the solver records the
    kinds in each sample's metadata); the summary prints them so such a run never passes for a full one."""
    counts: dict[str, int] = {}
    for sample in log_samples(log) if samples is None else samples:
        for kind in (sample.metadata or {}).get("shortfalls") or {}:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def model_usage(log) -> dict[str, dict[str, int]]:
    """Tokens per model of a task (inspect's own accounting, from the API's usage of every call)."""
    usage = log.stats.model_usage if log.stats else {}
    return {
        str(model): {
            "input_tokens": int(u.input_tokens or 0),
            "output_tokens": int(u.output_tokens or 0),
            "total_tokens": int(u.total_tokens or 0),
        }
        for model, u in sorted(usage.items())
    }


def served_models(log, samples: Iterable[Any] | None = None) -> dict[str, list[str]]:
    """Per model string the task called, the model names its API answered with (a served model's own id: the
    alias a llama.cpp server was given, an Ollama tag, a vLLM served-model-name; a GGUF's id for lca-local),
    read from the samples' model events: the string says where a model was asked, this says what answered."""
    served: dict[str, set[str]] = {}
    for sample in log_samples(log) if samples is None else samples:
        for event in sample.events or ():
            if getattr(event, "event", None) != "model" or getattr(event, "error", None):
                continue  # a failed call's output names the model string, not what the API answered with
            name = getattr(getattr(event, "output", None), "model", None)
            if name:
                served.setdefault(str(event.model), set()).add(str(name))
    return {model: sorted(names) for model, names in sorted(served.items())}
