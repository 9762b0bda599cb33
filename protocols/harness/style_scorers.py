"""Style continuity, computed: how close the answer's style is to the style the assistant established in the
history, by stylometric features that do not depend on what is said.

The reference is every assistant turn of the sample's history, pooled; the measure applies when they hold at
least ``MIN_REFERENCE_WORDS`` words (a history of "Noted." replies establishes no style). Three families, each a
similarity in [0, 1], and ``style_similarity`` their mean:

- **function words**: the cosine between the relative frequencies of ``FUNCTION_WORDS`` (the classic authorship
  signal: articles, pronouns, prepositions, auxiliaries, which a writer uses at a steady rate whatever the topic)
  in the answer and in the reference;
- **shape**: for mean sentence length (words), mean word length (characters), and the rates per word of
  contractions, first person plural (we, our, us), second person (you, your) and first person singular (I, me, my),
  and of exclamation and question marks per sentence, each the smoothed ratio ``(min + s) / (max + s)``, averaged
  (``SHAPE_SMOOTHING`` gives ``s``);
- **formatting**: for bullet lines, numbered lines, bold (``**``), headings (``#``), code (backticks), emoji and
  paragraph breaks, one minus the distance between the share of the reference's turns that use it and whether the
  answer does, averaged.

The figure is comparable across conditions on the same probes (what a study's paired tests compare), not across
histories: a history with a flat style gives every answer a high score. Its judged twin is the panel's
``style_continuity`` (the hollow-copy pilot's rubric: the same collaborator continuing the work), whose items this
scorer prepares as its calibration set shows them: the question and the answer (``rating_views``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from inspect_ai.scorer import Score, scorer

from lca.secrets import redacted
from protocols.harness.continuity_scorers import NAN, applicable_mean
from protocols.harness.rating_views import RATING_VIEWS, history_turns, rating_view

STYLE_MEASURES = ("style_similarity",)
JUDGED_STYLE = "style_continuity"
MIN_REFERENCE_WORDS = 40
FUNCTION_WORDS = (
    "the a an and but or so of to in on at for with by from as that this it is are was be been not no i you we me "
    "my your our us will would can could should just also then if there here what which all some more very really "
    "now do have has well"
).split()
PLURAL, SECOND, SINGULAR = {"we", "our", "us", "ours"}, {"you", "your", "yours"}, {"i", "me", "my", "mine"}
SHAPE_SMOOTHING = {"sentence_words": 2.0, "word_chars": 0.5, "per_word": 0.01, "per_sentence": 0.05}
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)|\n+")
_FORMAT = {
    "bullets": re.compile(r"^\s*[-*\u2022]\s+", re.M),
    "numbered": re.compile(r"^\s*\d+[.)]\s+", re.M),
    "bold": re.compile(r"\*\*[^*\n]+\*\*"),
    "headings": re.compile(r"^\s*#{1,6}\s", re.M),
    "code": re.compile(r"`"),
    "emoji": re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]"),
    "paragraphs": re.compile(r"\n\s*\n"),
}


def words_of(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def features(text: str) -> dict[str, Any]:
    """The style features of one text: function-word counts, shape figures and which formats it uses."""
    words = words_of(text)
    n = max(len(words), 1)
    sentences = max(len([s for s in _SENTENCE_END.split(text.strip()) if words_of(s)]), 1)
    return {
        "words": len(words),
        "function": [sum(1 for w in words if w == f) for f in FUNCTION_WORDS],
        "sentence_words": len(words) / sentences,
        "word_chars": sum(len(w) for w in words) / n,
        "contractions": sum("'" in w for w in words) / n,
        "plural": sum(w in PLURAL for w in words) / n,
        "second": sum(w in SECOND for w in words) / n,
        "singular": sum(w in SINGULAR for w in words) / n,
        "exclamations": text.count("!") / sentences,
        "questions": text.count("?") / sentences,
        "formats": {name: bool(pattern.search(text)) for name, pattern in _FORMAT.items()},
    }


def _ratio(a: float, b: float, smoothing: float) -> float:
    return (min(a, b) + smoothing) / (max(a, b) + smoothing)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def style_parts(answer: str, reference: Sequence[str]) -> dict[str, float]:
    """The three family similarities of ``answer`` against the pooled ``reference`` turns."""
    mine = features(answer)
    pooled = features("\n\n".join(reference))
    turns = [features(t) for t in reference]
    s = SHAPE_SMOOTHING
    shape = [
        _ratio(mine["sentence_words"], _mean(turns, "sentence_words"), s["sentence_words"]),
        _ratio(mine["word_chars"], pooled["word_chars"], s["word_chars"]),
        *(_ratio(mine[k], pooled[k], s["per_word"]) for k in ("contractions", "plural", "second", "singular")),
        *(_ratio(mine[k], _mean(turns, k), s["per_sentence"]) for k in ("exclamations", "questions")),
    ]
    formats = [
        1.0 - abs(sum(t["formats"][name] for t in turns) / len(turns) - float(mine["formats"][name]))
        for name in _FORMAT
    ]
    return {
        "function_words": round(_cosine(mine["function"], pooled["function"]), 4),
        "shape": round(sum(shape) / len(shape), 4),
        "formatting": round(sum(formats) / len(formats), 4),
    }


def _mean(turns: Sequence[Mapping[str, Any]], key: str) -> float:
    return sum(t[key] for t in turns) / len(turns) if turns else 0.0


def style_similarity(answer: str, reference: Sequence[str]) -> float:
    """The mean of the three families; NaN when the reference holds fewer than ``MIN_REFERENCE_WORDS`` words."""
    reference = [t for t in reference if words_of(t)]
    if sum(len(words_of(t)) for t in reference) < MIN_REFERENCE_WORDS:
        return NAN
    parts = style_parts(answer, reference)
    return round(sum(parts.values()) / len(parts), 4)


def style_view(question: str) -> dict[str, dict]:
    """The panel's item for ``style_continuity``: the question (and the answer), as its calibration set's items
    show them, so the raters code the study's answers in the form they were calibrated on."""
    return {JUDGED_STYLE: rating_view(question)}


def style_behaviour():
    """``style_similarity`` of the answer to the history's assistant turns, with the panel's item for
    ``style_continuity`` in the Score's metadata (``rating_views``)."""

    @scorer(metrics={m: [applicable_mean()] for m in STYLE_MEASURES}, name="style_behaviour")
    def _make():
        async def score(state, target):
            answer = state.output.completion if state.output else ""
            history = state.metadata.get("history") or {}
            reference = history_turns(history)
            value = style_similarity(answer, reference)
            parts = style_parts(answer, reference) if not math.isnan(value) else {}
            detail = ", ".join(f"{k}={v:g}" for k, v in parts.items()) or "too little assistant text in the history"
            return Score(
                value={"style_similarity": value},
                answer=redacted(answer),
                explanation=redacted(f"style_similarity={value:g} ({detail})"),
                metadata={RATING_VIEWS: style_view(state.input_text)},
            )

        return score

    return _make()
