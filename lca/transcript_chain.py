"""A running hash chain over each session file, so a line changed, swapped, inserted or removed in place is seen.

Every line of a transcript carries the hash of its own content, so a line that was edited is caught on read; two
lines swapped, or one taken out, are not: each line is still sound. The chain catches those. Its value after a
line is the SHA-256 of the value before it and the line's bytes (newline included), starting from ``CHAIN_SEED``;
the value after a file's last complete line stands for the whole file in order.

The chain state of a session file (how many bytes and lines it covers, its value, and the file's inode, size and
times when it was recorded) is a derived file, ``index/chains/<session file>.json``: the wire format is unchanged.
Writers keep it current: an append extends it over the lines it wrote when the file was as recorded before the
append (``ChainBook.appended``), and ``lca ingest`` verifies and records every session (``ChainBook.refresh``).
Health only verifies (``chain_check``), and incrementally: a file whose inode, size and times are those recorded
was not written since, and is not read; any other is hashed again up to the bytes its state covers. ``lca reindex``
deletes the states with the rest of the index, and the ingest it runs records the files as they are then: after
a reported change has been reviewed, that is how the chain is started again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lca.derived import derived_file_name
from lca.fileio import write_all
from lca.layout import StoreLayout
from lca.types import HealthCheck, HealthStatus

CHAIN_SEED = hashlib.sha256(b"lca transcript chain v1").hexdigest()
Stamp = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns: a write to the file moves at least one
# A state saved this soon after the file's last write is not trusted by its stamp alone: a second write in the same
# tick of the file system's clock gives the same stamp, so the file is read (as git does with a racily clean index
# entry); the next ingest records it again, later, and from then on it is trusted. A tick is at most 10 ms where
# times carry nanoseconds (a kernel's coarse clock), a second or two where they fall on whole seconds.
RACY_NS = 2_000_000_000
FINE_RACY_NS = 20_000_000


@dataclass(frozen=True)
class ChainState:
    """The chain over a session file's first ``covered`` bytes (``lines`` complete lines) and the file's stamp
    when it was recorded."""

    covered: int
    lines: int
    chain: str
    stamp: Stamp
    saved_ns: int = 0  # when the state was saved (wall clock, ns)

    def to_json(self) -> bytes:
        return json.dumps({**asdict(self), "stamp": list(self.stamp)}, sort_keys=True).encode()

    def vouches_for(self, stat: os.stat_result) -> bool:
        """Whether the file is as recorded without reading it: the same stamp, saved well after its last write."""
        window = RACY_NS if stat.st_mtime_ns % 1_000_000_000 == 0 else FINE_RACY_NS
        return self.stamp == stamp_of(stat) and self.saved_ns - max(stat.st_mtime_ns, stat.st_ctime_ns) > window


@dataclass(frozen=True)
class ChainVerdict:
    """What a session file holds against its recorded chain: ``problem`` when its recorded lines changed;
    ``state``, the chain over every complete line it holds now (None when it has no record, or a problem)."""

    problem: str | None
    recorded: bool
    state: ChainState | None
    unchanged: bool = False  # the file's stamp is the recorded one: nothing was read


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def extend(chain: str, lines: Iterable[bytes]) -> tuple[str, int]:
    """The chain after ``lines`` (each a complete line, newline included), and how many there were."""
    count = 0
    for line in lines:
        chain = hashlib.sha256(bytes.fromhex(chain) + line).hexdigest()
        count += 1
    return chain, count


class ChainBook:
    """The chain states of one store's session files (``index/chains``)."""

    def __init__(self, layout: StoreLayout) -> None:
        self.dir = layout.index / "chains"

    def path_for(self, session_file: Path) -> Path:
        return self.dir / f"{derived_file_name(session_file.name)}.json"  # derived: no credential a session id holds

    def load(self, session_file: Path) -> ChainState | None:
        """The recorded state, or None (none recorded, or unreadable: it is derived, and recorded again)."""
        try:
            data = json.loads(self.path_for(session_file).read_bytes())
            inode, size, mtime, ctime = (int(v) for v in data["stamp"])
            stamp = (inode, size, mtime, ctime)
            return ChainState(
                int(data["covered"]), int(data["lines"]), str(data["chain"]), stamp, int(data.get("saved_ns", 0))
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, session_file: Path, state: ChainState) -> None:
        """Replace the state by rename (not fsync'd: it is derived, and a lost one is recorded again)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path_for(session_file)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, replace(state, saved_ns=time.time_ns()).to_json())
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def appended(self, session_file: Path, before: os.stat_result, data: bytes, after: os.stat_result) -> None:
        """Extend the chain over the lines one append wrote (``data``), under the session's lock: only when the
        file was as recorded before it, or new. Otherwise another hand wrote it since; ``refresh`` verifies it."""
        state = self.load(session_file)
        if state is None and before.st_size == 0:
            state = ChainState(0, 0, CHAIN_SEED, stamp_of(before))
        if state is None or state.stamp != stamp_of(before) or state.covered != before.st_size:
            return
        chain, lines = extend(state.chain, data.splitlines(keepends=True))
        self.save(session_file, ChainState(after.st_size, state.lines + lines, chain, stamp_of(after)))

    def verify(self, session_file: Path) -> ChainVerdict:
        """The file against its recorded chain, reading it only when its stamp moved since it was recorded."""
        recorded = self.load(session_file)
        with open(session_file, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if recorded is not None and recorded.vouches_for(stat):
                return ChainVerdict(None, True, recorded, unchanged=True)
            chain, lines, covered = CHAIN_SEED, 0, 0
            pending = recorded  # the recorded part, until the file's lines have been held against it
            for line in handle:
                if not line.endswith(b"\n"):
                    break  # a torn tail is not a line yet
                if pending is not None and covered + len(line) > pending.covered:
                    if (covered, chain, lines) != (pending.covered, pending.chain, pending.lines):
                        return ChainVerdict(_changed(session_file, pending), True, None)
                    pending = None  # the recorded part holds: the rest only extends it
                chain, _ = extend(chain, (line,))
                lines, covered = lines + 1, covered + len(line)
            if pending is not None and (covered, chain, lines) != (pending.covered, pending.chain, pending.lines):
                return ChainVerdict(_changed(session_file, pending, size=stat.st_size), True, None)
        return ChainVerdict(None, recorded is not None, ChainState(covered, lines, chain, stamp_of(stat)))

    def refresh(self, session_file: Path) -> str | None:
        """Verify the file and record its chain up to its last complete line; a changed file is not recorded (its
        problem is returned, and health reports it until ``lca reindex`` starts the chain again)."""
        verdict = self.verify(session_file)
        if verdict.state is not None and not verdict.unchanged:
            self.save(session_file, verdict.state)
        return verdict.problem


def _changed(session_file: Path, recorded: ChainState, *, size: int | None = None) -> str:
    if size is not None and size < recorded.covered:
        return (
            f"{session_file}: holds {size} bytes, fewer than the {recorded.covered} bytes ({recorded.lines} lines) "
            "recorded in its hash chain: lines were removed"
        )
    return (
        f"{session_file}: its first {recorded.covered} bytes ({recorded.lines} lines) no longer match the hash chain "
        "recorded when they were written: a line was changed, swapped, inserted or removed in place"
    )


def chain_check(layout: StoreLayout, session_files: Iterable[Path]) -> HealthCheck:
    """Health's check of every session file against its recorded chain (reading only files written since)."""
    book = ChainBook(layout)
    problems: list[str] = []
    unrecorded: list[str] = []
    read = 0
    files = 0
    for session_file in session_files:
        files += 1
        verdict = book.verify(session_file)
        read += 0 if verdict.unchanged else 1
        if verdict.problem:
            problems.append(verdict.problem)
        elif not verdict.recorded:
            unrecorded.append(session_file.name)
    data = {"files": files, "read": read, "changed": problems, "unrecorded": unrecorded}
    if problems:
        detail = (
            f"{len(problems)} session file(s) changed in place: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; acknowledged history is never rewritten: restore the file, or review it and run `lca reindex`"
        )
        return HealthCheck("transcript_chain", HealthStatus.FAIL, detail, data)
    detail = f"{files - len(unrecorded)} session file(s) match their hash chain ({read} read since last recorded)"
    if unrecorded:
        detail += f"; {len(unrecorded)} not recorded yet (the next `lca ingest` records them)"
    return HealthCheck("transcript_chain", HealthStatus.OK, detail, data)
