"""Indexing what the transcript and memory files hold beyond the index's watermarks.

The facade (lca.substrate) calls this under its writer lock; the consolidation cycle and the
health checks read the report and the watermark names without depending on the facade.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.derived import derived_id
from lca.errors import RecordFormatError
from lca.index.catalog import Catalog
from lca.index.catalog_schema import SPEAKERS_PENDING
from lca.index.chunker import Chunker, entry_chunks, entry_speakers, memory_chunks
from lca.index.store import AddResult, IndexStore
from lca.memory import MemoryStore
from lca.provenance import code_version
from lca.recall.floor import fit_store_profile
from lca.transcript import TranscriptStore

TRANSCRIPT_MARK = "transcript:"  # catalog watermark of a session file: the byte offset indexed up to
MEMORY_MARK = "memory:"  # catalog watermark of a memory file: the content hash indexed
# catalog meta: every code version that wrote the index since it was last built from nothing, with its first and
# last ingest and how many; `lca reindex` deletes the catalog, so a rebuild leaves only the running version
WRITERS_META = "writer_versions"


@dataclass
class IngestReport:
    """What one ingest read, wrote, skipped and held back."""

    sessions_scanned: int = 0
    entries_appended: int = 0
    entries_duplicate: int = 0
    entries_indexed: int = 0
    memory_files_indexed: int = 0
    memory_files_removed: int = 0
    quarantined_lines: int = 0
    events_inferred: int = 0  # replacement events the model-free detector found in the new turns (lca.events)
    index: AddResult = field(default_factory=AddResult)
    repairs: dict[str, int] = field(default_factory=dict)
    imports: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # inputs left out, each naming its file: the user must act
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "index"}
        out["index"] = {k: v for k, v in self.index.__dict__.items() if k != "errors"}
        out["index"]["errors"] = self.index.errors[:20]
        return out


def record_writer(catalog: Catalog, version: str, *, at: float | None = None) -> None:
    """Add one ingest by ``version`` to the catalog's writer record (the caller holds the writer lock). Kept beside
    ``last_writer_version``, which says only who wrote last: a later writer must not hide an earlier stale one."""
    at = time.time() if at is None else at
    writers = writer_versions(catalog)
    seen = writers.get(version) or {"first": at, "ingests": 0}
    writers[version] = {**seen, "last": at, "ingests": int(seen.get("ingests", 0)) + 1}
    catalog.set_meta(WRITERS_META, json.dumps(writers, sort_keys=True))


def writer_versions(catalog: Catalog) -> dict[str, dict[str, Any]]:
    """Every code version that wrote the index since it was built: {version: {first, last, ingests}}; {} for an
    index built before versions were recorded (an unreadable record reads as none: the index is derived)."""
    try:
        writers = json.loads(catalog.get_meta(WRITERS_META) or "{}")
    except ValueError:
        return {}
    return {str(v): dict(w) for v, w in writers.items() if isinstance(w, dict)} if isinstance(writers, dict) else {}


def transcript_mark(session_id: str) -> str:
    """The catalog watermark's name for a session file: the catalog is derived, so it names the session's derived
    id (``lca.derived``), distinct for distinct sessions."""
    return TRANSCRIPT_MARK + derived_id(session_id)


def watermark_problem(path: Path, mark: int) -> str | None:
    """Why a session file no longer fits the watermark indexed up to it, or None when it does: the
    watermark must fall at a line boundary inside the file, or the file changed below it (the
    transcript is append-only), and reading on from it would take half a line for a torn one."""
    if mark <= 0:
        return None
    size = path.stat().st_size
    if size < mark:
        return f"{path}: shrank below its index watermark ({size} < {mark} bytes)"
    with open(path, "rb") as handle:
        handle.seek(mark - 1)
        if handle.read(1) == b"\n":
            return None
    return (
        f"{path}: changed below its index watermark (byte {mark} is no longer a line boundary; "
        "the transcript is append-only): run `lca reindex` to index it again from the start"
    )


def fill_speakers(catalog: Catalog, transcript: TranscriptStore) -> int:
    """Say who spoke on the chunks indexed before the catalog recorded it (a catalog migrated to schema version 3,
    ``lca.index.catalog_schema``): the subagent or peer agent of every turn that has one, read from the transcript
    once. Returns how many turns it named."""
    speakers = []
    for session_id in transcript.session_ids():
        for entry in transcript.read(session_id).entries:
            subagent, peer = entry_speakers(entry)
            if subagent or peer:
                speakers.append((derived_id(entry.session_id), derived_id(entry.id), subagent, peer))
    catalog.begin()
    catalog.set_speakers(speakers)
    catalog.delete_meta(SPEAKERS_PENDING)
    catalog.commit()
    return len(speakers)


def ingest_pending(
    index: IndexStore,
    transcript: TranscriptStore,
    memory: MemoryStore,
    chunker: Chunker,
    out: IngestReport,
    *,
    bar: Callable[[int, str, str], Any] | None = None,
    observe: Callable[[list[Any]], int] | None = None,
) -> None:
    """Index new transcript entries and new or changed memory files; drop chunks of deleted memory
    files. The caller holds the store's writer lock. ``bar(total, desc, unit)`` may return a
    progress bar (with ``update`` and ``close``) or None. ``observe`` reads the new transcript entries once they are
    indexed (the change detector, ``lca.events.EventBook.observe``) and says how many events it recorded."""
    index.catalog_.set_meta("last_writer_version", code_version())
    record_writer(index.catalog_, code_version())
    out.repairs = index.repair()
    if index.catalog_.get_meta(SPEAKERS_PENDING):
        fill_speakers(index.catalog_, transcript)
    retried = index.retry_failures()
    out.index.merge(retried)
    chunks = []
    entries: list[Any] = []
    marks: dict[str, str] = {}
    for session_id in transcript.session_ids():
        transcript.recover(session_id)
        key = transcript_mark(session_id)
        start = int(index.catalog_.watermark(key) or 0)
        path = transcript.session_path(session_id)
        size = path.stat().st_size
        if size == start:
            continue
        if size < start:  # should never happen: the transcript only grows
            raise RecordFormatError(f"transcript shrank below its watermark ({size} < {start})", path=str(path))
        problem = watermark_problem(path, start)
        if problem:  # reading on would quarantine half a line as if it were torn: leave it to reindex
            out.problems.append(problem)
            continue
        read = transcript.read(session_id, start=start)
        out.sessions_scanned += 1
        out.quarantined_lines += len(read.malformed)
        entries.extend(read.entries)
        for entry in read.entries:
            chunks.extend(entry_chunks(entry, chunker))
            out.entries_indexed += 1
        marks[key] = str(read.end_offset)
    loaded = memory.load()
    present = set()
    memory_marks: dict[str, str] = {}
    for memory_file in loaded.files:
        key = MEMORY_MARK + memory_file.record.id
        present.add(key)
        digest = memory_file.computed_hash
        if index.catalog_.watermark(key) == digest:
            continue
        index.remove_memory(memory_file.record.id)
        chunks.extend(memory_chunks(memory_file, chunker))
        memory_marks[key] = digest
        out.memory_files_indexed += 1
    out.problems.extend(f"memory file failed to load: {failure}" for failure in loaded.failures)
    failed_ids = {Path(f.path).stem for f in loaded.failures}
    for key in index.catalog_.watermarks(MEMORY_MARK):
        memory_id = key[len(MEMORY_MARK) :]
        if key not in present and memory_id not in failed_ids:  # the file is gone: its chunks go too
            index.remove_memory(memory_id)
            index.catalog_.delete_watermark(key)
            out.memory_files_removed += 1
    progress = bar(len(chunks), "index", "chunk") if bar is not None else None
    try:
        out.index.merge(index.add_chunks(chunks, progress=progress.update if progress else None))
    finally:
        if progress:
            progress.close()
    index.catalog_.begin()
    for key, value in {**marks, **memory_marks}.items():
        index.catalog_.set_watermark(key, value)
    index.catalog_.commit()
    index.flush()
    fit_store_profile(index)  # recall's floor, fitted here and kept in the store: never on the recall path
    if observe is not None and entries:
        out.events_inferred += observe(entries)
