"""Errors that name the file, line and field at fault, so bad input is never a mystery."""

from __future__ import annotations


class LCAError(Exception):
    """Base class for substrate errors a user should see as a clear message."""


class RecordFormatError(LCAError):
    """A record (transcript line, memory file, import record) broke its schema."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StoreLockedError(LCAError):
    """Another process holds the store's single-writer lock."""


class EmbedderMismatchError(LCAError):
    """The store was embedded by a different model; vectors are never mixed."""


class EmbeddingFailedError(LCAError):
    """An embedding could not be produced; the chunk is held back, never stored as a zero vector."""


class ApprovalRequired(LCAError):
    """A procedural write or a lifecycle step that needs a named human approver came without one."""
