"""Source grounding, computed: is each claim of an answer labeled with the source that actually holds it?

The agent is asked to label every claim with one of ``LABELS``. A claim's actual source is read off what the
condition injected, not off the model: the kinds of injected items that hold at least ``SUPPORT_SHARE`` of the
claim's key terms (``lca.ledger.key_terms``) and every number it states. A ``transcript`` or ``memory`` (or ``project file``) label is right
when an injected item of that source holds the claim; ``inference`` and ``uncertain`` are right when none does
(an honest label for what the context does not support). Answer accuracy is scored apart from source accuracy,
so a right answer with a wrong source, and a wrong answer honestly labeled uncertain, are both visible.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from inspect_ai.scorer import Score, mean, scorer

from lca.ledger import key_terms
from protocols.harness.scorers import normalize_answer
from protocols.harness.solvers import PACKET_KEY

LABELS = ("transcript", "memory", "project file", "inference", "uncertain")
LABEL_PATTERN = re.compile(r"\[\s*(transcript|memory|project file|inference|uncertain)\s*\]", re.IGNORECASE)
SUPPORT_SHARE = 0.5  # an injected item holding this share of a claim's key terms supports it
ITEM_SOURCE = {  # an injected item's kind -> the source label that names it
    "transcript": "transcript",
    "handoff": "transcript",  # a handoff quotes and points into the transcript
    "memory": "memory",
    "critical": "memory",
    "summary": "memory",  # a summary is derived, structured memory
    "identity": "project file",  # the identity, user and instruction files
}
UNSUPPORTED = "unsupported"
INSTRUCTION = (
    "Answer in short sentences. End every sentence with the source it rests on, in brackets: [transcript] "
    "(what was said in an earlier conversation), [memory] (a stored memory or summary), [project file] (an "
    "identity, user or instruction file), [inference] (your own reasoning) or [uncertain] (you do not know)."
)
_NUMBER = re.compile(r"\d+(?:[:.,/-]\d+)*")
_SENTENCE = re.compile(r"(?<=[.!?\]])\s+|\n+")


class ClaimRow(TypedDict):
    """One claim of an answer as scored: its text, the label it carries (None: none), the source that holds it
    (``UNSUPPORTED`` when none does) and whether the label names that source."""

    claim: str
    label: str | None
    actual: str
    right: bool


def claims(answer: str) -> list[tuple[str, str | None]]:
    """The answer's sentences, each with the label it carries (None when it carries none)."""
    out = []
    for sentence in _SENTENCE.split(answer or ""):
        label = LABEL_PATTERN.search(sentence)
        text = LABEL_PATTERN.sub(" ", sentence).strip(" .!?\t")
        if text or label:
            out.append((text, label.group(1).lower() if label else None))
    return out


def supporting_sources(claim: str, items: Iterable[Mapping[str, Any]]) -> set[str]:
    """The sources among the injected items that hold the claim (empty: nothing injected supports it)."""
    terms = key_terms(claim)
    if not terms:
        return set()
    numbers = set(_NUMBER.findall(claim))  # a value the claim states must be the value the item holds
    out = set()
    for item in items:
        source = ITEM_SOURCE.get(str(item.get("kind")))
        text = str(item.get("text", ""))
        if (
            source
            and len(terms & key_terms(text)) / len(terms) >= SUPPORT_SHARE
            and numbers <= set(_NUMBER.findall(text))
        ):
            out.add(source)
    return out


def label_is_right(label: str, supported: set[str]) -> bool:
    if label in ("inference", "uncertain"):
        return not supported
    return label in supported


def grade(answer: str, items: Sequence[Mapping[str, Any]], gold: Mapping[str, Any], target: str) -> dict[str, Any]:
    """Every measure of one sample, and the claims with their labels and actual sources (for the confusion
    matrix)."""
    found = claims(answer)
    rows: list[ClaimRow] = []
    for text, label in found:
        supported = supporting_sources(text, items)
        actual = sorted(supported)[0] if len(supported) == 1 else ("+".join(sorted(supported)) or UNSUPPORTED)
        rows.append(
            {
                "claim": text,
                "label": label,
                "actual": actual,
                "right": label is not None and label_is_right(label, supported),
            }
        )
    labeled = [r for r in rows if r["label"]]
    required = [m for m in gold.get("required_mentions") or () if m]
    said = normalize_answer(answer)
    if required:
        correct = all(normalize_answer(m) in said for m in required)
    else:
        correct = bool(target) and normalize_answer(target) in said
    answer_terms = key_terms(target or " ".join(required))
    available = bool(answer_terms) and any(
        len(answer_terms & key_terms(str(i.get("text", "")))) / len(answer_terms) >= SUPPORT_SHARE for i in items
    )
    return {
        "answer_accuracy": float(correct),
        "source_accuracy": (sum(r["right"] for r in labeled) / len(labeled)) if labeled else 0.0,
        "labeled_share": (len(labeled) / len(rows)) if rows else 0.0,
        "answer_in_context": float(available),
        "claims": rows,
    }


def confusion_matrix(claim_rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Actual source (rows) by label (columns, ``unlabeled`` for none) over claims, e.g. from every sample's
    score metadata: where labels go wrong, and in which direction."""
    counts: Counter = Counter((r["actual"], r["label"] or "unlabeled") for r in claim_rows)
    out: dict[str, dict[str, int]] = {}
    for (actual, label), n in sorted(counts.items()):
        out.setdefault(actual, {})[label] = n
    return out


def source_grounding_scorer():
    @scorer(
        metrics={
            "answer_accuracy": [mean()],
            "source_accuracy": [mean()],
            "labeled_share": [mean()],
            "answer_in_context": [mean()],
        },
        name="source_grounding",
    )
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            answer = state.output.completion if state.output else ""
            graded = grade(answer, packet.get("items", []), state.metadata.get("gold", {}), target.text)
            values = {k: v for k, v in graded.items() if k != "claims"}
            return Score(
                value=values,
                answer=answer,
                explanation=f"{len(graded['claims'])} claim(s), labeled share {values['labeled_share']:.2f}",
                metadata={"claims": graded["claims"]},
            )

        return score

    return _make()
