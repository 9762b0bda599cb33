"""The facade a host or an experimental condition uses: append, ingest, search, health, reindex.

One writer at a time: every write to the store (transcript imports, indexing,
reindex) holds ``<home>/write.lock``; readers need no lock.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from lca.activation import RetrievalLog
from lca.errors import RecordFormatError
from lca.experience import ExperienceLog
from lca.fileio import atomic_write_bytes, exclusive_lock
from lca.importers import ImportedSession, ImportReport
from lca.index.chunker import Chunker, entry_chunks, memory_chunks
from lca.index.store import AddResult, IndexStore
from lca.memory import MemoryStore
from lca.ports import Embedder
from lca.provenance import code_version
from lca.recall import RecallConfig, RecallContext, Recaller, RecallResult
from lca.transcript import AppendResult, TranscriptStore
from lca.types import SearchHit, TranscriptEntry

TRANSCRIPT_MARK = "transcript:"
MEMORY_RESCAN_SECONDS = 2.0
MEMORY_MARK = "memory:"


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
    index: AddResult = field(default_factory=AddResult)
    repairs: dict[str, int] = field(default_factory=dict)
    imports: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "index"}
        out["index"] = {k: v for k, v in self.index.__dict__.items() if k != "errors"}
        out["index"]["errors"] = self.index.errors[:20]
        return out


class Substrate:
    """One agent home: transcript, memory files and the derived index, under ``home``."""

    def __init__(self, home: Path | str, *, embedder: Embedder | None = None, lock_timeout: float = 600.0,
                 progress: bool = False, recall_config: RecallConfig | None = None,
                 token_counter: Callable[[str], int] | None = None, critical_budget: int = 400,
                 **index_params: Any) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        if embedder is None:
            from lca.index.embedders import SentenceTransformerEmbedder

            embedder = SentenceTransformerEmbedder()
        self.embedder = embedder
        self.lock_timeout = lock_timeout
        self.progress = progress
        self.index_params = index_params
        self.transcript = TranscriptStore(self.home)
        self.memory = MemoryStore(self.home)
        self.chunker = Chunker(embedder)
        self.experience = ExperienceLog(self.home)
        self.retrievals = RetrievalLog(self.home)
        settings = self.home / "recall.yaml"
        self.recall_config = recall_config or (RecallConfig.from_file(settings) if settings.exists()
                                               else RecallConfig())
        self.token_counter = token_counter
        self.critical_budget = critical_budget
        self._index: IndexStore | None = None
        self._memory_cache: tuple | None = None

    @property
    def index(self) -> IndexStore:
        if self._index is None:
            self._index = IndexStore(self.home, self.embedder, **self.index_params)
        return self._index

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def __enter__(self) -> "Substrate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def writer_lock(self):
        return exclusive_lock(self.home / "write.lock", timeout=self.lock_timeout, what=f"store {self.home}")

    # ---- writes ------------------------------------------------------------------
    def append(self, entries: Iterable[TranscriptEntry], *, index: bool = True) -> AppendResult:
        """Durably append live entries; index them unless told not to."""
        with self.writer_lock():
            result = self.transcript.append(entries)
            if index:
                self._ingest_locked(IngestReport())
            return result

    def import_sessions(self, sessions: Sequence[ImportedSession], report: ImportReport | None = None,
                        *, rejected: Sequence[tuple[int, str, bytes]] = ()) -> IngestReport:
        """Bring imported history in through the transcript, then index what is new."""
        started = time.perf_counter()
        out = IngestReport()
        with self.writer_lock():
            if report is not None:
                out.imports.append(report.to_dict())
                for line, reason, raw in rejected:
                    self.transcript.quarantine_foreign(Path(report.source), line, raw, reason)
                    out.quarantined_lines += 1
            for session in self._progress(sessions, "append", unit="session"):
                result = self.transcript.append(session.entries)
                out.entries_appended += len(result.appended)
                out.entries_duplicate += result.duplicates
            self._ingest_locked(out)
        out.seconds = time.perf_counter() - started
        return out

    def ingest(self) -> IngestReport:
        """Index whatever the transcript and memory files hold beyond the watermarks."""
        started = time.perf_counter()
        out = IngestReport()
        with self.writer_lock():
            self._ingest_locked(out)
        out.seconds = time.perf_counter() - started
        return out

    def _ingest_locked(self, out: IngestReport) -> None:
        index = self.index
        index.catalog_.set_meta("last_writer_version", code_version())
        out.repairs = index.repair()
        retried = index.retry_failures()
        out.index.merge(retried)
        chunks = []
        marks: dict[str, str] = {}
        for session_id in self.transcript.session_ids():
            self.transcript.recover(session_id)
            key = TRANSCRIPT_MARK + session_id
            start = int(index.catalog_.watermark(key) or 0)
            size = self.transcript.session_path(session_id).stat().st_size
            if size == start:
                continue
            if size < start:  # should never happen: the transcript only grows
                raise RecordFormatError(f"transcript shrank below its watermark ({size} < {start})",
                                        path=str(self.transcript.session_path(session_id)))
            read = self.transcript.read(session_id, start=start)
            out.sessions_scanned += 1
            out.quarantined_lines += len(read.malformed)
            for entry in read.entries:
                chunks.extend(entry_chunks(entry, self.chunker))
                out.entries_indexed += 1
            marks[key] = str(read.end_offset)
        loaded = self.memory.load()
        present = set()
        memory_marks: dict[str, str] = {}
        for memory_file in loaded.files:
            key = MEMORY_MARK + memory_file.record.id
            present.add(key)
            digest = memory_file.computed_hash
            if index.catalog_.watermark(key) == digest:
                continue
            index.remove_memory(memory_file.record.id)
            chunks.extend(memory_chunks(memory_file, self.chunker))
            memory_marks[key] = digest
            out.memory_files_indexed += 1
        failed_ids = {Path(f.path).stem for f in loaded.failures}
        for key in index.catalog_.watermarks(MEMORY_MARK):
            memory_id = key[len(MEMORY_MARK):]
            if key not in present and memory_id not in failed_ids:  # the file is gone: its chunks go too
                index.remove_memory(memory_id)
                index.catalog_.delete_watermark(key)
                out.memory_files_removed += 1
        bar = self._bar(len(chunks), "index", unit="chunk")
        try:
            out.index.merge(index.add_chunks(chunks, progress=bar.update if bar else None))
        finally:
            if bar:
                bar.close()
        index.catalog_.begin()
        for key, value in {**marks, **memory_marks}.items():
            index.catalog_.set_watermark(key, value)
        index.catalog_.commit()
        index.flush()

    def reindex(self) -> IngestReport:
        """Delete every derived store and rebuild it from the transcript and memory files."""
        started = time.perf_counter()
        out = IngestReport()
        with self.writer_lock():
            self.close()
            shutil.rmtree(self.home / "index", ignore_errors=True)
            self._ingest_locked(out)
        out.seconds = time.perf_counter() - started
        return out

    # ---- reads -------------------------------------------------------------------
    def search(self, query: str, *, k: int = 10, mode: str = "hybrid", pool: int | None = None) -> list[SearchHit]:
        return self.index.search(query, k=k, mode=mode, pool=pool)

    def memory_files(self) -> dict[str, Any]:
        """Loaded memory files by id. Reloaded when the folder changes (every write through the API
        renames a file into it); files edited in place are caught by a full stat scan at most
        every ``MEMORY_RESCAN_SECONDS``, which keeps this off the recall latency path."""
        directory = self.memory.dir
        folder = directory.stat().st_mtime_ns if directory.exists() else 0
        now = time.monotonic()
        cache = self._memory_cache
        if cache is not None and cache[0] == folder and now - cache[1] < MEMORY_RESCAN_SECONDS:
            return cache[3]
        signature = tuple(sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size)
                                 for e in os.scandir(directory) if e.name.endswith(".md"))) if folder else ()
        if cache is None or cache[2] != signature:
            loaded = self.memory.load()
            files = {f.record.id: f for f in loaded.files}
        else:
            files = cache[3]
        self._memory_cache = (folder, now, signature, files)
        return files

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` for budgets: the host's counter when given, else the embedder's
        tokenizer without its special tokens (an approximation of the host model's count)."""
        if self.token_counter is not None:
            return int(self.token_counter(text))
        return max(0, self.embedder.count_tokens([text])[0] - 2)

    def save_recall_setting(self, name: str, value: Any) -> None:
        """Persist one recall setting in ``<home>/recall.yaml`` (validated before it is written)."""
        import yaml

        path = self.home / "recall.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
        data = dict(data or {}, **{name: value})
        config = RecallConfig.from_mapping(data, source=str(path))  # refuses a bad value before writing
        atomic_write_bytes(path, yaml.safe_dump(data, sort_keys=True).encode())
        self.recall_config = config

    def recaller(self, config: RecallConfig | None = None) -> Recaller:
        return Recaller(self.index, memory_files=self.memory_files, experience=self.experience.counts,
                        count_tokens=self.count_tokens, config=config or self.recall_config,
                        log_path=self.home / "logs" / "recall.jsonl", retrievals=self.retrievals)

    def recall(self, context: RecallContext | str, *, config: RecallConfig | None = None) -> RecallResult:
        """Resonance-weighted recall for one turn; see lca.recall."""
        if isinstance(context, str):
            context = RecallContext(query=context)
        return self.recaller(config).recall(context)

    def checkpoint(self, writer, *, reviewer=None, trigger: str = "elected", approver: str | None = None,
                   config=None, session_id: str | None = None, handoff=None, progress=None, now=None):
        """Run one consolidation cycle over the transcript since the last checkpoint (lca.consolidation)."""
        from lca.consolidation import Consolidator

        return Consolidator(self, writer, reviewer=reviewer, config=config, approver=approver,
                            progress=progress).run(trigger, session_id=session_id, handoff=handoff, now=now)

    def health(self):
        from lca.health import substrate_health

        return substrate_health(self)

    # ---- progress ----------------------------------------------------------------
    def _bar(self, total: int, desc: str, unit: str):
        if not self.progress or total == 0:
            return None
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, leave=False)

    def _progress(self, items, desc: str, unit: str):
        if not self.progress or len(items) < 2:
            return items
        from tqdm import tqdm

        return tqdm(items, desc=desc, unit=unit, leave=False)
