"""The experience event log: what happened to each memory (used, approved, corrected, ...).

Append-only JSONL under ``<home>/events/experience.jsonl``; the experiential term E is
computed from it and never from, or into, a memory's content. Learned state is its
history: counts are a replay of the log.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from lca.errors import RecordFormatError
from lca.fileio import append_bytes
from lca.layout import StoreLayout
from lca.recall import EXPERIENCE_EVENT_WEIGHTS


@dataclass(frozen=True)
class ExperienceEvent:
    target: str  # a memory id ("memory:<id>") or a transcript source key
    kind: str  # one of EXPERIENCE_EVENT_WEIGHTS
    at: float
    span: str | None = None  # the transcript span that evidences it (required for prevented_mistake)


class ExperienceLog:
    def __init__(self, root: Path | str) -> None:
        self.path = StoreLayout(root).experience_log
        self._cache: tuple[int, dict[str, Counter]] | None = None

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

    def _replay(self, as_of: float | None = None) -> dict[str, Counter]:
        """target -> Counter of event kinds, from the events at or before ``as_of`` (all when None)."""
        out: dict[str, Counter] = defaultdict(Counter)
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    event = json.loads(line)
                    if as_of is None or event["at"] <= as_of:
                        out[event["target"]][event["kind"]] += 1
        return dict(out)

    def counts_at(self, as_of: float | None) -> dict[str, Counter]:
        """The counts as they stood at ``as_of`` (epoch seconds): E's part of a past worldview."""
        return self.counts() if as_of is None else self._replay(as_of)

    def counts(self) -> dict[str, Counter]:
        """target -> Counter of event kinds, replayed from the log (cached by the log's size)."""
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._cache is None or self._cache[0] != size:
            self._cache = (size, self._replay())
        return self._cache[1]
