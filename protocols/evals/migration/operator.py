"""Operator steps: what a person must do to carry out one move, declared once and counted from what the move
actually left.

A step is a command to run or a decision to make. ``OPERATOR_STEPS`` is the declaration: each row names the step,
what the operator does, when a move needs it, and how it is counted from the move's record (``MoveFacts``: the
axes it changed, the intents the target's resume blocked, the capabilities it gained that stay gated). The count
of a move is the sum over the rows. What the product does by itself is not a step: the six steps of
``lca migrate`` are one command, and the harness on the target resumes the work in flight on start
(``IntentLog.resume``); only what it cannot settle (an intent it blocked) is left to a person."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MoveFacts:
    """What one move changed and left behind, as the operator-step count reads it."""

    axes: tuple[str, ...]  # the bindings it changed (host is always among them: a move moves the store)
    blocked_intents: int = 0  # intents the target's resume blocked (fail closed): each needs a decision
    gated_capabilities: int = 0  # capabilities gained on the target and not authorized: each needs an authorization


@dataclass(frozen=True)
class OperatorStep:
    name: str
    action: str  # the command or decision
    when: str  # which moves need it, in words
    count: Callable[[MoveFacts], int]


OPERATOR_STEPS: tuple[OperatorStep, ...] = (
    OperatorStep(
        "migrate",
        "lca migrate TARGET --store SOURCE [--binding KEY=VALUE ...]: the six steps, one command",
        "every move (the target folder is the new host)",
        lambda m: 1,
    ),
    OperatorStep(
        "start",
        "start the agent's harness on TARGET; it resumes the work in flight by itself",
        "every move",
        lambda m: 1,
    ),
    OperatorStep(
        "choose-model",
        "name the new model in the harness's configuration (and --binding model=...)",
        "a move that changes the model",
        lambda m: int("model" in m.axes),
    ),
    OperatorStep(
        "choose-harness",
        "install and configure the other harness on the target host",
        "a move that changes the harness",
        lambda m: int("harness" in m.axes),
    ),
    OperatorStep(
        "choose-surface",
        "configure how the context reaches the model on the new surface",
        "a move that changes the surface",
        lambda m: int("surface" in m.axes),
    ),
    OperatorStep(
        "settle",
        "lca intents settle ID --done RECEIPT | --abandoned NOTE",
        "one per intent the target's resume blocked (its provider could neither reconcile nor deduplicate)",
        lambda m: m.blocked_intents,
    ),
    OperatorStep(
        "authorize",
        "lca providers authorize CAPABILITY",
        "one per capability the move gained and left gated",
        lambda m: m.gated_capabilities,
    ),
)


def operator_steps(facts: MoveFacts) -> dict[str, int]:
    """The steps ``facts`` needs, by name (rows that count 0 left out); their sum is the move's operator steps."""
    counted = {step.name: step.count(facts) for step in OPERATOR_STEPS}
    return {name: n for name, n in counted.items() if n}


def move_facts(axes: Iterable[str], resumed: Iterable[Mapping[str, Any]], capabilities: Iterable[Mapping[str, Any]]):
    """``MoveFacts`` from the move's record: the resume outcomes of the work in flight and the capability changes
    the ``resume`` step recorded."""
    return MoveFacts(
        tuple(axes),
        sum(1 for r in resumed if r.get("outcome") == "blocked"),
        sum(1 for c in capabilities if c.get("change") == "gained" and not c.get("authorized")),
    )
