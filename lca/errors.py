"""Errors that name the file, line and field at fault, so bad input is never a mystery."""

from __future__ import annotations

from pathlib import Path

from lca.derived import derived_message


class LCAError(Exception):
    """Base class for substrate errors a user should see as a clear message. The message is redacted
    (``lca.derived``): it may quote the value it refused, and it is printed, logged and reported."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(derived_message(a) if isinstance(a, str) else a for a in args))


class RecordFormatError(LCAError):
    """A record (transcript line, memory file, import record) broke its schema."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        record: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = None if field is None else derived_message(field)  # a field's name may be a hostile key
        self.record = record  # a record of a file that is not line-oriented, e.g. "record 3 (question q1)"
        self.reason = derived_message(message)
        where = []
        if path is not None:
            where.append(str(path))
        if record is not None:
            where.append(record)
        if line is not None:
            where.append(f"line {line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {self.reason}" if prefix else self.reason)

    @classmethod
    def from_validation(cls, exc, *, path: str | None = None, line: int | None = None) -> RecordFormatError:
        """A pydantic ValidationError as one error naming its first field, the others listed after it."""
        errors = exc.errors()
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        more = ""
        if len(errors) > 1:
            more = (
                f" (and {len(errors) - 1} more problem(s): "
                + "; ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in errors[1:])
                + ")"
            )
        return cls(first["msg"] + more, path=path, line=line, field=field)


class StoreLockedError(LCAError):
    """Another process holds the store's single-writer lock."""


class LinkRefusedError(LCAError):
    """A path inside the store is a symbolic link: the store never reads or writes through one out of itself."""


class EmbedderMismatchError(LCAError):
    """The store was embedded by a different model; vectors are never mixed."""


class EmbeddingFailedError(LCAError):
    """An embedding could not be produced; the chunk is held back, never stored as a zero vector."""


class ApprovalRequired(LCAError):
    """A procedural write or a lifecycle step that needs a named human approver came without one."""


class DerivedStoreDamagedError(LCAError):
    """A derived file (catalog, vectors, lexical index) cannot be read: ``lca reindex`` rebuilds it."""

    def __init__(self, path: Path | str, problem: object) -> None:
        self.path = str(path)
        super().__init__(f"derived store damaged: {path}: {problem}; run `lca reindex` to rebuild it")
