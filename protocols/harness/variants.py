"""Condition variants: a registered condition with its own parameters, named by a label.

A run may hold a baseline and its ablations side by side (``full-lca,full-lca[weights.temporal=0]``): each
label is the condition's registered name, optionally followed by ``[NAME=VALUE,...]`` (items separated by
',' or ';'; ``weights.TERM=VALUE`` sets one resonance weight). The label names the variant's task
(``continuity-full-lca[weights.temporal=0]``), so variants of one condition are distinct tasks of one eval
set; its bracketed parameters override the ones the run gives every condition (``--param``,
``--params-file``, ``-T params=``). Every parameter is typed against the condition's constructor here,
with one error format (``lca.params``), before anything loads.
"""

from __future__ import annotations

import inspect as pyinspect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lca.errors import LCAError
from lca.params import ParameterError, coerce, format_assignments, split_assignment

WEIGHTS = "weights"  # the condition parameter a dotted ``weights.TERM`` name gathers into
_ITEM_SEPARATORS = re.compile(r"[;,]")


@dataclass(frozen=True)
class Assignment:
    """One condition parameter as the user gave it: the flag (or file, or label) it came from, for errors."""

    flag: str
    name: str
    value: str

    @property
    def item(self) -> str:
        return f"{self.name}={self.value}"


@dataclass(frozen=True)
class Variant:
    """A condition as one run names it: ``label`` (unique in the run), the registered ``condition`` and the
    parameters its brackets give (``assignments``, in the order given)."""

    label: str
    condition: str
    assignments: tuple[Assignment, ...] = ()


def parse_variant(text: str) -> Variant:
    """``"full-lca[weights.temporal=0, policy=adaptive]"`` -> a ``Variant`` labelled
    ``full-lca[weights.temporal=0,policy=adaptive]``; a plain name is its own label. The condition name is
    checked against the registry; the parameters are checked by ``variant_params``."""
    from conditions import condition_class

    raw = text.strip()
    name, bracket, rest = raw.partition("[")
    name = name.strip()
    flag = f"condition '{raw}'"
    if not bracket:
        if "]" in raw:
            raise LCAError(f"{flag}: a ']' without its '['; write NAME[PARAM=VALUE,...]")
        condition_class(name)  # an unknown name is refused with the list of known ones
        return Variant(name, name)
    if not rest.endswith("]") or "[" in rest or "]" in rest[:-1]:
        raise LCAError(f"{flag}: expected NAME[PARAM=VALUE,...] with one pair of brackets at the end")
    condition_class(name)
    items = [part.strip() for part in _ITEM_SEPARATORS.split(rest[:-1]) if part.strip()]
    assignments = tuple(Assignment(flag, *split_assignment(item, flag=flag)) for item in items)
    seen: set[str] = set()
    for assignment in assignments:
        if assignment.name in seen:
            raise ParameterError(flag, assignment.item, f"'{assignment.name}' is given twice")
        seen.add(assignment.name)
    label = f"{name}[{','.join(a.item for a in assignments)}]" if assignments else name
    return Variant(label, name, assignments)


def split_conditions(text: str) -> list[str]:
    """The comma-separated entries of ``--conditions``, a comma inside brackets belonging to its entry."""
    entries: list[str] = []
    current: list[str] = []  # the characters of the entry being read
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            entries.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current.append(char)
    entries.append("".join(current))
    return [entry.strip() for entry in entries if entry.strip()]


def parse_variants(entries: Iterable[str]) -> list[Variant]:
    """Each entry (of ``split_conditions``) as a ``Variant``; two entries with one label are refused (an
    ablation needs its own parameters to be told from its baseline)."""
    variants = [parse_variant(entry) for entry in entries]
    seen: set[str] = set()
    for variant in variants:
        if variant.label in seen:
            types = condition_parameter_types(variant.condition)
            example = f"{WEIGHTS}.temporal=0" if WEIGHTS in types else f"{next(iter(types), 'NAME')}=VALUE"
            raise LCAError(
                f"--conditions lists '{variant.label}' twice: give a variant its own parameters, e.g. "
                f"'{variant.condition}[{example}]' beside '{variant.condition}'"
            )
        seen.add(variant.label)
    return variants


def condition_parameter_types(condition: str) -> dict[str, type]:
    """The parameters a condition takes, typed by its constructor's defaults (unknown names are refused)."""
    from conditions import condition_class

    return {
        name: type(p.default)
        for name, p in pyinspect.signature(condition_class(condition).__init__).parameters.items()
        if name != "self"
    }


def condition_params(condition: str, assignments: Mapping[str, Assignment]) -> dict[str, Any]:
    """The typed parameters ``assignments`` give ``condition``: every name must be one of its constructor's
    parameters (typed by its default); ``weights.TERM`` names are gathered into its ``weights`` string (a
    dotted weight beats the same term in a ``weights=`` string)."""
    from conditions.recall import parse_weights
    from lca.recall import TERMS, ResonanceWeights

    types = condition_parameter_types(condition)
    out: dict[str, Any] = {}
    weights: dict[str, float] = {}
    for assignment in assignments.values():
        name, _, term = assignment.name.partition(".")
        if name not in types:
            weight = (
                f"; a resonance weight is set as {WEIGHTS}.{name}=VALUE" if WEIGHTS in types and name in TERMS else ""
            )
            raise ParameterError(
                assignment.flag,
                assignment.item,
                f"condition '{condition}' has no parameter '{name}'; it takes: {', '.join(types)}{weight}",
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
        weights = {**weights, **given} if term else {**given, **weights}
    if weights:
        out[WEIGHTS] = ",".join(format_assignments(weights))
    return out


def spec_assignments(spec: str | None, *, flag: str) -> list[Assignment]:
    """A task's ``params`` string (``name=value`` joined by ';') as assignments from ``flag``."""
    return [
        Assignment(flag, *split_assignment(part, flag=flag))
        for part in (p.strip() for p in (spec or "").split(";"))
        if part
    ]


def variant_params(variant: Variant, shared: Iterable[Assignment] = ()) -> dict[str, Any]:
    """The typed parameters of one variant: the ``shared`` ones (given to every condition of the run), then
    its own bracketed ones, which win (a bracketed ``weights=`` string drops the shared ``weights.TERM``s)."""
    merged: dict[str, Assignment] = {a.name: a for a in shared}
    for own in variant.assignments:
        if own.name == WEIGHTS:
            merged = {name: a for name, a in merged.items() if not name.startswith(f"{WEIGHTS}.")}
        merged[own.name] = own
    return condition_params(variant.condition, merged)


def checked_condition(label: str, condition: str, params: Mapping[str, Any]):
    """The condition built from its typed parameters, and the recall settings it derives from them built too
    when it has any, so a value those settings refuse (an unknown policy, a negative budget) fails now, in
    one line naming the condition's label, not inside the first sample after the model has loaded."""
    from conditions import build_condition

    built = build_condition(condition, **params)
    derive = getattr(built, "recall_config", None)
    if callable(derive):
        try:
            derive()
        except (LCAError, ValueError) as exc:
            raise LCAError(f"condition '{label}': {exc}") from None
    return built


def params_spec(params: Mapping[str, Any]) -> str:
    """Typed condition parameters as the task's ``params`` string (``name=value`` joined by ';')."""
    return ";".join(format_assignments(params))
