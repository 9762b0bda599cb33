"""A model-free change detector: which earlier turn a new turn corrects or replaces, read from the conversation's
structure rather than from labels a host rarely sends.

People change their minds in plain words: a preference restated with another value a week later, the user
disagreeing with the agent's claim right after it, a decision reversed with a reason. What these share, whatever
the words, is structure:

- **the same subject**: the sentences of the two turns that share the most content terms (the lexical index's
  stems, a name counting twice), and how specific those terms are to this history;
- **a different value**: each holds a value the other does not (a number, a time, a date, a name), or the new turn
  says the earlier one is wrong;
- **a change said as one**: the new turn marks a change, a decision or a disagreement (a short general lexicon of
  English change and disagreement markers, not phrases of any one data set);
- **where it was said**: the agent's claim right before the user's disagreeing turn; the same project (a rule of
  another project is not replaced by this one's); the same speaker returning to a subject (where several people
  speak as users, one person's turn never replaces another's).

These readings are the features (``FEATURES``) of a small fitted model (``ChangeModel``, ``change_model.json``) whose
output is the confidence in [0, 1]; recall holds a turn back at or above ``RecallConfig.hold_confidence`` and marks it
at or above ``mark_confidence``. A new turn that restates every value of the earlier one (a confirmation, a detail
added) reads as such (``restates``). Only user turns are read as replacing: the agent's acknowledgement of a change
restates it. Deterministic: turns are read in the order they were said, so a rebuild finds the same events.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from lca.errors import RecordFormatError
from lca.events import ReplacementEvent, turn_key
from lca.recall.shown import term_stems
from lca.types import EntryKind, TranscriptEntry

DETECTOR = "structure-v1"
_NUMBER = re.compile(r"(?<![\w.])[$£€]?\d[\d,]*(?:[.:]\d+)?(?:\s?(?:%|am|pm|st|nd|rd|th|k|kg|km|m|h))?(?!\w)", re.I)
_CAPITAL = re.compile(r"\b[A-Z][a-zA-Z'’-]+\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)([A-Z][a-zA-Z'’-]*)")
_FIRST_WORDS = re.compile(r"[a-z']+")
_SENTENCE = re.compile(r"[^\n.!?;]*(?:[.!?;]+(?=\s|$)|\n|$)")
# general English markers that a turn changes, decides or corrects something (not phrases of one data set)
CHANGE_MARKERS = frozenset(
    "instead new change changed changing switch switching switched swap swapped updated revised revising revise "
    "decided decision rather replace replaced replacing cancel cancelled canceled scrap scrapped longer anymore "
    "reconsidered".split()
)
CORRECTION_MARKERS = frozenset(
    "wrong mistake mistaken misread miscounted misremembered misspoke correction incorrect typo meant "
    "sorry confused mixed".split()
)
# "actually" corrects where it opens a sentence ("Actually, it's the 14th", "No, actually ..."); inside one it is
# mostly emphasis ("I actually have a few other plants"), and read anywhere it made corrections of plain remarks
_CONTRAST_OPENER = re.compile(r"(?:^|[.!?;:]\s+|\n\s*)(?:(?:no|oh|wait|well|sorry|hmm|um|ah)\W+)?actually\b", re.I)
DISAGREEMENT_OPENERS = frozenset("no nope not wrong actually incorrect nah".split())
NEGATIONS = frozenset("not isn't isnt wasn't wasnt aren't arent didn't didnt don't dont never n't".split())
_NOT_NAMES = frozenset(
    "i i'm i'll i've i'd we we're we'll let let's ok okay yes no thanks thank please sure great good hi hello hey "
    "also and but so the a an it it's that this then there they he she you your my our can could would will "
    "should what when where which who how why just oh well".split()
)

MIN_KEPT = 0.4
MAX_CLAIM_STATEMENTS = 3  # an agent turn read as a claim or proposal a later turn can replace: at most this long
COMMON_SHARE, COMMON_MIN = 0.05, 3  # a stem in more than this share of the turns read is the history's topic
COMMON_POSTING = 400  # a stem in more earlier turns than this finds no candidates (it still counts as shared)


@dataclass(frozen=True)
class Statement:
    """One sentence of a turn as the detector reads it: its subject terms and the values it states."""

    stems: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    negated: frozenset[str]  # stems that follow a negation ("not the 12th", "it's £40, not that")
    lead: str | None = None  # a name the sentence opens with: who it is about or who speaks ("Sofia liked ...")


@dataclass(frozen=True)
class TurnFacts:
    """What the detector reads of one turn."""

    key: str  # "<session>#<entry>"
    session: str
    position: int  # order within the detector's reading
    timestamp: str
    by_user: bool
    speaker: str | None  # who said it, where a history has several people as users (``author``: LoCoMo's speakers)
    project: str | None
    stems: frozenset[str]  # the whole turn's subject terms (to find candidates)
    statements: tuple[Statement, ...]
    asks: bool  # a question: it states no value to replace, and replaces none
    markers: frozenset[str]  # change markers it holds
    corrects: bool  # it holds a correction marker
    disagrees: bool  # it opens with a disagreement


def numbers_of(text: str) -> frozenset[str]:
    """The values a turn states as numbers (money, times, dates, counts), normalized ("$12,400" -> "12400")."""
    return frozenset(re.sub(r"[\s,$£€]", "", m.group(0)).lower() for m in _NUMBER.finditer(text))


def names_of(text: str) -> frozenset[str]:
    """Capitalized words that are not a sentence's first word (names, places, products, months), lower-cased."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    out = set()
    for match in _CAPITAL.finditer(text):
        word = match.group(0).lower()
        if match.start() in starts or word in _NOT_NAMES:
            continue
        out.add(word)
    return frozenset(out)


def _subject(text: str) -> frozenset[str]:
    return frozenset(s for s in term_stems(text) if not any(c.isdigit() for c in s))


def statement_of(sentence: str) -> Statement:
    words = [w.strip("'") for w in _FIRST_WORDS.findall(sentence.lower())]
    negated: set[str] = set()
    for i, word in enumerate(words):
        if word in NEGATIONS or word.endswith("n't"):
            negated |= term_stems(" ".join(words[i + 1 : i + 4]))
    first = _CAPITAL.match(sentence.strip())
    lead = first.group(0).lower() if first and first.group(0).lower() not in _NOT_NAMES else None
    return Statement(_subject(sentence), numbers_of(sentence), names_of(sentence), frozenset(negated), lead)


def facts_of(entry: TranscriptEntry, position: int) -> TurnFacts:
    text = entry.content
    words = [w.strip("'") for w in _FIRST_WORDS.findall(text.lower())]
    opening = words[:4]
    sentences = [text[a:b] for a, b in _sentences(text)]
    meta = entry.meta or {}
    project = meta.get("project")
    return TurnFacts(
        key=turn_key(entry.session_id, entry.id),
        session=entry.session_id,
        position=position,
        timestamp=entry.timestamp,
        by_user=entry.kind is EntryKind.USER_TURN,
        speaker=entry.author.strip().lower() if entry.author and entry.author.strip() else None,
        project=str(project) if project else None,
        stems=_subject(text),
        statements=tuple(statement_of(sentence) for sentence in sentences),
        asks=text.rstrip().endswith("?"),
        markers=frozenset(words) & CHANGE_MARKERS,
        corrects=bool(set(words) & CORRECTION_MARKERS) or bool(_CONTRAST_OPENER.search(text)),
        disagrees=bool(opening) and (opening[0] in DISAGREEMENT_OPENERS or bool(set(opening[:3]) & NEGATIONS)),
    )


def _sentences(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group(0).strip()]


def _best_pair(old: TurnFacts, new: TurnFacts) -> tuple[Statement, Statement] | None:
    """The sentence of each turn that speaks most of the same thing (most shared terms, a shared name counting twice;
    ties: the higher overlap), or None when no sentence pair shares a term. A long turn is about many things; a change
    is about one."""
    best: tuple[tuple[int, float], Statement, Statement] | None = None
    for a in old.statements:
        for b in new.statements:
            shared = a.stems & b.stems
            if not shared:
                continue
            rank = (len(shared) + len(a.names & b.names), len(shared) / (len(a.stems) * len(b.stems)) ** 0.5)
            if best is None or rank > best[0]:
                best = (rank, a, b)
    return (best[1], best[2]) if best is not None else None


FEATURES = (
    "overlap",  # the best sentence pair's shared terms over the geometric mean of their sizes
    "shared",  # ... how many terms they share (a name twice), capped at 6, over 6
    "specific",  # ... the share of those terms the history does not use everywhere (not its topic words)
    "turn_overlap",  # the whole turns' overlap
    "number_conflict",  # each sentence of the pair states a number the other does not
    "name_conflict",  # ... a name
    "negates",  # the new sentence negates a term or name of the old
    "other_words",  # both hold words the other does not (a value said in words), beside the shared subject
    "restates",  # every number and name of the old sentence is in the new (a confirmation, an added detail)
    "lead_conflict",  # the two sentences open with different names (about, or said by, someone else)
    "corrects",  # the new turn says something was wrong
    "marks_change",  # the new turn marks a change or a decision
    "disagrees",  # the new turn opens with a disagreement
    "adjacent_agent",  # the old turn is the agent's, right before the new one
    "adjacent_user",  # the old turn is the user's, right before the new one
    "old_by_user",  # the old turn is the user's (the same speaker returning to a subject)
    "same_session",
    "old_sentences",  # log(1 + sentences of the old turn) / 3
    "new_sentences",
)


def pair_features(old: TurnFacts, new: TurnFacts, *, adjacent: bool, common: frozenset[str]) -> dict[str, float]:
    """What the detector reads of a candidate pair (``FEATURES``), for the fitted model (``ChangeModel``)."""
    pair = _best_pair(old, new)
    f = dict.fromkeys(FEATURES, 0.0)
    if pair is not None:
        a, b = pair
        shared = a.stems & b.stems
        f["overlap"] = len(shared) / (len(a.stems) * len(b.stems)) ** 0.5
        f["shared"] = min(len(shared) + len(a.names & b.names), 6) / 6
        f["specific"] = len(shared - common) / len(shared)
        f["number_conflict"] = float(bool(a.numbers - b.numbers) and bool(b.numbers - a.numbers))
        f["name_conflict"] = float(bool(a.names - b.names) and bool(b.names - a.names))
        f["negates"] = float(bool(b.negated & (a.stems | a.names)))
        f["other_words"] = float(bool(a.stems - shared) and bool(b.stems - shared))
        f["restates"] = float(bool(a.numbers or a.names) and a.numbers <= b.numbers and a.names <= b.names)
        f["lead_conflict"] = float(bool(a.lead and b.lead and a.lead != b.lead and a.lead not in b.stems | b.names))
    turn_shared = old.stems & new.stems
    if turn_shared:
        f["turn_overlap"] = len(turn_shared) / (len(old.stems) * len(new.stems)) ** 0.5
    f["corrects"] = float(new.corrects)
    f["marks_change"] = float(bool(new.markers))
    f["disagrees"] = float(new.disagrees)
    f["adjacent_agent"] = float(adjacent and not old.by_user)
    f["adjacent_user"] = float(adjacent and old.by_user)
    f["old_by_user"] = float(old.by_user)
    f["same_session"] = float(old.session == new.session)
    f["old_sentences"] = math.log1p(len(old.statements)) / 3
    f["new_sentences"] = math.log1p(len(new.statements)) / 3
    return f


@dataclass(frozen=True)
class Tree:
    """One regression tree of the boosted model, as arrays: node ``i`` splits on ``feature[i] <= threshold[i]`` (left)
    or is a leaf (``left[i] == -1``) with ``value[i]``."""

    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    value: tuple[float, ...]

    def predict(self, row: Sequence[float]) -> float:
        node = 0
        while self.left[node] != -1:
            node = self.left[node] if row[self.feature[node]] <= self.threshold[node] else self.right[node]
        return self.value[node]


@dataclass(frozen=True)
class ChangeModel:
    """Gradient-boosted trees over ``FEATURES``: the confidence that a candidate pair is a replacement (log-odds
    ``init + rate * sum of the trees``, through the logistic function). Fitted by ``lca bench events --fit``
    (scikit-learn, scored leave one scenario file out) and shipped as ``change_model.json``; read here without
    scikit-learn. An empty model (no trees) scores every pair at the logistic of ``init``."""

    init: float
    rate: float = 0.1
    trees: tuple[Tree, ...] = ()
    fitted_on: tuple[str, ...] = ()  # the scenario files it was fitted on, as name@sha256 prefix

    def confidence(self, features: dict[str, float]) -> float:
        return float(self.confidences([features])[0])

    def confidences(self, pairs: Sequence[dict[str, float]]) -> np.ndarray:
        """The confidence of each pair, every tree walked for every pair at once (a turn's candidates are scored in
        one pass: at ingest this is most of the detector's time)."""
        rows = np.asarray([[f[name] for name in FEATURES] for f in pairs], dtype=np.float64).reshape(-1, len(FEATURES))
        z = np.full(len(rows), self.init)
        if self.trees and len(rows):
            feature, threshold, left, right, value = self._stacked
            trees = np.arange(len(self.trees))
            at = np.zeros((len(rows), len(self.trees)), dtype=np.int64)
            every = np.arange(len(rows))[:, None]
            while True:
                inner = left[trees, at] != -1
                if not inner.any():
                    break
                goes_left = rows[every, feature[trees, at]] <= threshold[trees, at]
                at = np.where(inner, np.where(goes_left, left[trees, at], right[trees, at]), at)
            z = z + self.rate * value[trees, at].sum(axis=1)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))

    @cached_property
    def _stacked(self) -> tuple[np.ndarray, ...]:
        """The trees as (trees, nodes) arrays, padded with leaves."""
        width = max(len(t.left) for t in self.trees)
        feature = np.zeros((len(self.trees), width), dtype=np.int64)
        threshold = np.zeros((len(self.trees), width))
        left = np.full((len(self.trees), width), -1, dtype=np.int64)
        right = np.full((len(self.trees), width), -1, dtype=np.int64)
        value = np.zeros((len(self.trees), width))
        for i, t in enumerate(self.trees):
            n = len(t.left)
            feature[i, :n] = [max(f, 0) for f in t.feature]  # a leaf's feature (-2) is never read
            threshold[i, :n], left[i, :n], right[i, :n], value[i, :n] = t.threshold, t.left, t.right, t.value
        return feature, threshold, left, right, value

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "init": self.init,
            "rate": self.rate,
            "fitted_on": list(self.fitted_on),
            "trees": [
                {
                    "feature": list(t.feature),
                    "threshold": list(t.threshold),
                    "left": list(t.left),
                    "right": list(t.right),
                    "value": list(t.value),
                }
                for t in self.trees
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, *, path: str | None = None) -> ChangeModel:
        if not isinstance(data, dict):
            raise RecordFormatError("a change model is a JSON object", path=path)
        if list(data.get("features") or FEATURES) != list(FEATURES):
            raise RecordFormatError(
                f"fitted on other features: {data.get('features')!r}; refit with lca bench events --fit",
                path=path,
                field="features",
            )
        try:
            trees = tuple(
                Tree(
                    tuple(int(v) for v in t["feature"]),
                    tuple(float(v) for v in t["threshold"]),
                    tuple(int(v) for v in t["left"]),
                    tuple(int(v) for v in t["right"]),
                    tuple(float(v) for v in t["value"]),
                )
                for t in data.get("trees", ())
            )
            return cls(float(data["init"]), float(data.get("rate", 0.1)), trees, tuple(data.get("fitted_on", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordFormatError(f"not a change model: {exc!r}", path=path, field="trees") from None

    @classmethod
    def shipped(cls) -> ChangeModel:
        return cls.from_dict(json.loads(MODEL_FILE.read_text(encoding="utf-8")), path=str(MODEL_FILE))


def evidence_of(features: dict[str, float]) -> str:
    """What the detector read of a pair, in words (the cues that are present and the overlap)."""
    cues = [name.replace("_", " ") for name in EVIDENCE_CUES if features.get(name)]
    return ", ".join([*cues, f"overlap {features['overlap']:.2f}"])


EVIDENCE_CUES = (
    "corrects",
    "disagrees",
    "marks_change",
    "number_conflict",
    "name_conflict",
    "negates",
    "adjacent_agent",
)


MODEL_FILE = Path(__file__).with_name("change_model.json")


def kind_of(old: TurnFacts, new: TurnFacts, *, adjacent: bool) -> str:
    """Corrected (a claim or detail was wrong) or superseded (a decision or preference changed)."""
    return "corrected" if new.corrects or (adjacent and new.disagrees and not old.by_user) else "superseded"


class StructuralChangeDetector:
    """The model-free detector (``DETECTOR``). Stateful: it remembers the turns it has read (stems and values only)
    and reads each new one against them; ``observe`` returns the events the new turns make."""

    name = DETECTOR

    def __init__(self, *, model: ChangeModel | None = None, min_confidence: float = MIN_KEPT) -> None:
        self.model = model or ChangeModel.shipped()
        self.min_confidence = min_confidence
        self._turns: list[TurnFacts] = []
        self._postings: dict[str, list[int]] = defaultdict(list)
        self._seen: set[str] = set()
        self._last_in_session: dict[str, int] = {}

    def known(self, key: str) -> bool:
        return key in self._seen

    def remember(self, entries: Iterable[TranscriptEntry]) -> None:
        """Read turns without looking for events in them (history already read in an earlier process)."""
        for entry in ordered(entries):
            facts = self._add(entry)
            if facts is not None:
                self._index(facts)

    def observe(self, entries: Sequence[TranscriptEntry]) -> list[ReplacementEvent]:
        out: list[ReplacementEvent] = []
        for facts in self._new_turns(entries):
            out.extend(self._detect(facts))
        return out

    def _new_turns(self, entries: Iterable[TranscriptEntry]) -> Iterator[TurnFacts]:
        """The turns of ``entries`` not read before, in the order they were said; each yielded turn is the caller's to
        index once it has been read against the earlier ones. A turn with a host's label is indexed, not yielded: the
        host said what it replaces, and its label wins."""
        for entry in ordered(entries):
            if turn_key(entry.session_id, entry.id) in self._seen:
                continue
            facts = self._add(entry)
            if facts is None:
                continue
            if labelled_replacement(entry):
                self._index(facts)
                continue
            yield facts

    def _add(self, entry: TranscriptEntry) -> TurnFacts | None:
        key = turn_key(entry.session_id, entry.id)
        if key in self._seen or entry.kind not in (EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN):
            self._seen.add(key)
            return None
        self._seen.add(key)
        facts = facts_of(entry, len(self._turns))
        self._turns.append(facts)
        return facts

    @staticmethod
    def _claim_answered(old: TurnFacts, new: TurnFacts, *, adjacent: bool) -> bool:
        """Whether an agent turn can be one the user's turn replaces: the one right before it (the model reads whether
        the user disagrees, or decides among options the agent laid out, which replaces none), or an earlier short
        claim or proposal; an earlier long answer is about many things."""
        return adjacent or len(old.statements) <= MAX_CLAIM_STATEMENTS

    def _index(self, facts: TurnFacts) -> None:
        for stem in facts.stems:
            self._postings[stem].append(facts.position)
        self._last_in_session[facts.session] = facts.position

    def candidate_pairs(self, entries: Sequence[TranscriptEntry]) -> list[tuple[str, str, dict[str, float]]]:
        """Read ``entries`` as ``observe`` does, returning every screened candidate pair ``(of, by, features)`` instead
        of events: what ``lca bench events --fit`` fits the model on, through the same screen."""
        out: list[tuple[str, str, dict[str, float]]] = []
        for facts in self._new_turns(entries):
            out.extend((old.key, facts.key, features) for old, features, _ in self._candidates(facts))
            self._index(facts)
        return out

    def _candidates(self, new: TurnFacts) -> list[tuple[TurnFacts, dict[str, float], bool]]:
        """The earlier turns ``new`` could replace, each with its features and whether it came right before. A user's
        turn only (the agent's acknowledgement of a change restates it); the screen keeps the turns that share a term
        with it and the turn right before it (the model weighs how specific the shared terms are)."""
        if not new.by_user:
            return []
        previous = self._last_in_session.get(new.session)
        counts: dict[int, int] = defaultdict(int)
        for stem in new.stems:
            posting = self._postings.get(stem, ())
            if len(posting) <= COMMON_POSTING:
                for position in posting:
                    counts[position] += 1
        candidates = {p for p, n in counts.items() if n >= 1}
        if previous is not None:
            candidates.add(previous)
        # the history's topic words: in more than COMMON_SHARE of the turns read (at least COMMON_MIN of them)
        limit = max(COMMON_MIN, COMMON_SHARE * len(self._turns))
        common = frozenset(stem for stem in new.stems if len(self._postings.get(stem, ())) > limit)
        out = []
        for position in sorted(candidates):
            old = self._turns[position]
            adjacent = position == previous
            if old.project and new.project and old.project != new.project:
                continue  # another project's rule is not replaced by this one's
            if old.by_user and old.speaker and new.speaker and old.speaker != new.speaker:
                continue  # one person's plan or preference is not replaced by what another says of their own
            if old.asks or (new.asks and not new.disagrees):
                continue  # a question states no value, and asking one replaces none
            if not old.by_user and not self._claim_answered(old, new, adjacent=adjacent):
                continue
            out.append((old, pair_features(old, new, adjacent=adjacent, common=common), adjacent))
        return out

    def _restated_source(self, old: TurnFacts, new: TurnFacts) -> TurnFacts | None:
        """The user's turn an agent turn acknowledged, when the value ``new`` replaces came from it ("The mock is
        1 hour 15 minutes" / "OK: 1 hour 15 minutes" / "Sorry, I misread: 1 hour 45"): the replaced statement is the
        user's, the agent's turn only restates it (recall marks a reply to a replaced turn). None for the agent's
        own claim: a value the user never said."""
        if old.by_user or old.position == 0:
            return None
        source = self._turns[old.position - 1]
        if not source.by_user or source.asks or source.session != old.session:
            return None
        (old_numbers, old_names), (new_numbers, new_names) = _values(old), _values(new)
        source_numbers, source_names = _values(source)
        # the values of the kind the new turn states (a number for a number, a name for a name) it does not repeat:
        # all of them the user's (the echo added none of its own), else the agent's turn made a claim of its own
        replaced_numbers = old_numbers - new_numbers if new_numbers else frozenset()
        replaced_names = old_names - new_names if new_names else frozenset()
        restated = replaced_numbers <= source_numbers and replaced_names <= source_names
        return source if restated and (replaced_numbers or replaced_names) else None

    def _detect(self, new: TurnFacts) -> list[ReplacementEvent]:
        candidates = self._candidates(new)
        confidences = self.model.confidences([features for _, features, _ in candidates])
        scored = [
            (float(confidence), old, features, adjacent)
            for confidence, (old, features, adjacent) in zip(confidences, candidates, strict=True)
            if confidence >= self.min_confidence
        ]
        self._index(new)
        if not scored:
            return []
        confidence, old, features, adjacent = max(scored, key=lambda f: (f[0], f[1].position))
        if (source := self._restated_source(old, new)) is not None:
            old = source  # the agent echoed the user's value: the user's turn is where the mistake or plan was said
        return [
            ReplacementEvent(
                kind=kind_of(old, new, adjacent=adjacent),
                of=old.key,
                by=new.key,
                origin="inferred",
                detector=self.name,
                confidence=round(confidence, 3),
                evidence=evidence_of(features),
                at=new.timestamp,
            )
        ]


def _values(facts: TurnFacts) -> tuple[frozenset[str], frozenset[str]]:
    """The numbers and the names a turn states."""
    numbers = frozenset().union(*(s.numbers for s in facts.statements))
    return numbers, frozenset().union(*(s.names for s in facts.statements))


def labelled_replacement(entry: TranscriptEntry) -> bool:
    """Whether the turn carries a host's correction or supersedes label (``meta["event"]``)."""
    event = (entry.meta or {}).get("event")
    return isinstance(event, dict) and event.get("type") in ("correction", "supersedes")


def ordered(entries: Iterable[TranscriptEntry]) -> list[TranscriptEntry]:
    """Entries in the order they were said: by time, then session and their order in it (as given), so the order
    sessions are fed in (an incremental ingest, a reindex walking sessions by id) changes nothing."""
    seen: dict[str, int] = defaultdict(int)
    keyed = []
    for entry in entries:
        keyed.append((entry.timestamp, entry.session_id, seen[entry.session_id], entry))
        seen[entry.session_id] += 1
    return [entry for *_, entry in sorted(keyed, key=lambda k: k[:3])]
