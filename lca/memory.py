"""Layer 2: structured memory files, markdown with YAML front matter.

The loader validates every file against :class:`MemoryRecord` and reports each
file and field that failed by name; nothing is silently defaulted. All writes go
through :meth:`MemoryStore.write`, which keeps the usage counters (hits,
prevented mistakes, last applied) out of the content hash so counting use never
looks like an edit.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lca.authority import WriterFence
from lca.errors import ApprovalRequired, LCAError, RecordFormatError
from lca.fileio import atomic_write_bytes, refuse_link
from lca.layout import StoreLayout
from lca.types import canonical_json

COUNTER_FIELDS = ("hits", "prevented_mistakes", "last_applied")
# Fields added after the first file format: left out of the content hash while empty, so files
# written before they existed keep their hash (and are not reported as hand-edited).
LATER_FIELDS = ("roles", "conflicts", "schemas", "approved_by")
# Procedural memory: how the agent acts. Writing it needs a named approver (the approval gate).
PROCEDURAL_TYPES = frozenset({"procedure", "runbook", "identity"})
_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# The largest memory file the loader reads: a memory is a fact, a lesson or a runbook, and a 2.3 MB one took 205 s
# and 1.5 GB to index. A larger file is not loaded; it is a failure naming its size, which health and ingest report.
MAX_MEMORY_FILE_BYTES = 256 * 1024


class MemoryType(str, Enum):
    FACT = "fact"
    DECISION = "decision"
    LESSON = "lesson"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"
    RUNBOOK = "runbook"
    FAILURE = "failure"
    CHECKPOINT = "checkpoint"
    IDENTITY = "identity"
    SUMMARY = "summary"


class Privacy(str, Enum):
    PUBLIC = "public"
    PRIVATE = "private"
    SECRET = "secret"


class Authority(str, Enum):
    """Who stands behind a memory: approved outranks reviewed outranks unreviewed."""

    APPROVED = "approved"
    REVIEWED = "reviewed"
    UNREVIEWED = "unreviewed"
    INFERRED = "inferred"


class TranscriptSpan(BaseModel):
    """A pointer into the authoritative transcript: a session and entry ids or a span of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session: str = Field(min_length=1)
    entries: tuple[str, ...] = ()
    first: str | None = None
    last: str | None = None

    @model_validator(mode="after")
    def _points_somewhere(self) -> TranscriptSpan:
        if not self.entries and not (self.first and self.last):
            raise ValueError("a source names entry ids or a first/last span")
        return self


class Supersession(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    reason: str = Field(min_length=1)


class Conflict(BaseModel):
    """An unresolved contradiction the verifier found with another memory; recall penalizes it (K)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    reason: str = Field(min_length=1)


class SchemaRef(BaseModel):
    """A learned schema (and its version) that was active when this memory was written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    version: int = Field(ge=1)


class MemoryRecord(BaseModel):
    """The front matter of one memory file."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)

    id: str
    type: MemoryType
    tags: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    created: datetime
    last_applied: datetime | None = None
    hits: int = Field(default=0, ge=0)
    prevented_mistakes: int = Field(default=0, ge=0)
    authority: Authority
    privacy: Privacy
    critical: bool = False
    supersedes: tuple[Supersession, ...] = ()
    superseded_by: Supersession | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    sources: tuple[TranscriptSpan, ...] = ()
    roles: tuple[str, ...] = ()  # roles whose authority covers this memory; empty: every role
    conflicts: tuple[Conflict, ...] = ()  # unresolved contradictions, set by the verification stage
    schemas: tuple[SchemaRef, ...] = ()  # learned schemas active when it was written
    approved_by: str | None = None  # the named approver of a procedural write
    content_hash: str | None = None

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ID_PATTERN.match(value):
            raise ValueError("must start with a letter or digit and hold only letters, digits, . _ : -")
        return value

    @field_validator("created", "last_applied", "valid_from", "valid_to", mode="before")
    @classmethod
    def _dates(cls, value: Any) -> Any:
        if isinstance(value, date) and not isinstance(value, datetime):
            return datetime(value.year, value.month, value.day)
        return value

    @model_validator(mode="after")
    def _interval(self) -> MemoryRecord:
        if self.valid_from and self.valid_to and self.valid_to < self.valid_from:
            raise ValueError("valid_to is before valid_from")
        return self


@dataclass(frozen=True)
class MemoryFile:
    record: MemoryRecord
    body: str
    path: Path

    @property
    def text(self) -> str:
        return self.body

    @property
    def computed_hash(self) -> str:
        return memory_content_hash(self.record, self.body)


@dataclass(frozen=True)
class MemoryLoadFailure:
    path: str
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: field '{self.field}'" if self.field else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class MemoryLoadResult:
    files: tuple[MemoryFile, ...]
    failures: tuple[MemoryLoadFailure, ...]
    drifted: tuple[str, ...]  # files edited outside the write API (stored hash != content)


def memory_content_hash(record: MemoryRecord, body: str) -> str:
    """Hash of what a memory says, excluding its usage counters and the hash itself."""
    data = record.model_dump(mode="json", exclude={*COUNTER_FIELDS, "content_hash"})
    for name in LATER_FIELDS:
        if not data.get(name):
            data.pop(name, None)
    return "sha256:" + hashlib.sha256(canonical_json({"front": data, "body": body}).encode()).hexdigest()


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster, same rules
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


def parse_memory_text(text: str, *, path: str) -> tuple[MemoryRecord, str]:
    """Split and validate one memory file; raise RecordFormatError naming the field."""
    match = _FRONT.match(text)
    if not match:
        raise RecordFormatError(
            "no YAML front matter (the file must start with '---' and close it with '---')", path=path
        )
    try:
        front = yaml.load(match.group(1), Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        raise RecordFormatError(
            f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", path=path, line=line
        ) from None
    if not isinstance(front, dict):
        raise RecordFormatError("front matter must be a mapping of fields", path=path)
    try:
        record = MemoryRecord.model_validate(front)
    except ValidationError as exc:
        raise RecordFormatError.from_validation(exc, path=path) from None
    body = match.group(2)
    return record, body


def render_memory(record: MemoryRecord, body: str) -> str:
    front = record.model_dump(mode="json", exclude_none=True)
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body


def not_a_memory_file(path: Path) -> str | None:
    """Why the loader does not read ``path`` (a symbolic link, which it never follows out of the store; a folder or
    other non-file named ``*.md``; a file over ``MAX_MEMORY_FILE_BYTES``), or None for a file it reads."""
    try:
        found = os.lstat(path)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or type(exc).__name__}"
    if stat.S_ISLNK(found.st_mode):
        return "a symbolic link: the store never follows a link out of itself, so it is not loaded or indexed"
    if stat.S_ISDIR(found.st_mode):
        return "a folder named like a memory file, not a memory file: not loaded"
    if not stat.S_ISREG(found.st_mode):
        return "not a regular file: not loaded"
    if found.st_size > MAX_MEMORY_FILE_BYTES:
        return (
            f"{found.st_size:,} bytes, over the bound of {MAX_MEMORY_FILE_BYTES:,} bytes for a memory file "
            "(MAX_MEMORY_FILE_BYTES): not loaded or indexed; split it into smaller memories"
        )
    return None


class MemoryStore:
    """Memory files under ``<root>/memory``; one file per memory, named by id."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.layout = StoreLayout(self.root)
        self.dir = self.layout.memory
        self._fence = WriterFence(self.root)  # memory is authoritative state: only the active copy writes it

    def path_for(self, memory_id: str) -> Path:
        return self.layout.memory_file(memory_id)

    def load(self) -> MemoryLoadResult:
        """Every memory file, validated. Two files claiming one id: the file the write API names for that
        id (``<id>.md``) holds it whatever sorts first, and the other is the failure, named; with no such
        file, the first in path order holds it."""
        parsed: list[MemoryFile] = []
        failures: list[MemoryLoadFailure] = []
        drifted: list[str] = []
        if self.dir.is_symlink():  # the whole folder elsewhere: none of it is the store's
            return MemoryLoadResult(
                (), (MemoryLoadFailure(str(self.dir), None, not_a_memory_file(self.dir) or ""),), ()
            )
        if not self.dir.exists():
            return MemoryLoadResult((), (), ())
        for path in sorted(self.dir.rglob("*.md")):
            refused = not_a_memory_file(path)
            if refused:
                failures.append(MemoryLoadFailure(str(path), None, refused))
                continue
            try:
                text = path.read_text(encoding="utf-8")
                record, body = parse_memory_text(text, path=str(path))
            except UnicodeDecodeError as exc:
                failures.append(MemoryLoadFailure(str(path), None, f"not UTF-8: {exc}"))
                continue
            except RecordFormatError as exc:
                failures.append(MemoryLoadFailure(str(path), exc.field, exc.reason))
                continue
            parsed.append(MemoryFile(record, body, path))
        holders: dict[str, MemoryFile] = {}
        for loaded in parsed:
            held = holders.get(loaded.record.id)
            if held is None or (loaded.path == self.path_for(loaded.record.id) != held.path):
                holders[loaded.record.id] = loaded
        files: list[MemoryFile] = []
        for loaded in parsed:
            holder = holders[loaded.record.id]
            if loaded is not holder:
                failures.append(
                    MemoryLoadFailure(
                        str(loaded.path),
                        "id",
                        f"duplicate id '{loaded.record.id}' ({holder.path} holds it)",
                    )
                )
                continue
            if loaded.record.content_hash is not None and loaded.record.content_hash != loaded.computed_hash:
                drifted.append(str(loaded.path))
            files.append(loaded)
        return MemoryLoadResult(tuple(files), tuple(failures), tuple(drifted))

    def get(self, memory_id: str) -> MemoryFile:
        path = self.path_for(memory_id)
        refuse_link(path, f"memory '{memory_id}' was not read")
        if not path.exists():
            raise LCAError(f"no memory '{memory_id}' ({path})")
        refused = not_a_memory_file(path)
        if refused:
            raise LCAError(f"{path}: {refused}")
        record, body = parse_memory_text(path.read_text(encoding="utf-8"), path=str(path))
        return MemoryFile(record, body, path)

    def write(self, record: MemoryRecord, body: str, *, approver: str | None = None) -> MemoryFile:
        """The one write path: stamps the content hash and replaces the file atomically.

        The approval gate lives here so no caller can skip it: a procedural memory (procedure,
        runbook, identity) whose content changes needs a named ``approver``, recorded in
        ``approved_by``; without one this raises ApprovalRequired (callers hold a proposal).
        """
        if record.type.value in PROCEDURAL_TYPES:
            if approver is not None and approver.strip():
                record = record.model_copy(update={"approved_by": approver.strip()})
            else:
                current = self._existing(record.id)
                unchanged = (
                    current is not None
                    and current.record.approved_by is not None
                    and memory_content_hash(current.record, current.body) == memory_content_hash(record, body)
                )
                if not unchanged:
                    raise ApprovalRequired(
                        f"memory '{record.id}' is procedural ({record.type.value}): writing it needs a named approver"
                    )
        return self._write(record, body)

    def _existing(self, memory_id: str) -> MemoryFile | None:
        try:
            return self.get(memory_id)
        except (LCAError, UnicodeDecodeError):
            return None

    def _write(self, record: MemoryRecord, body: str) -> MemoryFile:
        self._fence.check(f"write memory '{record.id}'")
        stamped = record.model_copy(update={"content_hash": memory_content_hash(record, body)})
        path = self.path_for(stamped.id)
        atomic_write_bytes(path, render_memory(stamped, body).encode("utf-8"))
        return MemoryFile(stamped, body, path)

    def record_use(
        self, memory_id: str, *, hits: int = 0, prevented_mistakes: int = 0, applied_at: datetime | None = None
    ) -> MemoryFile:
        """Bump usage counters; the content hash does not change."""
        current = self.get(memory_id)
        self._fence.check(f"count the use of memory '{memory_id}'")
        updated = current.record.model_copy(
            update={
                "hits": current.record.hits + hits,
                "prevented_mistakes": current.record.prevented_mistakes + prevented_mistakes,
                "last_applied": applied_at or current.record.last_applied,
            }
        )
        # counters are not content: no approval needed, and the stored hash is kept as it is (not
        # restamped), so a file edited by hand stays reported as drift after its use is counted
        atomic_write_bytes(current.path, render_memory(updated, current.body).encode("utf-8"))
        return MemoryFile(updated, current.body, current.path)
