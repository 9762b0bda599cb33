"""Layer 1: the authoritative transcript, append-only JSONL, one file per session.

Acknowledged appends are durable (written, flushed and fsync'd before ``append``
returns). A crash can leave at most a torn final line; opening the session for
writing moves those bytes to the quarantine and reports them. Complete lines that
break the schema are copied to the quarantine and reported by every read, never
dropped and never rewritten.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.authority import WriterFence
from lca.derived import derived_id, derived_message, derived_text
from lca.errors import LCAError, LinkRefusedError, RecordFormatError
from lca.fileio import append_bytes, exclusive_lock, fsync_dir, json_records, refuse_link, write_all
from lca.layout import SESSION_SUFFIX, StoreLayout
from lca.transcript_chain import ChainBook
from lca.transcript_foreign import decode_problem
from lca.types import (
    MAX_META_DEPTH,
    WIRE_VERSION,
    EntryKind,
    TranscriptEntry,
    canonical_json,
    entry_rule_problem,
    field_label,
    sha256_hex,
    wire_value_problem,
)

MAX_SESSION_FILE_NAME = 200
"""Bytes a session's file name (its id percent-quoted, plus ``.jsonl``) may take: file systems stop at
255, and a quarantined copy's name adds to it. A longer session id is refused when written."""

_QUARANTINE_STEM_CHARS = 160
_REQUIRED_STR = ("id", "session_id", "agent_id", "kind", "ts", "channel", "content", "hash")
_OPTIONAL_STR = ("parent_id", "author", "subagent_id")
_OPTIONAL_TOKEN = ("session_key",)  # left out when unset (a null is refused: the line hash would not say which)
_AGENT_KIND = EntryKind.ASSISTANT_TURN.value


class TranscriptConflictError(LCAError):
    """An entry id already acknowledged with different content: history is never rewritten."""


@dataclass(frozen=True)
class QuarantineRecord:
    """Bytes the transcript could not accept, kept with where they came from and why."""

    session_file: str
    offset: int
    line: int | None
    size: int
    reason: str
    sha256: str
    quarantine_file: str
    at: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class AppendResult:
    appended: tuple[TranscriptEntry, ...]
    duplicates: int


@dataclass(frozen=True)
class ReadResult:
    entries: tuple[TranscriptEntry, ...]
    malformed: tuple[QuarantineRecord, ...]
    end_offset: int


def entry_from_wire(obj: Any, *, path: str | None = None, line: int | None = None) -> TranscriptEntry:
    """Validate one decoded wire record; every problem names the file, line and field."""

    def fail(message: str, fld: str | None = None) -> RecordFormatError:
        return RecordFormatError(message, path=path, line=line, field=fld)

    if not isinstance(obj, dict):
        raise fail(f"expected a JSON object, got {type(obj).__name__}")
    version = obj.get("v")
    if type(version) is not int or version != WIRE_VERSION:  # true == 1 in Python; a bool is not a version
        raise fail(f"unsupported wire version {_shown(version)} (this reader knows {WIRE_VERSION})", "v")
    for name in _REQUIRED_STR:
        if name not in obj:
            raise fail("missing", name)
        if not isinstance(obj[name], str):
            raise fail(f"must be a string, got {type(obj[name]).__name__}", name)
    for name in _OPTIONAL_STR:
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise fail(f"must be a string or null, got {type(obj[name]).__name__}", name)
    for name in _OPTIONAL_TOKEN:
        if name in obj and not isinstance(obj[name], str):
            raise fail(f"must be a string when present (omit it when there is none), got {_shown(obj[name])}", name)
    for name, value in obj.items():
        # before any hashing: a lone surrogate (valid in a JSON escape, not in UTF-8) cannot be encoded
        problem = wire_value_problem(value, field_label(name), finite=False)
        if problem is not None:
            raise fail(problem[1], problem[0])
    if not obj["id"]:
        raise fail("must not be empty", "id")
    try:
        kind = EntryKind(obj["kind"])
    except ValueError:
        known = ", ".join(k.value for k in EntryKind)
        raise fail(f"unknown kind {_shown(obj['kind'])}; known: {known}", "kind") from None
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise fail("must be an object", "meta")
    unknown = set(obj) - set(_REQUIRED_STR) - set(_OPTIONAL_STR) - set(_OPTIONAL_TOKEN) - {"v", "meta"}
    if unknown:
        names = sorted(unknown)
        raise fail(f"unknown field(s) {[field_label(n) for n in names[:5]]}", field_label(names[0]))
    entry = TranscriptEntry(
        id=obj["id"],
        session_id=obj["session_id"],
        agent_id=obj["agent_id"],
        kind=kind,
        timestamp=obj["ts"],
        content=obj["content"],
        channel=obj["channel"],
        parent_id=obj.get("parent_id"),
        author=obj.get("author"),
        subagent_id=obj.get("subagent_id"),
        meta=meta,
        session_key=obj.get("session_key"),
    )
    check_entry(entry, path=path, line=line)
    try:
        computed = entry.content_hash
    except RecursionError:
        raise fail("nested too deeply to hash", "meta") from None
    if computed != obj["hash"]:
        raise fail(f"content hash mismatch: stored {obj['hash']}, computed {computed}", "hash")
    return entry


def _shown(value: Any) -> str:
    """A value for an error message: redacted before it is escaped and cut (either would hide a credential from the
    detector), escaped (no control or bidi characters reach a terminal) and short."""
    text = repr(derived_text(value) if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:60] + "..."


def check_entry(entry: TranscriptEntry, *, path: str | None = None, line: int | None = None) -> None:
    """Rules beyond field types (``lca.types.entry_rule_problem``): who spoke, and the session key's shape."""
    problem = entry_rule_problem(entry)
    if problem is not None:
        raise RecordFormatError(problem[1], path=path, line=line, field=problem[0])


def check_new_entry(
    entry: TranscriptEntry,
    *,
    path: str | None = None,
    line: int | None = None,
    max_bytes: int | None = None,
) -> None:
    """Rules for an entry about to be written (live or imported), beyond those every stored line meets.

    The session id must fit a file name (``MAX_SESSION_FILE_NAME``); every string must be Unicode text;
    numbers must be finite (a bare ``NaN`` line is no longer portable JSON); ``meta`` nests at most
    ``MAX_META_DEPTH`` levels; and, with ``max_bytes``, the entry's wire line is at most that many bytes.
    Lines already in a store are read without the last three rules: acknowledged history stays readable.
    """

    def fail(message: str, fld: str | None) -> RecordFormatError:
        return RecordFormatError(message, path=path, line=line, field=fld)

    check_entry(entry, path=path, line=line)
    fields = entry.hashed_fields()
    meta = fields.pop("meta")
    for name in _REQUIRED_STR + _OPTIONAL_STR:
        value = fields.get(name)
        if name in fields and not isinstance(value, str) and (value is not None or name in _REQUIRED_STR):
            raise fail(f"must be a string, got {type(value).__name__}", name)
        problem = wire_value_problem(value, name)
        if problem is not None:
            raise fail(problem[1], problem[0])
    if not isinstance(meta, dict):
        raise fail("must be an object", "meta")
    problem = wire_value_problem(meta, "meta", max_depth=MAX_META_DEPTH)
    if problem is not None:
        raise fail(problem[1], problem[0])
    if not entry.session_id:
        raise fail("must not be empty", "session_id")
    file_name = StoreLayout(".").session_file(entry.session_id).name
    if len(file_name) > MAX_SESSION_FILE_NAME:
        raise fail(
            f"too long: {len(entry.session_id)} characters, {len(file_name)} bytes as a file name "
            f"(at most {MAX_SESSION_FILE_NAME})",
            "session_id",
        )
    if max_bytes is not None:
        size = len(encode_entry(entry))
        if size > max_bytes:
            raise fail(f"entry is {size:,} bytes, over the bound of {max_bytes:,} bytes (max_entry_bytes)", "content")


def encode_entry(entry: TranscriptEntry) -> bytes:
    return (canonical_json(entry.to_wire()) + "\n").encode("utf-8")


@dataclass
class _SessionState:
    ids: dict[str, str] = field(default_factory=dict)  # entry id -> content hash
    scanned_to: int = 0


class TranscriptStore:
    """All sessions of one agent home: ``<root>/sessions/<session>.jsonl``, plus ``<root>/quarantine``.

    Every append holds the store's writer lock (``write.lock``; nested when this thread holds it already, as a
    ``Substrate`` write does) and checks the fencing epoch under it: a migration holds that lock from quiesce to
    bind, so a writer opened before it waits, then is refused; it is never acknowledged and left behind. A session
    file that is a symbolic link is neither read nor written (``lca.fileio.refuse_link``)."""

    def __init__(self, root: Path | str, *, lock_timeout: float = 600.0) -> None:
        self.root = Path(root)
        self.layout = StoreLayout(self.root)
        self.lock_timeout = lock_timeout
        self._chains = ChainBook(self.layout)  # each session file's running hash chain (lca.transcript_chain)
        self.sessions_dir = self.layout.sessions
        self.quarantine_dir = self.layout.quarantine
        self._state: dict[str, _SessionState] = {}
        self._fence = WriterFence(self.root)  # the epoch this writer holds (lca.authority)
        self._meta_cache: dict[str, tuple[int, dict[str, Mapping[str, Any]], dict[str, str]]] = {}
        self._agent_cache: dict[str, tuple[int, frozenset[str]]] = {}
        self._outline_paths: dict[str, str] = {}
        self._kind_cache: dict[tuple[str, EntryKind], tuple[tuple[int, int], tuple[TranscriptEntry, ...]]] = {}

    # ---- naming -----------------------------------------------------------------
    def session_path(self, session_id: str) -> Path:
        if not session_id:
            raise RecordFormatError("session id must not be empty", field="session_id")
        return self.layout.session_file(session_id)

    def session_ids(self) -> list[str]:
        """The sessions with a file of their own (a symbolic link is none: health reports it)."""
        if not self.sessions_dir.is_dir() or self.sessions_dir.is_symlink():
            return []
        paths = self.sessions_dir.glob("*" + SESSION_SUFFIX)
        return sorted(StoreLayout.session_id_of(p) for p in paths if p.is_file() and not p.is_symlink())

    # ---- writing ----------------------------------------------------------------
    def append(self, entries: Iterable[TranscriptEntry]) -> AppendResult:
        """Append entries, skipping ids already present with the same content.

        Entries are grouped per session; each group is written with one write and
        one fsync under an exclusive lock on the session file. Returns only after
        the bytes are durable.
        """
        by_session: dict[str, list[TranscriptEntry]] = {}
        for entry in entries:
            check_new_entry(entry)
            by_session.setdefault(entry.session_id, []).append(entry)
        appended: list[TranscriptEntry] = []
        duplicates = 0
        with self._writer_lock():
            for session_id, group in by_session.items():
                new, dup = self._append_session(session_id, group)
                appended.extend(new)
                duplicates += dup
        return AppendResult(tuple(appended), duplicates)

    def _writer_lock(self) -> AbstractContextManager[None]:
        return exclusive_lock(
            self.layout.write_lock, timeout=self.lock_timeout, what=f"store {self.root}", reentrant=True
        )

    def find_conflict(self, entries: Iterable[TranscriptEntry]) -> tuple[TranscriptEntry, str] | None:
        """The first entry ``append`` would refuse as a conflict, and where its id is already recorded
        (a session file, or earlier in ``entries``), without writing anything; None if there is none.

        Lets a caller that appends many sessions refuse the whole batch before its first byte is
        written. Holding the store's writer lock keeps the answer true until the append.
        """
        recorded: dict[str, dict[str, str]] = {}  # session id -> entry id -> hash, in its file
        pending: dict[tuple[str, str], tuple[str, str]] = {}
        for entry in entries:
            key = (entry.session_id, entry.id)
            if key not in pending:
                if entry.session_id not in recorded:
                    path = self.session_path(entry.session_id)
                    recorded[entry.session_id] = self._scan(entry.session_id, path).ids if path.exists() else {}
                known = recorded[entry.session_id].get(entry.id)
                if known is None:
                    pending[key] = (entry.content_hash, "earlier in the same import")
                    continue
                pending[key] = (known, f"session file {self.session_path(entry.session_id)}")
            known_hash, where = pending[key]
            if known_hash != entry.content_hash:
                return entry, where
        return None

    def _append_session(self, session_id: str, group: list[TranscriptEntry]) -> tuple[list[TranscriptEntry], int]:
        path = self.session_path(session_id)
        for where in (self.sessions_dir, path):
            refuse_link(where, f"nothing was appended to session {session_id!r}")
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        fd = _open_session(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if created:
                fsync_dir(self.sessions_dir)
            self._recover_torn_tail(path, fd)
            state = self._scan(session_id, path)
            new: list[TranscriptEntry] = []
            duplicates = 0
            for entry in group:
                known = state.ids.get(entry.id)
                if known is None:
                    state.ids[entry.id] = entry.content_hash
                    new.append(entry)
                elif known == entry.content_hash:
                    duplicates += 1
                else:
                    raise TranscriptConflictError(
                        f"{path}: entry '{entry.id}' is already recorded with different content "
                        f"({known}); acknowledged history is never rewritten"
                    )
            if new:  # under the session's lock: a migration that advanced the epoch has fenced this writer off
                self._fence.check(f"append {len(new)} entr{'y' if len(new) == 1 else 'ies'} to session {session_id}")
                data = b"".join(encode_entry(e) for e in new)
                before = os.fstat(fd)
                write_all(fd, data)
                os.fsync(fd)
                state.scanned_to += len(data)
                self._chains.appended(path, before, data, os.fstat(fd))
            return new, duplicates
        except BaseException:
            self._state.pop(session_id, None)
            raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _scan(self, session_id: str, path: Path) -> _SessionState:
        """Bring the id cache up to the file's end (other writers may have appended)."""
        state = self._state.setdefault(session_id, _SessionState())
        size = path.stat().st_size
        if size < state.scanned_to:  # only a torn-tail repair shrinks a file; rescan
            state = self._state[session_id] = _SessionState()
        if size > state.scanned_to:
            result = self._read_from(path, state.scanned_to, quarantine=True)
            for entry in result.entries:
                state.ids[entry.id] = entry.content_hash
            state.scanned_to = result.end_offset
        return state

    # ---- recovery ---------------------------------------------------------------
    def recover(self, session_id: str) -> QuarantineRecord | None:
        """Quarantine a torn final line of a session, if there is one, and record its hash chain up to its last
        line (``lca.transcript_chain``: a file changed in place is not recorded, health reports it)."""
        path = self.session_path(session_id)
        if not path.exists():
            return None
        with self._writer_lock():
            fd = _open_session(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                record = self._recover_torn_tail(path, fd)
                self._chains.refresh(path)
                return record
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def recover_all(self) -> list[QuarantineRecord]:
        return [r for s in self.session_ids() if (r := self.recover(s)) is not None]

    def _recover_torn_tail(self, path: Path, fd: int) -> QuarantineRecord | None:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        if os.pread(fd, 1, size - 1) == b"\n":
            return None
        # find the last newline; everything after it was never acknowledged
        pos = size
        block = 65536
        cut = 0
        while pos > 0:
            start = max(0, pos - block)
            data = os.pread(fd, pos - start, start)
            idx = data.rfind(b"\n")
            if idx >= 0:
                cut = start + idx + 1
                break
            pos = start
        torn = os.pread(fd, size - cut, cut)
        record = self._quarantine(
            path, cut, None, torn, "torn final line (no newline): an append interrupted before it was acknowledged"
        )
        os.ftruncate(fd, cut)
        os.fsync(fd)
        self._state.pop(StoreLayout.session_id_of(path), None)
        return record

    def _quarantine(self, path: Path, offset: int, line: int | None, data: bytes, reason: str) -> QuarantineRecord:
        """Keep rejected bytes verbatim; idempotent for the same bytes at the same place."""
        refuse_link(self.quarantine_dir, "nothing was quarantined")
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        digest = sha256_hex(data.decode("latin-1"))
        name = f"{derived_id(path.stem)[:_QUARANTINE_STEM_CHARS]}.{offset}.{digest[:12]}.bin"  # 255 bytes at most
        qfile = self.layout.quarantine_file(name)
        record = QuarantineRecord(
            session_file=derived_id(path.name),  # the log is derived: names as lca.derived makes them
            offset=offset,
            line=line,
            size=len(data),
            reason=derived_message(reason),
            sha256=digest,
            quarantine_file=name,
            at=time.time(),
        )
        if qfile.exists():
            return record
        fd = os.open(qfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        append_bytes(self.layout.quarantine_log, (canonical_json(record.to_dict()) + "\n").encode())
        fsync_dir(self.quarantine_dir)
        return record

    def quarantine_foreign(self, source: Path, line: int | None, data: bytes, reason: str) -> QuarantineRecord:
        """Keep a rejected line of an imported file, with where it came from."""
        return self._quarantine(Path(source), 0 if line is None else line, line, data, reason)

    def quarantine_records(self) -> list[QuarantineRecord]:
        log = self.layout.quarantine_log
        if not log.exists():
            return []
        out = []
        for raw in log.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                out.append(QuarantineRecord(**json.loads(raw)))
        return out

    # ---- reading ----------------------------------------------------------------
    def read(self, session_id: str, *, start: int = 0, end: int | None = None) -> ReadResult:
        """Entries from byte ``start`` to the last complete line (before ``end``, if given).

        Malformed lines are quarantined and reported in the result.
        """
        path = self.session_path(session_id)
        if not path.exists():
            raise LCAError(f"no such session '{session_id}' ({path})")
        return self._read_from(path, start, quarantine=True, end=end)

    def iter_entries(self) -> Iterator[TranscriptEntry]:
        for session_id in self.session_ids():
            yield from self.read(session_id).entries

    def entries_of_kind(self, kind: EntryKind) -> list[TranscriptEntry]:
        """Every entry of ``kind`` (the handoffs, say: a handful among thousands of turns), session by session.
        A session file is read again only when its size or time has changed (appends only grow it), so asking again
        costs a stat per session: the latest handoff is looked up at every session end and every context build."""
        out: list[TranscriptEntry] = []
        for session_id in self.session_ids():
            try:
                stat = self.session_path(session_id).stat()
            except FileNotFoundError:
                continue
            stamp = (stat.st_size, stat.st_mtime_ns)  # a rewrite to the same length still moves the time
            cached = self._kind_cache.get((session_id, kind))
            if cached is None or cached[0] != stamp:
                found = tuple(e for e in self.read(session_id).entries if e.kind is kind)
                cached = self._kind_cache[(session_id, kind)] = (stamp, found)
            out.extend(cached[1])
        return out

    def entry_meta(self, session_id: str, entry_id: str) -> Mapping[str, Any]:
        """An entry's ``meta`` (where it was said: visibility, project, role; an event it records), read once per
        session and kept while the session's file does not grow; ``{}`` for an unknown session or entry."""
        cached = self._session_outline(session_id)
        return cached[1].get(entry_id, {}) if cached else {}

    def reply_to(self, session_id: str, entry_id: str) -> str | None:
        """The entry that answers this turn: the next turn of its session where the other side speaks (an assistant
        after a user, a user after an assistant, another author in a conversation of several) and records no event
        of its own. None when the next entry is no such turn. Read with ``entry_meta``'s cache."""
        cached = self._session_outline(session_id)
        return cached[2].get(entry_id) if cached else None

    def agent_turns(self, session_id: str) -> frozenset[str]:
        """The session's assistant-turn ids, from each line's kind and id alone; kept while the file does not grow."""
        size, cached = self._file_size(session_id), self._agent_cache.get(session_id)
        if size is not None and (cached is None or cached[0] != size):
            records = json_records(self._outline_paths[session_id], size, holding=f'"{_AGENT_KIND}"'.encode())
            found = frozenset(str(w.get("id")) for w in records if isinstance(w, dict) and w.get("kind") == _AGENT_KIND)
            cached = self._agent_cache[session_id] = (size, found)
        return cached[1] if size is not None and cached is not None else frozenset()

    def _file_size(self, session_id: str) -> int | None:  # None: no such file; the quoted name is made once
        if (path := self._outline_paths.get(session_id)) is None:
            path = self._outline_paths[session_id] = str(self.session_path(session_id))
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def _session_outline(self, session_id: str) -> tuple[int, dict[str, Mapping[str, Any]], dict[str, str]] | None:
        if (size := self._file_size(session_id)) is None:
            return None
        cached = self._meta_cache.get(session_id)
        if cached is None or cached[0] != size:
            entries = self._read_from(Path(self._outline_paths[session_id]), 0, quarantine=False).entries
            turns = (EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN)
            replies = {  # a.id -> b.id where b is the other side's next turn and records no event
                a.id: b.id
                for a, b in zip(entries, entries[1:])
                if a.kind in turns
                and b.kind in turns
                and (a.kind, a.author) != (b.kind, b.author)
                and not (b.meta or {}).get("event")
            }
            cached = self._meta_cache[session_id] = (size, {e.id: e.meta for e in entries}, replies)
        return cached

    def _read_from(self, path: Path, start: int, *, quarantine: bool, end: int | None = None) -> ReadResult:
        entries: list[TranscriptEntry] = []
        malformed: list[QuarantineRecord] = []
        with os.fdopen(_open_session(path, os.O_RDONLY), "rb") as handle:
            if start:
                handle.seek(start)
            data = handle.read() if end is None else handle.read(max(0, end - start))
        end = data.rfind(b"\n") + 1  # a torn tail beyond the last newline is not read
        offset = start
        line_no = None if start else 0
        session_id = StoreLayout.session_id_of(path)
        for raw in data[:end].split(b"\n")[:-1]:
            if line_no is not None:
                line_no += 1
            line_start = offset
            offset += len(raw) + 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
                entry = entry_from_wire(obj, path=str(path), line=line_no)
                if entry.session_id != session_id:
                    raise RecordFormatError(
                        f"entry belongs to session '{entry.session_id}', file is '{session_id}'",
                        path=str(path),
                        line=line_no,
                        field="session_id",
                    )
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, RecordFormatError) as exc:
                reason = (
                    str(exc)
                    if isinstance(exc, RecordFormatError)
                    else (
                        f"{path}, line {line_no if line_no is not None else '?'} (byte {line_start}): "
                        f"{decode_problem(exc)}"
                    )
                )
                if quarantine:
                    malformed.append(self._quarantine(path, line_start, line_no, raw + b"\n", reason))
                continue
            entries.append(entry)
        return ReadResult(tuple(entries), tuple(malformed), start + end)


def _open_session(path: Path, flags: int) -> int:
    """A session file's descriptor, never through a symbolic link (swapped in after it was checked, too)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        refuse_link(path, "it was neither read nor written")
        raise LinkRefusedError(f"{path} is a symbolic link: the store never follows a link out of itself") from None
