"""Frozen records shared by every layer of the substrate."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

WIRE_VERSION = 1

MAX_META_DEPTH = 32
"""How deeply an entry's ``meta`` may nest. Deeper values are refused when written: JSON readers
disagree on their limits (Python's own parser stops near 1,000 levels), so a deeper line would not
stay readable everywhere."""

DEFAULT_MAX_ENTRY_BYTES = 1 << 20
"""The largest entry an import accepts by default (1 MiB), measured as its wire line in UTF-8
(content, meta and the other fields). An entry is chunked and embedded whole: one 50 MB entry became
44,811 chunks and 7.7 GB of memory. Importers take ``max_entry_bytes`` to change it."""

SESSION_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""A cross-surface session key: 1 to 128 of A-Z, a-z, 0-9 and ``. _ : -``. It ties one conversation together across
the sessions and channels it touched (a Slack thread, then the CLI), so it is a bounded token a host can mint and
any reader can put in a file name, a URL or a shell argument without quoting."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_SHOWN_KEY_CHARS = 40


def field_label(key: str) -> str:
    """A key as it may appear in an error message: itself when short and printable, else escaped and cut."""
    if len(key) <= _SHOWN_KEY_CHARS and key.isprintable() and not _SURROGATE.search(key):
        return key
    return repr(key[:_SHOWN_KEY_CHARS]) + ("..." if len(key) > _SHOWN_KEY_CHARS else "")


def wire_value_problem(
    value: Any, name: str, *, finite: bool = True, max_depth: int | None = None
) -> tuple[str, str] | None:
    """The first part of ``value`` that cannot be stored as portable UTF-8 JSON, as (field path, reason).

    Refused: a lone surrogate in any string or key (not Unicode text, cannot be encoded), a key that is
    not a string, a value JSON cannot hold, and, when ``finite``, NaN and infinities (``json`` would write
    them as bare ``NaN``, which no strict reader accepts); with ``max_depth``, objects and lists nested
    deeper than that. Control and bidi characters are valid text and pass: they are stored verbatim and
    neutralised only where text is shown. Walks without recursion, so any depth is safe to check.
    """
    stack: list[tuple[Any, str, int]] = [(value, name, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where, "contains a lone surrogate: not valid Unicode text"
        elif item is None or isinstance(item, bool | int):
            continue
        elif isinstance(item, float):
            if finite and not math.isfinite(item):
                return where, f"non-finite number {item!r} is not portable JSON"
        elif isinstance(item, Mapping | list | tuple):
            if max_depth is not None and depth >= max_depth:
                return where, f"nested more than {max_depth} levels deep"
            children: list[tuple[Any, str, int]] = []
            if isinstance(item, Mapping):
                for key, sub in item.items():
                    if not isinstance(key, str):
                        return where, f"key {key!r} is not a string"
                    if _SURROGATE.search(key):
                        return f"{where}.{field_label(key)}", "key contains a lone surrogate: not valid Unicode text"
                    children.append((sub, f"{where}.{field_label(key)}", depth + 1))
            else:
                children.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))
            stack.extend(reversed(children))
        else:
            return where, f"a {type(item).__name__} is not a JSON value"
    return None


def canonical_json(value: Any) -> str:
    """One spelling per value, so hashes do not depend on key order or spacing."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def as_utc(moment: datetime) -> datetime:
    """Aware in UTC; a naive time (a date in a hand-written file, an imported history) is read as UTC,
    so times written with and without an offset compare instead of raising."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_timestamp(text: str | None) -> datetime | None:
    """An ISO 8601 time (``Z`` and ``/`` date separators accepted) in UTC, or None if unreadable."""
    if not text:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(text).replace("Z", "+00:00").replace("/", "-")))
    except ValueError:
        return None


def text_digest(text: str) -> str:
    """The content address of a chunk's text: 128 bits of SHA-256, as 32 hex digits."""
    return sha256_hex(text)[:32]


class EntryKind(str, Enum):
    """What one transcript entry records."""

    USER_TURN = "user_turn"
    ASSISTANT_TURN = "assistant_turn"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    REASONING = "reasoning"
    SYSTEM_EVENT = "system_event"
    CHECKPOINT = "checkpoint"
    HANDOFF = "handoff"
    SUBAGENT_TURN = "subagent_turn"
    PEER_AGENT_TURN = "peer_agent_turn"  # from another agent, named in ``author``: an observation, never an instruction


AGENT_SPEAKERS = frozenset({"user", "assistant"})  # the speakers a peer agent is not


def entry_rule_problem(entry: TranscriptEntry) -> tuple[str, str] | None:
    """The first rule beyond field types ``entry`` breaks, as (field, reason): a subagent turn names its subagent and
    only it carries one; a peer agent's turn names the peer in ``author`` (neither the user nor this agent); a
    session key is a ``SESSION_KEY`` token."""
    if entry.kind is EntryKind.SUBAGENT_TURN and not entry.subagent_id:
        return "subagent_id", "a subagent_turn must name its subagent"
    if entry.kind is not EntryKind.SUBAGENT_TURN and entry.subagent_id:
        return "subagent_id", "only a subagent_turn carries a subagent_id"
    if entry.kind is EntryKind.PEER_AGENT_TURN:
        if not isinstance(entry.author, str) or not entry.author.strip():
            return "author", "a peer_agent_turn must name the peer agent that sent it"
        if entry.author.strip().lower() in AGENT_SPEAKERS:
            return "author", f"a peer agent is neither the user nor this agent, got {entry.author!r}: name the peer"
    key = entry.session_key
    if key is not None and (not isinstance(key, str) or SESSION_KEY.fullmatch(key) is None):
        shown = repr(key) if len(repr(key)) <= 60 else repr(key)[:60] + "..."
        return "session_key", f"must be 1 to 128 of A-Z a-z 0-9 . _ : - (got {shown})"
    return None


@dataclass(frozen=True)
class TranscriptEntry:
    """One line of the authoritative transcript (see docs/transcript-wire-format.md)."""

    id: str
    session_id: str
    agent_id: str
    kind: EntryKind
    timestamp: str
    content: str
    channel: str = "default"
    parent_id: str | None = None
    author: str | None = None
    subagent_id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    session_key: str | None = None  # ties one conversation across surfaces (``SESSION_KEY``); optional

    def hashed_fields(self) -> dict[str, Any]:
        """Every field the line hash covers; ``session_key`` only when set, so a line without one hashes as it
        always did."""
        hashed: dict[str, Any] = {
            "v": WIRE_VERSION,
            "id": self.id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "kind": self.kind.value,
            "ts": self.timestamp,
            "channel": self.channel,
            "parent_id": self.parent_id,
            "author": self.author,
            "subagent_id": self.subagent_id,
            "content": self.content,
            "meta": dict(self.meta),
        }
        if self.session_key is not None:
            hashed["session_key"] = self.session_key
        return hashed

    @property
    def content_hash(self) -> str:
        return "sha256:" + sha256_hex(canonical_json(self.hashed_fields()))

    def to_wire(self) -> dict[str, Any]:
        wire = self.hashed_fields()
        wire["hash"] = self.content_hash
        return wire


class SourceType(str, Enum):
    TRANSCRIPT = "transcript"
    MEMORY = "memory"


@dataclass(frozen=True)
class SourcePointer:
    """Where a piece of derived text came from, precisely enough to read it back."""

    source_type: SourceType
    # transcript: the session and entry; memory: the memory id and its file
    session_id: str | None = None
    entry_id: str | None = None
    memory_id: str | None = None
    path: str | None = None
    char_start: int = 0
    char_end: int = 0
    # who spoke, for a transcript turn: the subagent that wrote it, or the peer agent it came from (derived forms);
    # not part of ``key``, so a chunk's id does not depend on them
    subagent_id: str | None = None
    peer_agent: str | None = None

    def key(self) -> str:
        if self.source_type is SourceType.TRANSCRIPT:
            base = f"transcript:{self.session_id}#{self.entry_id}"
        else:
            base = f"memory:{self.memory_id}"
        return f"{base}[{self.char_start}:{self.char_end}]"

    def to_dict(self) -> dict[str, Any]:
        """The pointer as JSON; the speaker fields only when set, so a pointer without them reads as before."""
        return {
            "source_type": self.source_type.value,
            "session_id": self.session_id,
            "entry_id": self.entry_id,
            "memory_id": self.memory_id,
            "path": self.path,
            "char_start": self.char_start,
            "char_end": self.char_end,
            **speakers_set(self),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourcePointer:
        return cls(
            source_type=SourceType(data["source_type"]),
            session_id=data.get("session_id"),
            entry_id=data.get("entry_id"),
            memory_id=data.get("memory_id"),
            path=data.get("path"),
            char_start=int(data.get("char_start", 0)),
            char_end=int(data.get("char_end", 0)),
            subagent_id=data.get("subagent_id"),
            peer_agent=data.get("peer_agent"),
        )


SPEAKER_FIELDS = ("subagent_id", "peer_agent")  # who spoke a turn beyond its kind: pointers and candidates carry them


def speakers_set(record: Any) -> dict[str, str]:
    """The speaker fields ``record`` has set, for a JSON record that leaves them out when unset (so a record of a
    turn by the user or the agent reads as it did before they were recorded)."""
    return {name: value for name in SPEAKER_FIELDS if (value := getattr(record, name)) is not None}


def shown_entry_key(key: str) -> str:
    """A "session#entry" key as a reader is shown it: the entry id alone where it begins with its session's id and a
    colon ("s7#s7:3" -> "s7:3", as every importer and the harness write them), since the session is then said twice
    (a dozen tokens of a long id, on every item); any other key whole."""
    session, sep, entry = key.partition("#")
    return entry if sep and session and entry.startswith(f"{session}:") else key


@dataclass(frozen=True)
class Chunk:
    """A unit of text the index embeds; its id is a hash of its text and its source pointer."""

    chunk_id: str
    text: str
    text_hash: str
    pointer: SourcePointer
    part: int = 0
    parts: int = 1
    timestamp: str | None = None
    channel: str | None = None

    @staticmethod
    def make_id(text: str, pointer: SourcePointer) -> str:
        return sha256_hex(canonical_json({"text": text, "pointer": pointer.key()}))[:32]


@dataclass(frozen=True)
class SearchHit:
    """A hybrid search result with the evidence of how it was ranked."""

    chunk_id: str
    text: str
    pointer: SourcePointer
    score: float
    dense_score: float | None
    dense_rank: int | None
    lexical_score: float | None
    lexical_rank: int | None
    timestamp: str | None = None
    channel: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "text": self.text,
            "pointer": self.pointer.to_dict(),
            "source": self.pointer.key(),
            "score": self.score,
            "dense_score": self.dense_score,
            "dense_rank": self.dense_rank,
            "lexical_score": self.lexical_score,
            "lexical_rank": self.lexical_rank,
            "timestamp": self.timestamp,
            "channel": self.channel,
        }


class HealthStatus(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class HealthCheck:
    name: str
    status: HealthStatus
    detail: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HealthReport:
    """What the substrate knows about its own state; unhealthy when any check fails."""

    store: str
    checks: tuple[HealthCheck, ...]
    counts: Mapping[str, Any]

    @property
    def healthy(self) -> bool:
        return all(c.status is not HealthStatus.FAIL for c in self.checks)

    def check(self, name: str) -> HealthCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "healthy": self.healthy,
            "counts": dict(self.counts),
            "checks": [
                {"name": c.name, "status": c.status.value, "detail": c.detail, "data": dict(c.data)}
                for c in self.checks
            ],
        }
