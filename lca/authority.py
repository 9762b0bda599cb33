"""Who may write authoritative history: one writer per agent, fenced by an epoch.

A store's ``authority.json`` names the agent, the current fencing epoch and the store's state. ``active``: this
store is the agent's authoritative continuation and writers may append. ``transferred``: the agent moved on
(a migration handed authority to another store at a higher epoch), ``replica``: a copy that never held
authority. A writer holds the epoch it found when it first wrote (or opened a store that had a record); every
append checks, under the session file's lock, that the store is still active at that epoch, so once a
migration has advanced the epoch, a writer that started before it is refused, the refusal is logged
(``logs/fencing.jsonl``) and nothing it attempted enters history. A store without a record is given one
(epoch 1, active) by its first append.

Copying a store, or a bundle of it, does not copy authority: a bundle carries no authority record, and
``lca.bundle`` imports a copy as a read-only replica or as a new agent with recorded descent unless the
source transfers authority to it (the migration protocol).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes, atomic_write_bytes
from lca.layout import StoreLayout

STATES = ("active", "transferred", "replica")


class FencedWriteError(LCAError):
    """An append by a writer whose authority is gone: a stale epoch, or a store that is not the active copy."""


@dataclass(frozen=True)
class AuthorityRecord:
    """The agent a store belongs to, the fencing epoch, and whether this store may write authoritative history."""

    agent_id: str
    epoch: int
    state: str = "active"
    since: str = ""  # when this epoch began (UTC, ISO 8601)
    reason: str = ""  # why: created, migration to/from a store, replica of a bundle, new agent
    descent: tuple[str, ...] = ()  # the agents and bundles this one descends from, oldest first
    successor: str | None = None  # transferred: where authority went (a store path or bundle id)

    def __post_init__(self) -> None:
        if not isinstance(self.agent_id, str) or not self.agent_id.strip():
            raise RecordFormatError("must be a non-empty string", field="agent_id")
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 1:
            raise RecordFormatError(f"must be an integer >= 1, got {self.epoch!r}", field="epoch")
        if self.state not in STATES:
            raise RecordFormatError(f"unknown state {self.state!r}; known: {', '.join(STATES)}", field="state")

    @property
    def writable(self) -> bool:
        return self.state == "active"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["descent"] = list(self.descent)
        return data

    @classmethod
    def from_dict(cls, data: Any, *, path: Path | None = None) -> AuthorityRecord:
        if not isinstance(data, dict):
            raise RecordFormatError(f"{path}: expected an object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RecordFormatError(f"{path}: unknown field(s) {', '.join(unknown)}", field=unknown[0])
        try:
            return cls(**{**data, "descent": tuple(data.get("descent") or ())})
        except RecordFormatError as exc:
            raise RecordFormatError(f"{path}: {exc.reason}", field=exc.field) from None
        except TypeError as exc:
            raise RecordFormatError(f"{path}: {exc}") from None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_agent_id() -> str:
    return f"agent-{uuid.uuid4().hex[:12]}"


def read_authority(root: Path | str) -> AuthorityRecord | None:
    """The store's authority record, or None when it has none yet; a damaged one is an error naming the file."""
    path = StoreLayout(root).authority
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RecordFormatError(f"{path}: not valid JSON: {exc}") from None
    return AuthorityRecord.from_dict(data, path=path)


def write_authority(root: Path | str, record: AuthorityRecord) -> AuthorityRecord:
    """Replace the record atomically and append the change to ``events/authority.jsonl`` (the history of who
    held authority when)."""
    layout = StoreLayout(root)
    layout.root.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(layout.authority, (json.dumps(record.to_dict(), indent=2) + "\n").encode())
    layout.events.mkdir(parents=True, exist_ok=True)
    append_bytes(layout.authority_log, (json.dumps({"at": _now(), **record.to_dict()}) + "\n").encode())
    return record


def ensure_authority(root: Path | str, *, agent_id: str | None = None) -> AuthorityRecord:
    """The store's record, created (epoch 1, active) when it has none."""
    record = read_authority(root)
    if record is None:
        record = write_authority(
            root, AuthorityRecord(agent_id or new_agent_id(), 1, "active", _now(), "created by the first write")
        )
    return record


def advance(root: Path | str, *, state: str, reason: str, successor: str | None = None) -> AuthorityRecord:
    """Move the store to the next epoch (a migration's bind step): writers holding the old one are fenced off."""
    current = ensure_authority(root)
    return write_authority(
        root, replace(current, epoch=current.epoch + 1, state=state, since=_now(), reason=reason, successor=successor)
    )


class WriterFence:
    """The epoch one writer holds over one store. ``check`` runs under the lock an append holds; it refuses, and
    logs, an append by a writer whose epoch is stale or whose store is no longer the active copy."""

    def __init__(self, root: Path | str) -> None:
        self.layout = StoreLayout(root)
        record = read_authority(root)
        self.epoch: int | None = record.epoch if record is not None else None

    def check(self, what: str) -> AuthorityRecord:
        record = read_authority(self.layout.root)
        if record is None:
            record = ensure_authority(self.layout.root)
        if self.epoch is None:
            # a writer that opened before the store had a record adopts the first epoch only: after a
            # migration the record is at a later epoch (or no longer active) and this writer is stale
            if record.epoch == 1 and record.writable:
                self.epoch = 1
        problem = None
        if self.epoch != record.epoch:
            problem = f"stale epoch: this writer holds {self.epoch}, the store is at epoch {record.epoch}"
        elif not record.writable:
            problem = f"this store is a {record.state} copy ({record.reason})"
        if problem is None:
            return record
        self._log_refusal(what, problem, record)
        where = f" (authority went to {record.successor})" if record.successor else ""
        raise FencedWriteError(
            f"{self.layout.authority}: append refused, {problem}{where}; nothing was written. "
            "Authoritative history is written only by the store that holds the agent's current epoch"
        )

    def _log_refusal(self, what: str, problem: str, record: AuthorityRecord) -> None:
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        line = {
            "at": _now(),
            "what": what,
            "problem": problem,
            "writer_epoch": self.epoch,
            "store_epoch": record.epoch,
            "state": record.state,
            "pid": os.getpid(),
        }
        append_bytes(self.layout.fencing_log, (json.dumps(line) + "\n").encode())


def fencing_refusals(root: Path | str) -> list[dict[str, Any]]:
    """The logged refusals, oldest first (health and the migration evaluation read them)."""
    path = StoreLayout(root).fencing_log
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise RecordFormatError(f"{path}, line {number}: not valid JSON: {exc}") from None
    return out
