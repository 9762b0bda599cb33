"""Domain imprinting's computed measures, at two levels, split by whether a case is in the agent's domain.

Substrate level (``lesson_context``), from what the condition injected: for an in-domain case, whether any turn
that teaches the lesson is among the injected items' source pointers (``lesson_in_context``; 0 for a lesson the
agent has not met yet, so the mean over checkpoints is the in-domain curve), the same over the lessons already met
(``seen_lesson_in_context``), the share of the lesson's teaching turns injected (``lesson_turns_share``), and
whether the agent's mistaken turns and the wrong value stayed out (``mistake_kept_out``); for an out-of-domain case,
the tokens recall injected (``off_domain_recalled_tokens``: no lesson can be there, so this is noise) and whether
recall injected nothing (``off_domain_quiet``). Behaviour level (``lesson_behaviour``), from the answer: the right
value applied without the wrong one and without hedging (``lesson_applied`` in-domain, ``off_domain_applied`` out of
it) and the corrected mistake repeated (``mistake_repeated``). A measure that does not apply to a case is NaN there
and ``applicable_mean`` skips it. Matching is ``protocols.harness.continuity_scorers``' (normalized whole words, a
forbidden value counts only where it is not negated).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from inspect_ai.scorer import Score, scorer

from lca.secrets import redacted
from protocols.harness.continuity_scorers import applicable_mean, asserts, hedges, mentions
from protocols.harness.solvers import PACKET_KEY

NAN = float("nan")
IN_DOMAIN = "in-domain"
RECALLED_KINDS = ("memory", "transcript", "critical")  # what recall put in (identity and handoff are standing)
CONTEXT_MEASURES = (
    "lesson_in_context",
    "seen_lesson_in_context",
    "lesson_turns_share",
    "mistake_kept_out",
    "off_domain_recalled_tokens",
    "off_domain_quiet",
)
BEHAVIOUR_MEASURES = ("lesson_applied", "off_domain_applied", "mistake_repeated")


def _outside_evidence(packet: Mapping[str, Any], evidence: set[str]) -> str:
    """The injected text without the items resting on a teaching turn (a correction may sit beside nothing wrong,
    but an item holding the mistaken turn is what ``mistake_kept_out`` looks for)."""
    return "\n".join(
        str(item.get("text") or "")
        for item in packet.get("items") or []
        if not evidence & set(item.get("pointers") or [])
    )


def context_values(category: str, gold: Mapping[str, Any], packet: Mapping[str, Any]) -> dict[str, float]:
    """The substrate measures of one case (NaN where one does not apply)."""
    values = dict.fromkeys(CONTEXT_MEASURES, NAN)
    pointers = set(packet.get("pointers") or [])
    items = packet.get("items") or []
    if category != IN_DOMAIN:
        recalled = [i for i in items if i.get("kind") in RECALLED_KINDS]
        values["off_domain_recalled_tokens"] = float(sum(int(i.get("tokens") or 0) for i in recalled))
        values["off_domain_quiet"] = float(not recalled)
        return values
    evidence = list(gold.get("evidence") or [])
    held = [p for p in evidence if p in pointers]
    values["lesson_in_context"] = float(bool(held))
    if evidence:
        values["seen_lesson_in_context"] = float(bool(held))
        values["lesson_turns_share"] = len(held) / len(evidence)
    forbidden = list(gold.get("forbidden") or [])
    wrong = list(gold.get("forbidden_mentions") or [])
    if forbidden or (wrong and evidence):
        text = _outside_evidence(packet, set(evidence))
        values["mistake_kept_out"] = float(
            not any(p in pointers for p in forbidden) and not any(asserts(text, m) for m in wrong)
        )
    return values


def applied(answer: str, gold: Mapping[str, Any]) -> bool:
    """Every required mention, no forbidden one asserted, no hedge."""
    required, wrong = gold.get("required_mentions") or [], gold.get("forbidden_mentions") or []
    return (
        all(mentions(answer, m) for m in required) and not any(asserts(answer, m) for m in wrong) and not hedges(answer)
    )


def behaviour_values(category: str, gold: Mapping[str, Any], answer: str) -> dict[str, float]:
    """The behaviour measures of one answer (NaN where one does not apply)."""
    values = dict.fromkeys(BEHAVIOUR_MEASURES, NAN)
    if category == IN_DOMAIN:
        values["lesson_applied"] = float(applied(answer, gold))
        wrong = gold.get("forbidden_mentions") or []
        if wrong:
            values["mistake_repeated"] = float(any(asserts(answer, m) for m in wrong))
    else:
        values["off_domain_applied"] = float(applied(answer, gold))
    return values


def checkpoint_curves(samples: Iterable[Any]) -> dict[str, dict[int, dict[str, float]]]:
    """Per case category, per checkpoint: the mean of every measure over the samples of an eval log (each sample's
    scores and its ``imprinting`` metadata), NaN skipped: the in-domain and out-of-domain curves."""
    sums: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for sample in samples:
        meta = sample.metadata["imprinting"]
        category = IN_DOMAIN if meta["in_domain"] else "out-of-domain"
        for score in (sample.scores or {}).values():
            if not isinstance(score.value, Mapping):
                continue
            for name, value in score.value.items():
                if isinstance(value, (int, float)) and not math.isnan(float(value)):
                    sums[(category, int(meta["checkpoint"]), name)].append(float(value))
    out: dict[str, dict[int, dict[str, float]]] = {}
    for (category, checkpoint, name), values in sorted(sums.items()):
        out.setdefault(category, {}).setdefault(checkpoint, {})[name] = sum(values) / len(values)
    return out


def lesson_context():
    """The inspect scorer of the substrate measures."""

    @scorer(metrics={m: [applicable_mean()] for m in CONTEXT_MEASURES}, name="lesson_context")
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            category = str(state.metadata.get("category", ""))
            values = context_values(category, state.metadata["gold"], packet)
            shown = ", ".join(f"{k}={v:g}" for k, v in values.items() if not math.isnan(v))
            return Score(value=values, explanation=f"{category} under {packet.get('condition')}: {shown}")

        return score

    return _make()


def lesson_behaviour():
    """The inspect scorer of the behaviour measures."""

    @scorer(metrics={m: [applicable_mean()] for m in BEHAVIOUR_MEASURES}, name="lesson_behaviour")
    def _make():
        async def score(state, target):
            answer = state.output.completion if state.output else ""
            category = str(state.metadata.get("category", ""))
            values = behaviour_values(category, state.metadata["gold"], answer)
            shown = ", ".join(f"{k}={v:g}" for k, v in values.items() if not math.isnan(v))
            return Score(value=values, answer=redacted(answer), explanation=f"{category}: {shown}")

        return score

    return _make()
