"""Which turns a later turn corrected or superseded: labelled by the host, or inferred by the substrate.

A host rarely says that a turn replaces another; people change their minds in plain words. So the substrate keeps
one view of such replacement events from three sources, and recall and handoffs read that view:

- **labels**: a turn's explicit event (``meta["event"]`` of type ``correction`` or ``supersedes``), recorded in the
  experience log when the turn is appended (``lca.experience``). A host's label always wins.
- **the model-free detector** (``lca.change_detector``), run at ingest over the new turns. Its events are derived:
  ``<home>/index/events.jsonl``, deleted and rebuilt from the transcript by ``reindex``.
- **the consolidation cycle**: its writer proposes "this replaces that", its verifier checks it against the sources
  like any candidate, and what passes is recorded in the ledger (``event_inferred``): learned state, kept.

A person can confirm or reject an inferred event (``event_confirmed`` / ``event_rejected`` in the ledger): a
confirmed one acts as a label does, a rejected one never acts again. The transcript is never rewritten. An event
that names a turn the transcript does not hold is refused at load and counted (``EventBook.refused``; health).

What acts: a turn replaced by a label, a confirmation, or an inference at or above ``hold`` confidence is *held*
(recall keeps it out of an answer about the present, and shows it marked for a question about history); one
inferred at or above ``mark`` is *marked* (it may be shown, never silently: its header says what replaced it).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from lca.derived import derived_id
from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes
from lca.layout import StoreLayout
from lca.secrets import redacted
from lca.types import TranscriptEntry, shown_entry_key

KINDS = ("corrected", "superseded")
ORIGINS = ("label", "inferred")
LABEL_DETECTOR = "host-label"
HELD, MARKED = "held", "marked"
DECISIONS = {"event_confirmed": "confirmed", "event_rejected": "rejected"}
LABEL_TYPES = {"corrected": "correction", "superseded": "supersedes"}  # an event kind as a host's label names it


class UnknownEventError(LCAError):
    """A confirmation or rejection named an event this store does not hold."""


def turn_key(session_id: str, entry_id: str) -> str:
    """A turn as events name it: ``<session>#<entry>``, each id as derived stores hold it (``lca.derived``), so an
    event names a turn as the index's pointers do and its record holds no credential an id quoted."""
    return f"{derived_id(session_id)}#{derived_id(entry_id)}"


def event_id(of: str, by: str) -> str:
    """Stable id of "``by`` replaces ``of``": the same pair found twice (by two detectors, or again on a rebuild) is
    one event."""
    return "ev-" + hashlib.sha256(f"{of}|{by}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ReplacementEvent:
    """``by`` corrected (a wrong claim or detail) or superseded (a decision or preference changed) the earlier ``of``."""

    kind: str  # corrected | superseded
    of: str  # "<session>#<entry>"
    by: str
    origin: str  # label | inferred
    detector: str  # host-label, structure-v1, consolidation, ...
    confidence: float  # 1.0 for a label
    evidence: str = ""  # what the detector read (credentials redacted)
    at: str | None = None  # when ``by`` was said

    @property
    def id(self) -> str:
        return event_id(self.of, self.by)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self), "evidence": redacted(self.evidence)}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, path: str | None = None, line: int | None = None
    ) -> ReplacementEvent:
        def fail(message: str, field: str) -> RecordFormatError:
            return RecordFormatError(message, path=path, line=line, field=field)

        if not isinstance(data, Mapping):
            raise fail("an event is a JSON object", "event")
        if data.get("kind") not in KINDS:
            raise fail(f"kind must be one of {', '.join(KINDS)}, got {data.get('kind')!r}", "kind")
        for name in ("of", "by"):
            value = data.get(name)
            if not isinstance(value, str) or value.count("#") != 1 or not all(value.split("#")):
                raise fail(f"'{name}' names a turn as '<session>#<entry>', got {value!r}", name)
        if data.get("origin") not in ORIGINS:
            raise fail(f"origin must be one of {', '.join(ORIGINS)}, got {data.get('origin')!r}", "origin")
        confidence = data.get("confidence")
        if not isinstance(confidence, int | float) or not 0.0 <= float(confidence) <= 1.0:
            raise fail(f"confidence must be a number in [0, 1], got {confidence!r}", "confidence")
        return cls(
            kind=data["kind"],
            of=data["of"],
            by=data["by"],
            origin=data["origin"],
            detector=str(data.get("detector") or "unknown"),
            confidence=float(confidence),
            evidence=str(data.get("evidence") or ""),
            at=data.get("at"),
        )


@dataclass(frozen=True)
class Replacement:
    """An event as it acts on the turn it replaced: held or marked, and whether a person confirmed it."""

    event: ReplacementEvent
    status: str  # held | marked
    confirmed: bool = False

    def marker(self) -> str:
        """What the turn's header says: what replaced it, when ("superseded 2026-03-13 by s4:7"); "possibly" for an
        inference below the hold-back confidence."""

        when = f" {self.event.at[:10]}" if self.event.at else ""
        hedge = "possibly " if self.status == MARKED else ""
        return f"{hedge}{self.event.kind}{when} by {shown_entry_key(self.event.by)}"


class ChangeDetector(Protocol):
    """A detector that reads new turns against those it has read and says which earlier turns they replace."""

    name: str

    def remember(self, entries: Iterable[TranscriptEntry]) -> None: ...

    def observe(self, entries: Sequence[TranscriptEntry]) -> list[ReplacementEvent]: ...


class TranscriptLike(Protocol):
    def session_ids(self) -> list[str]: ...

    def session_path(self, session_id: str) -> Path: ...

    def read(self, session_id: str) -> Any: ...

    def iter_entries(self) -> Iterable[TranscriptEntry]: ...


class EventBook:
    """The one view of replacement events for a store (see the module docstring)."""

    def __init__(
        self,
        root: Path | str,
        transcript: TranscriptLike,
        *,
        labelled: Callable[[], Iterable[tuple[str, str, str | None]]],
        ledger_events: Callable[[], Iterable[Any]],
        detector: Callable[[], ChangeDetector] | None = None,
    ) -> None:
        self.layout = StoreLayout(root)
        self.path = self.layout.inferred_events
        self.transcript = transcript
        self._labelled = labelled  # (target, kind, span) keys of the experience log
        self._ledger_events = ledger_events
        self._make_detector = detector
        self._detector: ChangeDetector | None = None
        self._times: dict[str, tuple[int, dict[str, str]]] = {}  # session -> (file size, entry id -> timestamp)
        self._loaded: tuple[int, list[ReplacementEvent], list[str]] | None = None
        self._ledger_cache: tuple[int, list[ReplacementEvent], dict[str, str]] | None = None
        self._acting: tuple[tuple[Any, ...], dict[str, tuple[Replacement, ...]]] | None = None
        self._merged: tuple[tuple[Any, ...], Mapping[str, Any]] | None = None  # held_counts, per counts and view

    # -- writing (the caller holds the store's writer lock)
    def observe(self, entries: Sequence[TranscriptEntry]) -> int:
        """Run the model-free detector over newly indexed turns; record what it finds. Returns how many."""
        if self._make_detector is None or not entries:
            return 0
        if self._detector is None:  # a new process: read the history it found events in before, without looking again
            self._detector = self._make_detector()
            new = {turn_key(e.session_id, e.id) for e in entries}
            self._detector.remember(
                e for e in self.transcript.iter_entries() if turn_key(e.session_id, e.id) not in new
            )
        found = self._detector.observe(entries)
        if found:
            payload = "".join(json.dumps(e.to_dict(), sort_keys=True, ensure_ascii=False) + "\n" for e in found)
            append_bytes(self.path, payload.encode("utf-8"))
        return len(found)

    def reset(self) -> None:
        """Forget the detector's reading (``reindex`` deletes the derived events and reads the history again)."""
        self._detector = None
        self._loaded = self._acting = self._merged = None

    # -- reading
    def _size(self, path: Path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    def _stamp(self) -> tuple[int, int, int]:
        """What the view is read from: the derived events, the ledger and the experience log (each append-only)."""
        return self._size(self.path), self._size(self.layout.ledger), self._size(self.layout.experience_log)

    def _ledger(self) -> tuple[list[ReplacementEvent], dict[str, str]]:
        """The consolidation cycle's events and the people's decisions, from the ledger (last decision wins)."""
        size = self._size(self.layout.ledger)
        if self._ledger_cache is not None and self._ledger_cache[0] == size:
            return self._ledger_cache[1], self._ledger_cache[2]
        inferred, decisions = [], {}
        for event in self._ledger_events():
            if event.kind == "event_inferred":
                inferred.append(ReplacementEvent.from_dict(event.data, path=str(self.layout.ledger)))
            elif event.kind in DECISIONS:
                decisions[event.subject] = DECISIONS[event.kind]
        self._ledger_cache = (size, inferred, decisions)
        return inferred, decisions

    def inferred(self) -> tuple[list[ReplacementEvent], list[str]]:
        """The detector's events that name turns the transcript holds, and why each other line was refused."""
        size = stamp = self._size(self.path)  # the transcript only grows: a turn found once stays found
        if self._loaded is not None and self._loaded[0] == stamp:
            return self._loaded[1], self._loaded[2]
        events, refused = [], []
        if size:
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    event = ReplacementEvent.from_dict(json.loads(line), path=str(self.path), line=number)
                except (ValueError, RecordFormatError) as exc:
                    refused.append(str(exc) if isinstance(exc, RecordFormatError) else f"{self.path}:{number}: {exc}")
                    continue
                missing = [k for k in (event.of, event.by) if self.time_of(k) is None]
                if missing:
                    refused.append(
                        f"{self.path}:{number}: event {event.id} names a turn the transcript does not hold: {missing[0]}"
                    )
                    continue
                events.append(event)
        self._loaded = (stamp, events, refused)
        return events, refused

    def refused(self) -> list[str]:
        return self.inferred()[1]

    def labelled(self) -> list[ReplacementEvent]:
        out = []
        for target, kind, span in self._labelled():
            if kind in KINDS and span and target.startswith("transcript:"):
                of = target[len("transcript:") :]
                out.append(ReplacementEvent(kind, of, span, "label", LABEL_DETECTOR, 1.0, at=self.time_of(span)))
        return out

    def events(self) -> list[ReplacementEvent]:
        """Every replacement event, one per id: a label over an inference, else the most confident inference."""
        ledger_inferred, _ = self._ledger()
        best: dict[str, ReplacementEvent] = {}
        for event in [*self.labelled(), *ledger_inferred, *self.inferred()[0]]:
            held = best.get(event.id)
            if held is None or (held.origin != "label" and event.confidence > held.confidence):
                best[event.id] = event
        return sorted(best.values(), key=lambda e: (e.at or "", e.by, e.of))

    def decisions(self) -> dict[str, str]:
        return self._ledger()[1]

    def replacements(self, *, hold: float, mark: float) -> dict[str, tuple[Replacement, ...]]:
        """``transcript:<turn>`` -> how each event acts on that turn (held, marked); rejected events and inferences
        below ``mark`` are left out."""
        key = (*self._stamp(), hold, mark)
        if self._acting is not None and self._acting[0] == key:
            return self._acting[1]
        decisions = self.decisions()
        out: dict[str, list[Replacement]] = {}
        for event in self.events():
            decision = decisions.get(event.id)
            if decision == "rejected" and event.origin != "label":
                continue
            confirmed = decision == "confirmed"
            if event.origin == "label" or confirmed or event.confidence >= hold:
                status = HELD
            elif event.confidence >= mark:
                status = MARKED
            else:
                continue
            out.setdefault(f"transcript:{event.of}", []).append(Replacement(event, status, confirmed))
        acting = {target: tuple(reps) for target, reps in out.items()}
        self._acting = (key, acting)
        return acting

    def held_counts(
        self, counts: Mapping[str, Mapping[str, int]], *, hold: float, mark: float
    ) -> Mapping[str, Mapping[str, int]]:
        """The experience counts with each held inference (not a label: the log has those) counted once against the
        turn it replaced, so E and recall's hold-back read inferred events as they read labelled ones. Called on every
        recall: ``counts`` itself where no inference is held, and the merge made once per counts and view."""
        acting = self.replacements(hold=hold, mark=mark)
        key = (id(counts), *self._acting[0]) if self._acting is not None else None
        if key is not None and self._merged is not None and self._merged[0] == key:
            return self._merged[1]
        extra: dict[str, Counter] = {}
        for target, reps in acting.items():
            for rep in reps:
                if rep.status == HELD and rep.event.origin != "label":
                    extra.setdefault(target, Counter())[rep.event.kind] += 1
        merged: Mapping[str, Mapping[str, int]] = counts
        if extra:
            merged = dict(counts)
            for target, added in extra.items():
                merged[target] = Counter(counts.get(target, {})) + added
        self._merged = (key, merged) if key is not None else None
        return merged

    def corrections(self, *, hold: float, mark: float) -> dict[str, tuple[str, ...]]:
        """``transcript:<turn>`` -> the turns that hold it back (held events only), as ``ExperienceLog.corrections``."""
        return {
            target: tuple(dict.fromkeys(r.event.by for r in reps if r.status == HELD))
            for target, reps in self.replacements(hold=hold, mark=mark).items()
            if any(r.status == HELD for r in reps)
        }

    def as_labels(self, entries: Sequence[TranscriptEntry], *, hold: float, mark: float) -> list[TranscriptEntry]:
        """``entries`` with each held inference shown on the turn that made it as the label a host would have sent
        (``meta["event"]``, marked ``inferred`` with its confidence), for readers of labels (the mechanical handoff's
        decisions and what it no longer carries). A view: the transcript is not rewritten; a turn with a label of its
        own keeps it."""
        made: dict[str, ReplacementEvent] = {}
        for reps in self.replacements(hold=hold, mark=mark).values():
            for rep in reps:
                if rep.status == HELD and rep.event.origin == "inferred":
                    made.setdefault(rep.event.by, rep.event)
        if not made:
            return list(entries)
        out = []
        for entry in entries:
            event = made.get(turn_key(entry.session_id, entry.id))
            if event is None or (entry.meta or {}).get("event"):
                out.append(entry)
                continue
            label = {"type": LABEL_TYPES[event.kind], "of": event.of, "inferred": event.confidence}
            out.append(replace(entry, meta={**(entry.meta or {}), "event": label}))
        return out

    def find(self, event_id_: str) -> ReplacementEvent:
        for event in self.events():
            if event.id == event_id_:
                return event
        raise UnknownEventError(
            f"no replacement event {event_id_!r} in {self.layout.root} (lca events list shows them)"
        )

    # -- the turns
    def _session_size(self, session_id: str) -> int:
        try:
            return os.stat(self.transcript.session_path(session_id)).st_size
        except (FileNotFoundError, LCAError):
            return 0

    def time_of(self, key: str) -> str | None:
        """When the turn ``<session>#<entry>`` was said, or None when the transcript does not hold it."""
        session, _, entry = key.partition("#")
        size = self._session_size(session)
        if not size:
            return None
        cached = self._times.get(session)
        if cached is None or cached[0] != size:
            entries = self.transcript.read(session).entries
            cached = self._times[session] = (size, {e.id: e.timestamp for e in entries})
        return cached[1].get(entry)


def precision_recall(
    found: Iterable[ReplacementEvent], gold: Iterable[tuple[str, str]], *, threshold: float = 0.0
) -> dict[str, Any]:
    """Inferred events at or above ``threshold`` against gold ``(of, by)`` pairs: an event is right when its ``of`` is
    a turn gold says was replaced (``of_*``), and right in full when ``by`` matches too (``pair_*``)."""
    found = [e for e in found if e.origin == "inferred" and e.confidence >= threshold]
    gold = set(gold)
    gold_of = {of for of, _ in gold}
    found_of = {e.of for e in found}
    pairs = {(e.of, e.by) for e in found}
    return {
        "inferred": len(found),
        "gold": len(gold),
        "of_precision": round(len(found_of & gold_of) / len(found_of), 4) if found_of else None,
        "of_recall": round(len(found_of & gold_of) / len(gold_of), 4) if gold_of else None,
        "pair_precision": round(len(pairs & gold) / len(pairs), 4) if pairs else None,
        "pair_recall": round(len(pairs & gold) / len(gold), 4) if gold else None,
    }
