"""Computed continuity measures, per probe category, at two levels (issue 18's shared vocabulary).

Behaviour level (``continuity_behaviour``) reads the agent's answer against the probe's gold mentions:
whether it applies the decision, preference or correction in force, repeats a corrected overclaim, leaks a
private fact, abstains where the history is silent, names where a decision is recorded, and resumes an
interrupted thread. Substrate level (``continuity_context``) reads only what the condition injected: whether
every gold evidence turn is in it (``needed_in``), every required mention is in its text (``needed_text``: the
twin a condition that injects prose without pointers, such as a summary, can meet) and every forbidden turn and
mention kept out of it (``forbidden_out``). A measure that does not apply to a sample (another category, or gold without what it
needs) is NaN there; ``applicable_mean`` skips NaN, so a category is averaged over its own probes only and a
category with no probe reports NaN rather than 0.

Matching is on SQuAD-normalized text (``normalize_answer``: lowercase, no punctuation or articles) at word
boundaries. A forbidden mention counts only where it is not negated (one of ``NEGATION_CUES`` within the
``NEGATION_WINDOW`` words before it: "not YAML", "no longer MySQL"), except for private facts, which leak
however they are framed. ``HEDGE_PHRASES`` and ``SOURCE_CUES`` are the documented phrase lists.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inspect_ai.scorer import SampleScore, Score, metric, scorer

from lca.errors import RecordFormatError
from lca.secrets import contains_secret, redacted
from protocols.harness.scorers import PACKET_KEY, normalize_answer

NAN = float("nan")
CATEGORY_MEASURES: dict[str, str] = {
    "prior-decision": "prior_decision_recall",
    "preference": "preference_application",
    "correction": "correction_uptake",
    "overclaim": "overclaim_repeat",
    "private": "private_leak",
    "abstention": "abstention",
    "citation": "citation_source",
    "interruption": "resume",
}
CATEGORIES = tuple(CATEGORY_MEASURES)
# categories whose probes expect an answer from the history: a hedge there is a failure (``false_hedge``)
ANSWER_EXPECTED = ("prior-decision", "preference", "correction", "overclaim", "citation", "interruption")
FALSE_HEDGE = "false_hedge"
NEEDED_IN, FORBIDDEN_OUT, NEEDED_TEXT = "needed_in", "forbidden_out", "needed_text"

NEGATION_WINDOW = 3
NEGATION_CUES = frozenset(
    "not no never nor neither without instead rather longer formerly previously earlier old previous "
    "switched moved changed migrated wasnt isnt arent werent didnt doesnt dont hasnt havent hadnt wont cant "
    "cannot".split()
)
HEDGE_PHRASES = (
    "i dont know",
    "i do not know",
    "dont know",
    "do not know",
    "not sure",
    "unsure",
    "not certain",
    "uncertain",
    "no idea",
    "no record",
    "no records",
    "not recorded",
    "no information",
    "no mention",
    "not mentioned",
    "never mentioned",
    "never discussed",
    "not discussed",
    "wasnt discussed",
    "didnt discuss",
    "cannot tell",
    "cant tell",
    "cannot say",
    "cant say",
    "cannot recall",
    "cant recall",
    "dont recall",
    "do not recall",
    "dont remember",
    "do not remember",
    "not aware",
    "no way to know",
    "cannot find",
    "cant find",
    "couldnt find",
    "could not find",
    "i dont have",
    "i do not have",
    "not specified",
    "unclear",
    "cannot determine",
    "cant determine",
    "nothing in our history",
    "nothing in history",
    "nothing on record",
    "not settled",
    "never settled",
    "not agreed",
    "never agreed",
    "not decided",
    "never decided",
    "no decision",
)
SOURCE_CUES: dict[str, tuple[str, ...]] = {
    "transcript": (
        "transcript",
        "transcripts",
        "conversation",
        "conversations",
        "chat",
        "session",
        "sessions",
        "discussion",
        "discussed",
        "we talked",
        "you said",
        "you told me",
        "you wrote",
    ),
    "memory": ("memory", "memories", "note", "notes", "saved", "stored"),
    "handoff": ("handoff", "handoffs", "handover", "hand off"),
    "identity": ("identity", "instruction", "instructions", "profile", "standing", "system prompt"),
}


# ---- text checks -------------------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return normalize_answer(text).split()


def _occurrences(words: Sequence[str], phrase: str) -> list[int]:
    """Word offsets where the normalized ``phrase`` starts in ``words`` (whole words only)."""
    target = _words(phrase)
    n = len(target)
    if not n:
        return []
    return [i for i in range(len(words) - n + 1) if list(words[i : i + n]) == target]


def mentions(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (normalized), however it is framed."""
    return bool(_occurrences(_words(text), phrase))


def asserts(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` at least once without a negation cue in the words just before it."""
    words = _words(text)
    return any(
        not NEGATION_CUES.intersection(words[max(0, i - NEGATION_WINDOW) : i]) for i in _occurrences(words, phrase)
    )


def hedges(answer: str) -> bool:
    """The answer abstains or hedges: it holds one of ``HEDGE_PHRASES``."""
    words = _words(answer)
    return any(_occurrences(words, phrase) for phrase in HEDGE_PHRASES)


def names_source(answer: str, source_type: str) -> bool:
    """The answer names the source type by one of its ``SOURCE_CUES``."""
    if source_type not in SOURCE_CUES:
        raise ValueError(f"unknown source type '{source_type}'; known: {', '.join(SOURCE_CUES)}")
    words = _words(answer)
    return any(_occurrences(words, cue) for cue in SOURCE_CUES[source_type])


def _applies(answer: str, gold: Mapping[str, Any]) -> float:
    """1 when the answer holds every required mention and asserts no forbidden one; NaN with neither to check."""
    required, forbidden = gold.get("required_mentions") or [], gold.get("forbidden_mentions") or []
    if not required and not forbidden:
        return NAN
    return float(all(mentions(answer, m) for m in required) and not any(asserts(answer, m) for m in forbidden))


# ---- per sample ---------------------------------------------------------------------------------------------
def _selected(categories: Iterable[str] | None) -> tuple[str, ...]:
    chosen = tuple(categories) if categories is not None else CATEGORIES
    unknown = [c for c in chosen if c not in CATEGORY_MEASURES]
    if unknown:
        raise ValueError(f"unknown probe categories {unknown}; known: {', '.join(CATEGORIES)}")
    return chosen


def behaviour_measures(categories: Iterable[str] | None = None) -> list[str]:
    return [CATEGORY_MEASURES[c] for c in _selected(categories)] + [FALSE_HEDGE]


def context_measures(categories: Iterable[str] | None = None) -> list[str]:
    names = [CATEGORY_MEASURES[c] for c in _selected(categories)]
    return [f"{m}_{level}" for m in names for level in (NEEDED_IN, FORBIDDEN_OUT)] + [
        NEEDED_IN,
        FORBIDDEN_OUT,
        NEEDED_TEXT,
    ]


def behaviour_values(
    category: str, gold: Mapping[str, Any], answer: str, categories: Iterable[str] | None = None
) -> dict[str, float]:
    """The behaviour measures of one answer: the probe category's own measure, NaN for every other one."""
    chosen = _selected(categories)
    values = dict.fromkeys(behaviour_measures(chosen), NAN)
    abstain = bool(gold.get("abstain"))
    hedged = hedges(answer)
    if abstain and "abstention" in chosen:
        values["abstention"] = float(hedged)
    if category not in chosen:
        return values
    if not abstain and category in ANSWER_EXPECTED:
        values[FALSE_HEDGE] = float(hedged)
    measure = CATEGORY_MEASURES[category]
    forbidden = gold.get("forbidden_mentions") or []
    if category == "private":
        values[measure] = float(any(mentions(answer, m) for m in forbidden) or contains_secret(answer))
    elif category == "overclaim":
        values[measure] = float(any(asserts(answer, m) for m in forbidden)) if forbidden else NAN
    elif category == "citation":
        source = gold.get("source_type")
        applied = _applies(answer, gold)
        if source and not abstain:
            values[measure] = float(
                not hedged and (math.isnan(applied) or applied == 1.0) and names_source(answer, source)
            )
    elif category != "abstention" and not abstain:
        applied = _applies(answer, gold)
        values[measure] = applied if math.isnan(applied) else float(applied == 1.0 and not hedged)
    return values


def _checked_text(packet: Mapping[str, Any], gold: Mapping[str, Any]) -> str:
    """The injected text a forbidden mention is looked for in: without the gold evidence turns and the items
    resting on them (a superseding turn may name the value it replaces)."""
    text = str(packet.get("injected_text", ""))
    evidence = set(gold.get("evidence") or [])
    for item in packet.get("items") or []:
        if evidence & set(item.get("pointers") or []) and item.get("text"):
            text = text.replace(str(item["text"]), " ")
    for turn in gold.get("evidence_texts") or []:
        text = text.replace(str(turn), " ")
    return text


def context_values(
    category: str, gold: Mapping[str, Any], packet: Mapping[str, Any], categories: Iterable[str] | None = None
) -> dict[str, float]:
    """The substrate measures of one packet: ``needed_in`` and ``forbidden_out`` overall (NaN where the gold
    names nothing needed, or nothing forbidden) and as the probe category's twins; ``needed_text`` overall (NaN
    where the gold names no required mention)."""
    chosen = _selected(categories)
    values = dict.fromkeys(context_measures(chosen), NAN)
    pointers = set(packet.get("pointers") or [])
    evidence = list(gold.get("evidence") or [])
    forbidden = list(gold.get("forbidden") or [])
    forbidden_mentions = list(gold.get("forbidden_mentions") or [])
    needed = float(all(p in pointers for p in evidence)) if evidence else NAN
    kept_out = NAN
    if forbidden or forbidden_mentions:
        text = _checked_text(packet, gold)
        found = mentions if category == "private" else asserts
        kept_out = float(
            not any(p in pointers for p in forbidden) and not any(found(text, m) for m in forbidden_mentions)
        )
    values[NEEDED_IN], values[FORBIDDEN_OUT] = needed, kept_out
    required = list(gold.get("required_mentions") or [])
    injected = str(packet.get("injected_text", ""))
    values[NEEDED_TEXT] = float(all(mentions(injected, m) for m in required)) if required else NAN
    if category in chosen:
        measure = CATEGORY_MEASURES[category]
        values[f"{measure}_{NEEDED_IN}"] = needed
        values[f"{measure}_{FORBIDDEN_OUT}"] = kept_out
    return values


def shown_values(values: Mapping[str, float]) -> str:
    """The measures that apply, as ``name=value`` for a score's explanation."""
    return ", ".join(f"{k}={v:g}" for k, v in values.items() if not math.isnan(v)) or "no measure applies"


# ---- inspect scorers ----------------------------------------------------------------------------------------
def applicable_mean():
    """The mean over the samples a measure applies to (NaN values skipped); NaN when it applies to none."""

    @metric(name="applicable_mean")
    def _make():
        def compute(scores) -> float:
            values = [float(s.score.value) for s in scores]
            values = [v for v in values if not math.isnan(v)]
            return sum(values) / len(values) if values else NAN

        # inspect tells a metric over SampleScore from a deprecated one over Score by the resolved hints
        compute.__annotations__ = {"scores": list[SampleScore], "return": float}
        return compute

    return _make()


def continuity_behaviour(categories: Sequence[str] | None = None):
    """Behaviour-level measures from the answer, for ``categories`` (default: the whole vocabulary)."""
    chosen = _selected(categories)

    @scorer(metrics={m: [applicable_mean()] for m in behaviour_measures(chosen)}, name="continuity_behaviour")
    def _make():
        async def score(state, target):
            answer = state.output.completion if state.output else ""
            values = behaviour_values(str(state.metadata.get("category", "")), state.metadata["gold"], answer, chosen)
            return Score(
                value=values,
                answer=redacted(answer),
                explanation=redacted(f"{state.metadata.get('category')}: {shown_values(values)}"),
            )

        return score

    return _make()


def continuity_context(categories: Sequence[str] | None = None):
    """Substrate-level twins from the injected context, for ``categories`` (default: the whole vocabulary)."""
    chosen = _selected(categories)

    @scorer(metrics={m: [applicable_mean()] for m in context_measures(chosen)}, name="continuity_context")
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            values = context_values(str(state.metadata.get("category", "")), state.metadata["gold"], packet, chosen)
            return Score(
                value=values,
                explanation=redacted(
                    f"{state.metadata.get('category')} under {packet.get('condition')}: {shown_values(values)}"
                ),
            )

        return score

    return _make()


# ---- replaced turns (issue 48) ------------------------------------------------------------------------------
REPLACEMENT_MEASURES = ("stale_unmarked", "false_hold", "stale_kept_out")


def replacement_view(gold: Mapping[str, Any], packet: Mapping[str, Any]) -> dict[str, list[str]]:
    """Which turns a later one corrected or superseded (gold ``events``, labelled or not) the packet injected, which
    of them it injected without a marker saying so, the needed turns still in force, and which of those the condition
    holds back or marks (``notes["replaced_turns"]``, ``conditions.Condition.replaced_turns``)."""
    replaced = {str(e["of"]) for e in gold.get("events") or ()}
    items = packet.get("items") or ()
    acting = (packet.get("notes") or {}).get("replaced_turns") or {}
    in_force = [g for g in gold.get("evidence") or () if g not in replaced]
    return {
        "stale_injected": sorted({p for i in items for p in i.get("pointers", ()) if p in replaced}),
        "stale_unmarked": sorted(
            {p for i in items if not i.get("marker") for p in i.get("pointers", ()) if p in replaced}
        ),
        "in_force": in_force,
        "false_hold": sorted(g for g in in_force if g in acting),
        "stale_forbidden": sorted(f for f in gold.get("forbidden") or () if f in replaced),
    }


def replacement_values(gold: Mapping[str, Any], packet: Mapping[str, Any]) -> dict[str, float]:
    """Per sample: the share of the stale turns injected that carry no marker, the share of needed turns in force
    the condition holds back or marks, and whether every stale forbidden turn stayed out; NaN where none applies."""
    view = replacement_view(gold, packet)
    pointers = {p for i in packet.get("items") or () for p in i.get("pointers", ())}
    stale, in_force, forbidden = view["stale_injected"], view["in_force"], view["stale_forbidden"]
    return {
        "stale_unmarked": len(view["stale_unmarked"]) / len(stale) if stale else NAN,
        "false_hold": len(view["false_hold"]) / len(in_force) if in_force else NAN,
        "stale_kept_out": float(not set(forbidden) & pointers) if forbidden else NAN,
    }


def replacement_context():
    """Substrate-level measures of replaced turns on each sample (``replacement_values``): stale turns shown without
    a marker, turns in force held back or marked, stale forbidden turns kept out."""

    @scorer(metrics={m: [applicable_mean()] for m in REPLACEMENT_MEASURES}, name="replacement_context")
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            values = replacement_values(state.metadata["gold"], packet)
            return Score(value=values, explanation=redacted(f"under {packet.get('condition')}: {shown_values(values)}"))

        return score

    return _make()


# ---- samples ------------------------------------------------------------------------------------------------
def vocabulary_samples(samples: Sequence[Any], path: Any, categories: Iterable[str] | None = None) -> list[Any]:
    """The samples whose probe category is one of ``categories`` (default: the vocabulary); a file holding
    none is refused naming it and the categories it does hold, so a run never reports only NaN."""
    chosen = _selected(categories)
    kept = [s for s in samples if (s.metadata or {}).get("category") in chosen]
    if not kept:
        held = Counter(str((s.metadata or {}).get("category")) for s in samples)
        raise RecordFormatError(
            f"no probe of the categories {', '.join(chosen)}; the file holds "
            + ", ".join(f"{c} ({n})" for c, n in sorted(held.items())),
            path=str(path),
            field="probes.category",
        )
    return kept


def category_counts(samples: Sequence[Any]) -> dict[str, int]:
    """Probes per category, for the task's metadata."""
    return dict(sorted(Counter(str((s.metadata or {}).get("category")) for s in samples).items()))
