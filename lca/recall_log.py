"""The recall log, bounded: what each recall ranked and injected (``logs/recall.jsonl``), kept under a size bound.

One JSON record per recall, about 24 KB with its candidate rows, so an agent that recalls for months would fill a
disk (492 MB after 20,000 recalls, unbounded before). The log is therefore segmented: records are appended to the
active file; when the next record would take it past a quarter of the bound it is compacted (gzip, about a tenth
of its size) into ``recall.<n>.jsonl.gz`` and a new active file begins; the oldest segments are dropped while the
whole would exceed the bound. Readers (the consolidation cycle's "what was injected since the last cycle", the
imprinting bench's rewind, health's size report) go through ``RecallLog``, which spans the segments.

Rotation and appends hold ``logs/recall.lock`` so that two writers neither lose a record to a rotation nor rotate
twice. A read-only replica never writes the log (``Substrate.recaller``). Dropping old segments forgets only
derived records: the transcript, the experience log and the ledger keep what learning rests on.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.fileio import exclusive_lock, lines_backwards

DEFAULT_MAX_BYTES = 64 << 20  # 64 MiB: about 2,700 recalls uncompressed, some 25,000 once compacted
MIN_MAX_BYTES = 1 << 20
_SEGMENT = re.compile(r"recall\.(\d+)\.jsonl\.gz")


def _segment_number(name: str) -> int:
    match = _SEGMENT.fullmatch(name)
    return int(match.group(1)) if match else -1


@dataclass(frozen=True)
class RecallLogState:
    """Where the log stood (for a rewind): its segments and the active file's size (None: no active file)."""

    segments: tuple[str, ...]
    active_bytes: int | None


@dataclass(frozen=True)
class RecallLogSize:
    """What health reports: the bytes on disk, the bound, the segments and the records dropped so far."""

    bytes: int
    max_bytes: int
    segments: int
    dropped_segments: int


class RecallLog:
    """Appends, rotation and reading of one store's recall log (``path``: the active file)."""

    def __init__(self, path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < MIN_MAX_BYTES:
            raise ValueError(
                f"recall log bound must be an integer of at least {MIN_MAX_BYTES} bytes, got {max_bytes!r}"
            )
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.lock = self.path.with_name("recall.lock")
        self.dropped_log = self.path.with_name("recall.dropped")

    @property
    def active_share(self) -> int:
        return self.max_bytes // 4

    # ---- writing ------------------------------------------------------------------------------------------
    def append(self, record: Mapping[str, Any]) -> None:
        """One record, rotating first when it would take the active file past its share of the bound."""
        line = (json.dumps(record) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.lock, timeout=60.0, what=f"recall log {self.path}"):
            size = self.path.stat().st_size if self.path.exists() else 0
            if size and size + len(line) > self.active_share:
                self._rotate()
            with open(self.path, "ab") as handle:
                handle.write(line)

    def _rotate(self) -> None:
        """Compact the active file into the next segment (written whole, then renamed), then drop the oldest
        segments while the segments exceed what the bound leaves beside a full active file."""
        numbers = [n for n, _ in self._segments()]
        target = self.path.with_name(f"recall.{(max(numbers) + 1) if numbers else 1}.jsonl.gz")
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        with open(self.path, "rb") as source, gzip.open(tmp, "wb", compresslevel=6) as sink:
            while chunk := source.read(1 << 20):
                sink.write(chunk)
        os.replace(tmp, target)
        self.path.unlink()
        segments = self._segments()
        room = self.max_bytes - self.active_share
        total = sum(p.stat().st_size for _, p in segments)
        dropped = 0
        for _, path in segments[:-1]:  # the newest segment always stays
            if total <= room:
                break
            total -= path.stat().st_size
            path.unlink()
            dropped += 1
        if dropped:
            with open(self.dropped_log, "a", encoding="utf-8") as handle:
                handle.write(f"{dropped}\n")

    # ---- reading ------------------------------------------------------------------------------------------
    def _segments(self) -> list[tuple[int, Path]]:
        """The compacted segments, oldest first."""
        if not self.path.parent.is_dir():
            return []
        found = []
        for path in self.path.parent.iterdir():
            match = _SEGMENT.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def lines_backwards(self) -> Iterator[bytes]:
        """Every complete record line, newest first, across the active file and the segments: a reader that wants
        only the newest records (the cycle's "since the last cycle") stops early and never opens an old segment."""
        if self.path.exists():
            yield from lines_backwards(self.path)
        for _, path in reversed(self._segments()):
            try:
                with gzip.open(path, "rb") as handle:
                    lines = handle.read().split(b"\n")
            except (OSError, EOFError):  # a segment cut short by a crash: its readable records are derived anyway
                continue
            yield from (line for line in reversed(lines) if line)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first (a line that does not decode is passed over)."""
        lines = list(self.lines_backwards())
        for line in reversed(lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record

    def size(self) -> RecallLogSize:
        segments = self._segments()
        active = self.path.stat().st_size if self.path.exists() else 0
        dropped = 0
        if self.dropped_log.exists():
            dropped = sum(int(n) for n in self.dropped_log.read_text(encoding="utf-8").split() if n.isdigit())
        return RecallLogSize(
            active + sum(p.stat().st_size for _, p in segments), self.max_bytes, len(segments), dropped
        )

    # ---- rewinding (probes that must leave no trace) -------------------------------------------------------
    def state(self) -> RecallLogState:
        return RecallLogState(
            tuple(p.name for _, p in self._segments()), self.path.stat().st_size if self.path.exists() else None
        )

    def rewind(self, before: RecallLogState) -> None:
        """Back to ``before``: segments made since are removed and the active file is cut back to its old length
        (taken back out of the first new segment when a rotation compacted it meanwhile). A segment dropped since
        cannot come back: refused, naming it, rather than rewinding to a different log."""
        with exclusive_lock(self.lock, timeout=60.0, what=f"recall log {self.path}"):
            now = {p.name: p for _, p in self._segments()}
            lost = [name for name in before.segments if name not in now]
            if lost:
                raise RuntimeError(f"{self.path.parent}: segment(s) {', '.join(lost)} were dropped; cannot rewind")
            new = sorted((n for n in now if n not in before.segments), key=_segment_number)
            if before.active_bytes is None:
                self.path.unlink(missing_ok=True)
            elif new:
                with gzip.open(now[new[0]], "rb") as handle:
                    head = handle.read(before.active_bytes)
                tmp = self.path.with_name(f".{self.path.name}.rewind-{os.getpid()}")
                tmp.write_bytes(head)
                os.replace(tmp, self.path)
            elif self.path.exists():
                with open(self.path, "r+b") as handle:
                    handle.truncate(before.active_bytes)
            for name in new:
                now[name].unlink()
