"""The experience event log: what happened to each memory (used, approved, corrected, ...).

Append-only JSONL under ``<home>/events/experience.jsonl``; the experiential term E is
computed from it and never from, or into, a memory's content. Learned state is its
history: counts are a replay of the log.

Where the events come from (nothing is guessed from plain language):

- ``approved`` / ``corrected``: a transcript turn that carries an explicit event
  (``meta["event"]``, type ``approval`` or ``correction``, ``of`` the turn it is about) is
  recorded against that turn (``transcript:<session>#<entry>``) and against every memory whose
  sources include it (:func:`events_from_entries`). The substrate records them when the turn is
  appended; the consolidation cycle records them again over its span for the memories it has
  just written; :meth:`ExperienceLog.record_new` keeps that from counting anything twice.
- ``contradicted``: the consolidation verifier superseded a memory or marked it in conflict
  with supported evidence (lca.consolidation.review).
- ``used`` / ``prevented_mistake``: the consolidation cycle (lca.consolidation.cycle); they also
  move the memory file's ``hits`` / ``prevented_mistakes`` counters (:func:`count_on_memory`).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lca.derived import derived_id
from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes, exclusive_lock
from lca.layout import StoreLayout
from lca.memory import MemoryFile, MemoryStore, TranscriptSpan
from lca.recall import EXPERIENCE_EVENT_WEIGHTS
from lca.transcript import TranscriptStore
from lca.types import TranscriptEntry

# the transcript's explicit event types (scenario format v2, meta["event"]["type"]) that E learns from
TURN_EVENT_KINDS = {"correction": "corrected", "approval": "approved", "supersedes": "superseded"}
# the event kinds a memory file counts in its front matter (counters, outside the content hash)
COUNTER_OF_KIND = {"used": "hits", "prevented_mistake": "prevented_mistakes"}

EventKey = tuple[str, str, str | None]  # (target, kind, span): one event, for idempotent recording


@dataclass(frozen=True)
class ExperienceEvent:
    target: str  # a memory id ("memory:<id>") or a transcript source key ("transcript:<session>#<entry>")
    kind: str  # one of EXPERIENCE_EVENT_WEIGHTS
    at: float
    span: str | None = None  # the transcript span that evidences it (required for prevented_mistake)

    @property
    def key(self) -> EventKey:
        return (self.target, self.kind, self.span)


@dataclass(frozen=True)
class ObservedEvent:
    """An event seen in the transcript or a cycle, before the log has it (the log stamps ``at``)."""

    target: str
    kind: str
    span: str  # "<session>#<entry>" of the turn that shows it

    @property
    def key(self) -> EventKey:
        return (self.target, self.kind, self.span)


@dataclass(frozen=True)
class TurnEvent:
    """An explicit approval or correction a transcript turn carries: ``shown_at`` shows it, about ``of``."""

    kind: str  # "approved" | "corrected"
    of: str  # "<session>#<entry>" of the turn approved or corrected
    shown_at: str  # "<session>#<entry>" of the turn that carries the event


class ExperienceLog:
    def __init__(self, root: Path | str) -> None:
        self.path = StoreLayout(root).experience_log
        self._cache: tuple[int, dict[str, Counter], set[EventKey]] | None = None

    def record(self, target: str, kind: str, *, span: str | None = None, at: float | None = None) -> ExperienceEvent:
        if kind not in EXPERIENCE_EVENT_WEIGHTS:
            raise RecordFormatError(
                f"unknown event kind {kind!r}; known: {', '.join(EXPERIENCE_EVENT_WEIGHTS)}", field="kind"
            )
        if kind == "prevented_mistake" and not span:
            raise RecordFormatError(
                "a prevented mistake must cite the transcript span of the action it changed", field="span"
            )
        event = ExperienceEvent(target, kind, time.time() if at is None else at, span)
        append_bytes(self.path, (json.dumps(event.__dict__, sort_keys=True) + "\n").encode())
        return event

    def recorded(self, target: str, kind: str, span: str | None) -> bool:
        """Is this (target, kind, span) already in the log?"""
        return (target, kind, span) in self._replayed()[2]

    def record_new(self, events: Iterable[ObservedEvent], *, at: float | None = None) -> list[ExperienceEvent]:
        """Record the events the log does not hold yet (same target, kind and span), each once: replaying
        a history, or seeing one event from two places, adds nothing. Returns what was recorded."""
        pending = list(dict.fromkeys(events))
        unknown = sorted({e.kind for e in pending} - set(EXPERIENCE_EVENT_WEIGHTS))
        if unknown:  # refused before any of them is recorded
            raise RecordFormatError(
                f"unknown event kind {unknown[0]!r}; known: {', '.join(EXPERIENCE_EVENT_WEIGHTS)}", field="kind"
            )
        if not pending:
            return []
        out: list[ExperienceEvent] = []
        with exclusive_lock(self.path.with_suffix(".lock"), what=f"experience log {self.path}"):
            known = self._replayed()[2]
            for event in pending:
                if event.key not in known:
                    out.append(self.record(event.target, event.kind, span=event.span, at=at))
        return out

    def _replay(self, as_of: float | None = None) -> tuple[dict[str, Counter], set[EventKey]]:
        """target -> Counter of event kinds, and the (target, kind, span) keys, from the events at or
        before ``as_of`` (all when None)."""
        out: dict[str, Counter] = defaultdict(Counter)
        keys: set[EventKey] = set()
        if self.path.exists():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                    target, kind, at = event["target"], event["kind"], event["at"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise RecordFormatError(
                        f"not an experience event: {exc}", path=str(self.path), line=number
                    ) from None
                if as_of is None or at <= as_of:
                    out[target][kind] += 1
                    keys.add((target, kind, event.get("span")))
        return dict(out), keys

    def _replayed(self) -> tuple[int, dict[str, Counter], set[EventKey]]:
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._cache is None or self._cache[0] != size:
            counts, keys = self._replay()
            self._cache = (size, counts, keys)
        return self._cache

    def events(self, kinds: Iterable[str] | None = None) -> list[ExperienceEvent]:
        """Every event in the log, in order (only those of ``kinds`` when given): what a measure over time reads, as
        a schema's retrieval lift does (``lca.insight.schema_gates``)."""
        wanted = None if kinds is None else set(kinds)
        out = []
        if self.path.exists():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                    event = ExperienceEvent(raw["target"], raw["kind"], float(raw["at"]), raw.get("span"))
                except (ValueError, KeyError, TypeError) as exc:
                    raise RecordFormatError(
                        f"not an experience event: {exc}", path=str(self.path), line=number
                    ) from None
                if wanted is None or event.kind in wanted:
                    out.append(event)
        return out

    def counts_at(self, as_of: float | None) -> dict[str, Counter]:
        """The counts as they stood at ``as_of`` (epoch seconds): E's part of a past worldview."""
        return self.counts() if as_of is None else self._replay(as_of)[0]

    def counts(self) -> dict[str, Counter]:
        """target -> Counter of event kinds, replayed from the log (cached by the log's size)."""
        return self._replayed()[1]

    def replacement_keys(self) -> list[EventKey]:
        """The (target, kind, span) keys of the explicit corrections and supersessions, in a stable order."""
        keys = self._replayed()[2]
        return sorted(
            (k for k in keys if k[1] in ("corrected", "superseded") and k[2]), key=lambda k: (k[0], k[1], k[2] or "")
        )

    def corrections(self) -> dict[str, tuple[str, ...]]:
        """target -> the turns ("<session>#<entry>") whose explicit event corrected or superseded it."""
        out: dict[str, list[str]] = defaultdict(list)
        for target, kind, span in sorted(self._replayed()[2], key=lambda k: (k[0], k[1], k[2] or "")):
            if kind in ("corrected", "superseded") and span:
                out[target].append(span)
        return {target: tuple(dict.fromkeys(spans)) for target, spans in out.items()}


# ---- explicit events in the transcript --------------------------------------------------------
def source_key(session_id: str, entry_id: str) -> str:
    """A turn's source key, as events cite it: ``<session>#<entry>``, the ids as derived stores hold them
    (``lca.derived``)."""
    return f"{derived_id(session_id)}#{derived_id(entry_id)}"


def turn_event(session_id: str, entry_id: str, meta: Mapping[str, Any]) -> TurnEvent | None:
    """The approval or correction a turn carries in ``meta["event"]``, or None (no event, or a type E
    does not learn from). A malformed one is refused, naming the entry and the field."""
    event = meta.get("event") if meta else None
    if event is None:
        return None
    where = f"entry {entry_id!r} of session {session_id!r}"
    if not isinstance(event, Mapping) or not isinstance(event.get("type"), str):
        raise RecordFormatError(f"{where}: an event is a mapping with a string 'type'", field="meta.event.type")
    kind = TURN_EVENT_KINDS.get(event["type"])
    if kind is None:
        return None
    of = event.get("of")
    if not isinstance(of, str) or of.count("#") != 1 or not all(of.split("#")):
        raise RecordFormatError(
            f"{where}: a {event['type']} names the turn it is about as '<session>#<entry>', got {of!r}",
            field="meta.event.of",
        )
    return TurnEvent(kind, source_key(*of.split("#")), source_key(session_id, entry_id))  # keys as the log holds them


def turn_events(entries: Iterable[TranscriptEntry]) -> list[TurnEvent]:
    """The approvals and corrections ``entries`` carry (see :func:`turn_event`)."""
    found = (turn_event(e.session_id, e.id, e.meta) for e in entries)
    return [t for t in found if t is not None]


def experience_of(
    events: Iterable[TurnEvent],
    memory_files: Mapping[str, MemoryFile],
    *,
    transcript: TranscriptStore | None = None,
) -> list[ObservedEvent]:
    """What E records for each approval or correction: one event against the turn it is about and one
    against every memory whose sources include that turn, each citing the turn that shows it. A memory
    that also cites the correcting turn was written with the correction in view and is not counted as
    corrected. ``transcript`` resolves sources given as a first/last range; without it a range covers
    its two ends only."""
    events = list(events)
    if not events:
        return []
    covered: dict[str, set[str]] = {}  # memory id -> the source keys it rests on
    cache: dict[str, list[str]] = {}
    for memory_id, memory in memory_files.items():
        covered[memory_id] = {key for span in memory.record.sources for key in _span_keys(span, transcript, cache)}
    out: list[ObservedEvent] = []
    for event in events:
        out.append(ObservedEvent(f"transcript:{event.of}", event.kind, event.shown_at))
        for memory_id in sorted(covered):
            keys = covered[memory_id]
            if event.of in keys and not (event.kind in ("corrected", "superseded") and event.shown_at in keys):
                out.append(ObservedEvent(f"memory:{memory_id}", event.kind, event.shown_at))
    return out


def events_from_entries(
    entries: Iterable[TranscriptEntry],
    memory_files: Mapping[str, MemoryFile],
    *,
    transcript: TranscriptStore | None = None,
) -> list[ObservedEvent]:
    """The experience events ``entries`` show explicitly (approvals and corrections, scenario format v2)."""
    return experience_of(turn_events(entries), memory_files, transcript=transcript)


def _span_keys(span: TranscriptSpan, transcript: TranscriptStore | None, cache: dict[str, list[str]]) -> set[str]:
    keys = {source_key(span.session, e) for e in span.entries}
    ends = [e for e in (span.first, span.last) if e]
    keys |= {source_key(span.session, e) for e in ends}
    if transcript is not None and span.first and span.last:
        if span.session not in cache:
            try:
                cache[span.session] = [e.id for e in transcript.read(span.session).entries]
            except LCAError:  # a source in a session this store does not hold: its ends are all it names
                cache[span.session] = []
        order = cache[span.session]
        if span.first in order and span.last in order:
            first, last = order.index(span.first), order.index(span.last)
            keys |= {source_key(span.session, e) for e in order[min(first, last) : max(first, last) + 1]}
    return keys


# ---- the memory file's counters -----------------------------------------------------------------
def count_on_memory(
    store: MemoryStore, event: ExperienceEvent, *, applied_at: datetime | None = None
) -> MemoryFile | None:
    """Move the memory file's counter for a ``used`` (hits) or ``prevented_mistake`` event through the
    one counter write (``MemoryStore.record_use``); the content hash does not change. Other kinds and
    transcript targets have no counter: None."""
    counter = COUNTER_OF_KIND.get(event.kind)
    if counter is None or not event.target.startswith("memory:"):
        return None
    return store.record_use(event.target[len("memory:") :], applied_at=applied_at, **{counter: 1})
