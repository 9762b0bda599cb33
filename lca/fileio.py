"""Durable file primitives: fsync'd appends, atomic replaces, advisory locks."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lca.errors import LinkRefusedError, RecordFormatError, StoreLockedError

# the advisory locks this process holds, by (thread, device, inode) of the lock file, with their nesting depth:
# a reentrant taker (a transcript append inside a writer's lock) nests instead of waiting on itself
_HELD: dict[tuple[int, int, int], int] = {}
os.register_at_fork(after_in_child=_HELD.clear)  # a forked child is another writer: it takes the lock itself


def fsync_dir(path: Path) -> None:
    """Make a created or renamed directory entry durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def append_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Append to an append-only log with one write; fsync'd before returning when ``durable``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)  # never through a link
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary sibling, fsync it, rename over ``path``: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def exclusive_lock(
    path: Path, *, timeout: float = 600.0, what: str = "store", reentrant: bool = False
) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path``; wait up to ``timeout`` seconds, then fail clearly.

    The holder's pid is written into the lock file so a waiting user can be told who holds it. ``reentrant``: when
    this thread already holds the lock, nest inside it (a plain taker waits, like any other writer, and fails).
    """
    if reentrant:
        try:
            found = os.stat(path)
        except FileNotFoundError:
            found = None
        key = (threading.get_ident(), found.st_dev, found.st_ino) if found else None
        if key is not None and key in _HELD:
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a linked lock file would be truncated
    stat = os.fstat(fd)
    key = (threading.get_ident(), stat.st_dev, stat.st_ino)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    raise StoreLockedError(
                        f"{what} is locked by another writer (pid {holder}); lock file {path}"
                    ) from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        _HELD[key] = 1
        try:
            yield
        finally:
            _HELD.pop(key, None)
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def writer_active(path: Path) -> bool:
    """Whether some writer holds the lock at ``path`` now (a probe that takes nothing: a missing lock file is
    none, and nothing is created). A reader tells a write in progress from one a kill left half done with it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def refuse_link(path: Path, what: str) -> None:
    """Refuse ``path`` when it is a symbolic link (a dangling one too): one line naming it and ``what`` was not done."""
    if path.is_symlink():
        raise LinkRefusedError(
            f"{path} is a symbolic link (to {os.readlink(path)}); the store never follows a link out of itself, "
            f"so {what}: replace the link with the file itself, or remove it"
        )


def lines_backwards(path: Path, *, block: int = 1 << 16) -> Iterator[bytes]:
    """The complete lines of a file from its last to its first (without their newline, empty ones skipped), read in
    blocks from the end: a reader of an append-only log that wants only its newest records reads only those. A torn
    tail past the last newline is not a line yet."""
    with open(path, "rb") as handle:
        at = handle.seek(0, os.SEEK_END)
        rest: bytes | None = None  # None: still inside the torn tail
        while at > 0:
            step = min(block, at)
            at -= step
            handle.seek(at)
            data = handle.read(step)
            if rest is None:
                cut = data.rfind(b"\n")
                if cut < 0:
                    continue
                data, rest = data[:cut], b""
            parts = (data + rest).split(b"\n")
            rest = parts[0]
            for line in reversed(parts[1:]):
                if line:
                    yield line
        if rest:
            yield rest


def json_records(path: str | Path, size: int, *, holding: bytes = b"") -> Iterator[Any]:
    """Each complete line of the file's first ``size`` bytes that holds the bytes ``holding``, decoded as JSON; a torn
    tail (after the last newline) and a line that does not decode are skipped: for a quick reading of fields, never
    for the authoritative one."""
    with open(path, "rb") as handle:
        data = handle.read(size)
    for raw in data[: data.rfind(b"\n") + 1].splitlines():
        if holding not in raw:  # a cheap test before decoding the line
            continue
        try:
            yield json.loads(raw)
        except ValueError:
            continue


def numbered_json_lines(text: str, where: str) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines text, decoded, with its 1-based line number; a line that is not JSON
    is refused naming ``where`` (the file) and the line. What each record must hold is the caller's to check."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"not valid JSON: {exc.msg}", path=where, line=number) from None
