"""The migration protocol's computed measures, at two levels.

Authorized system continuity (``migration_system``), mechanical, from the migration's own record
(``lca.migration_check.check_migration``): lineage intact, epoch advanced, the stale writer fenced off, no conversation
entry lost or duplicated, every step recorded, recall for the probe equal before and after (same items, same
scores to 1e-6), and the latest handoff carried (NaN where the condition writes none). ``system_continuity`` is 1
only when every one holds.

The work in flight (``work_carried``): the effect left pending before the move performed exactly once after it.
The cost of the move (``migration_cost``): downtime, seconds per step, bundle bytes, tokens re-derived and
re-injected, operator steps.

Behavioural identity fidelity (``identity_fidelity``), from the answers to the same probe before and after the
move: the probe's hollow-copy measure (``continuity_scorers.behaviour_values``) as a pass (1: the behaviour the
category asks for; for overclaim and private probes, not repeating or not leaking), before and after;
``fidelity_kept`` is 1 when the two agree. Its substrate twins read the injected context: ``needed_in`` before
and after, and ``context_kept`` (the same transcript pointers injected). The self-description check
(``lca.self_description``) gives ``self_description_coverage`` and ``self_description_consistent``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inspect_ai.scorer import Score, scorer

from lca.bundle import MIGRATION_STEPS
from lca.secrets import redacted
from protocols.harness.continuity_scorers import (
    CATEGORY_MEASURES,
    NAN,
    applicable_mean,
    behaviour_values,
    context_values,
    shown_values,
)
from protocols.harness.scorers import PACKET_KEY

MIGRATION_KEY = "lca_migration"
LOWER_IS_BETTER = ("overclaim_repeat", "private_leak")
SYSTEM_MEASURES = (
    "lineage_intact",
    "epoch_advanced",
    "source_fenced",
    "entries_lost",
    "entries_duplicated",
    "steps_recorded",
    "recall_equal",
    "handoff_carried",
    "intents_lost",
    "system_continuity",
)
WORK_MEASURES = ("effect_exactly_once", "effect_deliveries", "stale_finish_refused")
COST_MEASURES = (
    "downtime_s",
    "move_seconds",
    *(f"seconds_{step}" for step in MIGRATION_STEPS),
    "bundle_bytes",
    "tokens_rederived",
    "tokens_reinjected",
    "operator_steps",
)
FIDELITY_MEASURES = (
    "fidelity_before",
    "fidelity_after",
    "fidelity_kept",
    "needed_in_before",
    "needed_in_after",
    "context_kept",
    "self_description_coverage",
    "self_description_consistent",
)


def _flag(value: Any) -> float:
    return NAN if value is None else float(bool(value))


def probe_pass(category: str, gold: Mapping[str, Any], answer: str) -> float:
    """1 when the answer shows the behaviour the probe's category asks for, 0 when not, NaN where the category's
    measure does not apply (the hollow-copy rules; lower-is-better measures inverted)."""
    values = behaviour_values(category, gold, answer)
    measure = "abstention" if gold.get("abstain") else CATEGORY_MEASURES.get(category)
    value = values.get(measure, NAN) if measure else NAN
    if math.isnan(value):
        return NAN
    return 1.0 - value if measure in LOWER_IS_BETTER else value


def system_values(record: Mapping[str, Any]) -> dict[str, float]:
    check = record.get("check") or {}
    values = {
        "lineage_intact": _flag(check.get("lineage_intact")),
        "epoch_advanced": _flag(check.get("epoch_advanced")),
        "source_fenced": _flag(check.get("source_fenced")),
        "entries_lost": float(check.get("entries_lost", NAN)),
        "entries_duplicated": float(check.get("entries_duplicated", NAN)),
        "steps_recorded": _flag(check.get("steps_recorded")),
        "recall_equal": _flag(record.get("recall_equal")),
        "handoff_carried": _flag(record.get("handoff_carried")),
        "intents_lost": float(check.get("intents_lost", NAN)),
    }
    # check.ok holds lineage, epoch, fencing, entries and steps; recall and the handoff count where measured
    values["system_continuity"] = float(
        bool(check.get("ok")) and values["recall_equal"] != 0.0 and values["handoff_carried"] != 0.0
    )
    return values


def work_values(record: Mapping[str, Any]) -> dict[str, float]:
    """The unfinished task carried across (``effects``): the effect performed exactly once and its intent done on
    the target; how many times the provider performed it; the stale process refused when it tried to finish it."""
    work = record.get("work") or {}
    return {
        "effect_exactly_once": _flag(work.get("exactly_once")),
        "effect_deliveries": float(work.get("deliveries", NAN)),
        "stale_finish_refused": _flag(work.get("stale_finish_refused")),
    }


def cost_values(record: Mapping[str, Any]) -> dict[str, float]:
    """The move's cost (``cost.move_cost``) and its operator steps (``operator.OPERATOR_STEPS``, summed)."""
    cost = record.get("cost") or {}
    seconds = cost.get("seconds") or {}
    operator = record.get("operator")

    def number(value: Any) -> float:
        return NAN if value is None else float(value)

    return {
        "downtime_s": number(cost.get("downtime_s")),
        "move_seconds": number(cost.get("move_seconds")),
        **{f"seconds_{step}": number(seconds.get(step)) for step in MIGRATION_STEPS},
        "bundle_bytes": number(cost.get("bundle_bytes")),
        "tokens_rederived": number(cost.get("tokens_rederived")),
        "tokens_reinjected": number(cost.get("tokens_reinjected")),
        "operator_steps": NAN if operator is None else float(sum(operator.values())),
    }


def fidelity_values(
    category: str, gold: Mapping[str, Any], record: Mapping[str, Any], packet_after: Mapping[str, Any]
) -> dict[str, float]:
    before, after = record.get("before") or {}, record.get("after") or {}
    passed_before = probe_pass(category, gold, str(before.get("answer", "")))
    passed_after = probe_pass(category, gold, str(after.get("answer", "")))
    needed_before = context_values(category, gold, before.get("packet") or {})["needed_in"]
    needed_after = context_values(category, gold, packet_after)["needed_in"]
    described = record.get("self_description") or {}
    coverage = described.get("coverage")
    return {
        "fidelity_before": passed_before,
        "fidelity_after": passed_after,
        "fidelity_kept": NAN
        if math.isnan(passed_before) or math.isnan(passed_after)
        else float(passed_before == passed_after),
        "needed_in_before": needed_before,
        "needed_in_after": needed_after,
        "context_kept": float(
            sorted((before.get("packet") or {}).get("pointers") or []) == sorted(packet_after.get("pointers") or [])
        ),
        "self_description_coverage": NAN if coverage is None else float(coverage),
        "self_description_consistent": _flag(described.get("consistent")),
    }


def migration_system():
    """Authorized system continuity, mechanically (see the module docstring)."""

    @scorer(metrics={m: [applicable_mean()] for m in SYSTEM_MEASURES}, name="migration_system")
    def _make():
        async def score(state, target):
            record = state.store.get(MIGRATION_KEY) or {}
            values = system_values(record)
            problems = (record.get("check") or {}).get("problems") or []
            return Score(
                value=values,
                explanation=redacted(
                    f"binding {state.metadata.get('binding')}: {shown_values(values)}"
                    + (f"; problems: {'; '.join(problems)}" if problems else "")
                ),
                metadata={"migration": record.get("summary") or {}},
            )

        return score

    return _make()


def _record_scorer(name: str, measures: tuple[str, ...], values_of, explain, part: str):
    """A scorer over the migration's record: ``values_of(record)`` gives the measures, ``explain(record)`` what the
    explanation says before them, ``record[part]`` is kept in the score's metadata."""

    @scorer(metrics={m: [applicable_mean()] for m in measures}, name=name)
    def _make():
        async def score(state, target):
            record = state.store.get(MIGRATION_KEY) or {}
            values = values_of(record)
            return Score(
                value=values,
                explanation=redacted(
                    f"binding {state.metadata.get('binding')}: {explain(record)}; {shown_values(values)}"
                ),
                metadata={part: record.get(part) or {}},
            )

        return score

    return _make()


def _work_explained(record: Mapping[str, Any]) -> str:
    work = record.get("work") or {}
    outcomes = [r.get("outcome") for r in work.get("resumed") or []]
    return f"stopped {work.get('crash')}, resumed {outcomes}, intent {work.get('state')}"


def work_carried():
    """The effect left in flight before the move, performed exactly once after it (see ``work_values``)."""
    return _record_scorer("work_carried", WORK_MEASURES, work_values, _work_explained, "work")


def migration_cost():
    """Downtime, seconds per step, bytes and tokens of the move, and operator steps (see ``cost_values``)."""
    return _record_scorer(
        "migration_cost",
        COST_MEASURES,
        cost_values,
        lambda record: f"operator steps {record.get('operator')}",
        "cost",
    )


def identity_fidelity():
    """Behavioural identity fidelity: the same probe before and after the move (see the module docstring)."""

    @scorer(metrics={m: [applicable_mean()] for m in FIDELITY_MEASURES}, name="identity_fidelity")
    def _make():
        async def score(state, target):
            record = state.store.get(MIGRATION_KEY) or {}
            packet = state.store.get(PACKET_KEY) or {}
            values = fidelity_values(str(state.metadata.get("category", "")), state.metadata["gold"], record, packet)
            before = str((record.get("before") or {}).get("answer", ""))
            return Score(
                value=values,
                answer=redacted(state.output.completion if state.output else ""),
                explanation=redacted(
                    f"{state.metadata.get('category')} @ {state.metadata.get('binding')}: {shown_values(values)}; "
                    f"before: {before[:300]!r}"
                ),
            )

        return score

    return _make()
