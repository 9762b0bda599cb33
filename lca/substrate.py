"""The facade a host or an experimental condition uses: append, ingest, search, recall, health,
reindex, checkpoint.

It owns one store's parts (transcript, memory files, index, event logs, all at the paths of
``lca.layout.StoreLayout``) and composes the modules that work on them: indexing (lca.ingest),
the health checks (lca.health) and the consolidation cycle (lca.consolidation) are handed the
stores they need and never import this module. One writer at a time: every write to the store
(transcript imports, indexing, reindex, a cycle's writes) holds ``<home>/write.lock``; readers
need no lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from lca.activation import RetrievalLog
from lca.authority import read_authority
from lca.change_detector import StructuralChangeDetector
from lca.consolidation import ConsolidationConfig, ConsolidationResult, Consolidator, CycleStores
from lca.derived import DerivedTurnLookups
from lca.errors import LCAError, RecordFormatError
from lca.events import EventBook, ReplacementEvent
from lca.experience import ExperienceLog, experience_of, turn_events
from lca.fileio import atomic_write_bytes, exclusive_lock
from lca.forget import ForgetReport, ForgetRequest, forget
from lca.health import acknowledge_quarantine, store_health
from lca.importers import ImportedSession, ImportReport
from lca.index.chunker import Chunker
from lca.index.completeness import begin_rebuild, check_searchable, finish_rebuild
from lca.index.store import IndexStore
from lca.ingest import IngestReport, ingest_pending
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryFile, MemoryStore
from lca.ports import Embedder, TextGenerator
from lca.recall import RecallConfig, RecallContext, Recaller, RecallResult
from lca.recall_log import RecallLog
from lca.retrieval import RetrievalConfig
from lca.transcript import AppendResult, TranscriptConflictError, TranscriptStore, check_new_entry
from lca.types import HealthReport, SearchHit, TranscriptEntry

MEMORY_RESCAN_SECONDS = 2.0

__all__ = ["IngestReport", "MEMORY_RESCAN_SECONDS", "Substrate"]


class Substrate:
    """One agent home: transcript, memory files and the derived index, under ``home``."""

    def __init__(
        self,
        home: Path | str,
        *,
        embedder: Embedder | None = None,
        lock_timeout: float = 600.0,
        progress: bool = False,
        recall_config: RecallConfig | None = None,
        token_counter: Callable[[str], int] | None = None,
        critical_budget: int = 400,
        infer_events: bool = True,
        **index_params: Any,
    ) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.layout = StoreLayout(self.home)
        if embedder is None:  # the one the store was built with (the default for a new store)
            from lca.index.embedder_choice import store_embedder

            embedder = store_embedder(self.layout)
        self.embedder = embedder
        self.lock_timeout = lock_timeout
        self.progress = progress
        # a broken settings file is kept as its error: health reports it, the commands that use it refuse
        self._settings_errors: dict[str, LCAError] = {}
        retrieval_file = self.layout.retrieval_settings
        if index_params.get("retrieval") is None and retrieval_file.exists():  # None: the store's own file
            try:
                index_params["retrieval"] = RetrievalConfig.from_file(retrieval_file)
            except Exception as exc:  # YAML's own errors too: every one is this file's problem
                self._settings_errors["retrieval"] = _settings_error(retrieval_file, exc)
        self.index_params = index_params
        self.transcript = TranscriptStore(self.home)
        self._turns = DerivedTurnLookups(self.transcript)
        self.memory = MemoryStore(self.home)
        self.chunker = Chunker(embedder)
        self.experience = ExperienceLog(self.home)
        self.retrievals = RetrievalLog(self.home)
        self.ledger = Ledger(self.home)
        # which turns later ones replaced: labels, the model-free detector at ingest (off: labels alone), the cycle
        self.events = EventBook(
            self.home,
            self.transcript,
            labelled=self.experience.replacement_keys,
            ledger_events=self.ledger.events,
            detector=StructuralChangeDetector if infer_events else None,
        )
        settings = self.layout.recall_settings
        if recall_config is None and settings.exists():
            try:
                recall_config = RecallConfig.from_file(settings)
            except Exception as exc:  # as above
                self._settings_errors["recall"] = _settings_error(settings, exc)
        self._recall_config = recall_config or RecallConfig()
        self.token_counter = token_counter
        self.critical_budget = critical_budget
        self._index: IndexStore | None = None
        self._memory_cache: tuple[int, float, tuple[Any, ...], dict[str, MemoryFile]] | None = None

    @property
    def recall_config(self) -> RecallConfig:
        """The store's recall settings (``recall.yaml``); a broken file is refused here, naming it."""
        if "recall" in self._settings_errors:
            raise self._settings_errors["recall"]
        return self._recall_config

    @recall_config.setter
    def recall_config(self, config: RecallConfig) -> None:
        self._settings_errors.pop("recall", None)
        self._recall_config = config

    @property
    def index(self) -> IndexStore:
        """The derived index; a broken ``retrieval.yaml`` is refused here, naming it (the ranking needs it)."""
        if "retrieval" in self._settings_errors:
            raise self._settings_errors["retrieval"]
        return self._open_index()

    def _open_index(self) -> IndexStore:
        if self._index is None:
            self._index = IndexStore(self.home, self.embedder, **self.index_params)
        return self._index

    def searchable_index(self) -> IndexStore:
        """The index for a read (search, recall, calibrating the floor), refused in one line when a write killed part
        way left it incomplete (``lca.index.completeness``; ``lca ingest`` completes it); a store never indexed is
        read through an empty catalog in memory, so a read creates nothing."""
        settings_error = self._settings_errors.get("retrieval")
        if settings_error is not None:
            raise settings_error
        index = self._index_as_it_is()
        check_searchable(self.layout, index.catalog_, index.vectors.ids)
        return index

    def _index_as_it_is(self) -> IndexStore:
        """The index, opened without creating anything: a store never indexed is read through an empty catalog in
        memory (its history awaits `lca ingest`), so a search, a recall or health makes no ``index/`` folder."""
        if self._index is None and not self.layout.catalog.exists():
            return IndexStore(self.home, self.embedder, catalog_path=Path(":memory:"), **self.index_params)
        return self._open_index()

    def _writable(self) -> bool:
        """Whether this process may write the store's logs (a read-only store is still searched and recalled)."""
        return all(os.access(p, os.W_OK) for p in (self.home, self.layout.logs, self.layout.events) if p.exists())

    def _holds_authority(self) -> bool:
        """Not a replica and not handed on: only the agent's own store logs its recalls (what a cycle learns from)."""
        try:
            record = read_authority(self.home)
        except LCAError:
            return False
        return record is None or record.state == "active"

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def __enter__(self) -> Substrate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def writer_lock(self) -> AbstractContextManager[Any]:
        return exclusive_lock(self.layout.write_lock, timeout=self.lock_timeout, what=f"store {self.home}")

    # ---- writes ------------------------------------------------------------------
    def append(self, entries: Iterable[TranscriptEntry], *, index: bool = True) -> AppendResult:
        """Durably append live entries; index them unless told not to. The approvals and corrections
        they carry are recorded in the experience log (lca.experience; a malformed one is refused first)."""
        entries = list(entries)
        turns = turn_events(entries)
        with self.writer_lock():
            result = self.transcript.append(entries)
            if turns:
                self.experience.record_new(experience_of(turns, self.memory_files(), transcript=self.transcript))
            if index:
                self._ingest_locked(IngestReport())
            return result

    def import_sessions(
        self,
        sessions: Sequence[ImportedSession],
        report: ImportReport | None = None,
        *,
        rejected: Sequence[tuple[int, str, bytes]] = (),
    ) -> IngestReport:
        """Bring imported history in through the transcript, then index what is new.

        All or nothing: every entry is checked first (the write rules, and no id already recorded, or
        repeated in the import, with different content), so a refused import raises before its first
        byte is written and leaves the store as it was. Then, under the same writer lock, the rejected
        lines are quarantined, the sessions appended and the new entries indexed.
        """
        started = time.perf_counter()
        out = IngestReport()
        source = report.source if report is not None else None
        with self.writer_lock():
            for session in sessions:
                for entry in session.entries:
                    check_new_entry(entry, path=source)
            conflict = self.transcript.find_conflict(e for s in sessions for e in s.entries)
            if conflict is not None:
                entry, recorded = conflict
                origin = next(
                    (
                        s.origins[entry.id]
                        for s in sessions
                        if s.session_id == entry.session_id and entry.id in s.origins
                    ),
                    None,
                )
                where = ", ".join(w for w in (source, origin, "field 'id'") if w)
                raise TranscriptConflictError(
                    f"{where}: entry {entry.id!r} is already recorded with different content ({recorded}); "
                    "acknowledged history is never rewritten, so nothing was imported"
                )
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
        ingest_pending(
            self.index, self.transcript, self.memory, self.chunker, out, bar=self._bar, observe=self.events.observe
        )
        finish_rebuild(self.layout)  # indexed to the end: a reindex a kill interrupted is complete now

    def reindex(self) -> IngestReport:
        """Delete every derived store and rebuild it from the transcript and memory files."""
        started = time.perf_counter()
        out = IngestReport()
        with self.writer_lock():
            self.close()
            if self.layout.index.is_dir():
                begin_rebuild(self.layout)  # marked first: a kill from here on leaves an index health names
            self.events.reset()  # the inferred events lived in the index folder: read the history again
            self._ingest_locked(out)
        out.seconds = time.perf_counter() - started
        return out

    # ---- reads -------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        pool: int | None = None,
        as_of: datetime | None = None,
        config: RetrievalConfig | None = None,
    ) -> list[SearchHit]:
        """The store's ranking (``lca.retrieval``), the one recall re-weighs; ``as_of`` reads relative dates.
        Each hit's text has its credentials redacted (``lca.index.redaction``); its pointer leads to the
        verbatim transcript."""
        return self.searchable_index().search(query, k=k, mode=mode, pool=pool, as_of=as_of, config=config)

    def memory_files(self) -> dict[str, MemoryFile]:
        """Loaded memory files by id. Reloaded when the folder changes (every write through the API
        renames a file into it); files edited in place are caught by a full stat scan at most
        every ``MEMORY_RESCAN_SECONDS``, which keeps this off the recall latency path."""
        directory = self.memory.dir
        folder = directory.stat().st_mtime_ns if directory.exists() else 0
        now = time.monotonic()
        cache = self._memory_cache
        if cache is not None and cache[0] == folder and now - cache[1] < MEMORY_RESCAN_SECONDS:
            return cache[3]
        signature = (
            tuple(
                sorted(
                    (e.name, e.stat(follow_symlinks=False).st_mtime_ns, e.stat(follow_symlinks=False).st_size)
                    for e in os.scandir(directory)
                    if e.name.endswith(".md")
                )
            )
            if folder
            else ()
        )
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
        return self.count_tokens_many([text])[0]

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        """``count_tokens`` of each text, the embedder's tokenizer taking them in one call."""
        if self.token_counter is not None:
            return [int(self.token_counter(t)) for t in texts]
        return [max(0, n - 2) for n in self.embedder.count_tokens(list(texts))] if texts else []

    def save_recall_setting(self, name: str, value: Any) -> None:
        """Persist one recall setting in ``<home>/recall.yaml`` (validated before it is written)."""

        path = self.layout.recall_settings
        if "recall" in self._settings_errors:  # never overwrite a file that cannot be read: name it
            raise self._settings_errors["recall"]
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
        data = dict(data or {}, **{name: value})
        config = RecallConfig.from_mapping(data, source=str(path))  # refuses a bad value before writing
        atomic_write_bytes(path, yaml.safe_dump(data, sort_keys=True).encode())
        self.recall_config = config

    def recaller(self, config: RecallConfig | None = None) -> Recaller:
        config = config or self.recall_config
        hold, mark = config.hold_confidence, config.mark_confidence
        index, writable = self.searchable_index(), self._writable()
        return Recaller(
            index,
            memory_files=self.memory_files,
            experience=lambda: self.events.held_counts(self.experience.counts(), hold=hold, mark=mark),
            count_tokens=self.count_tokens,
            count_tokens_many=self.count_tokens_many,
            config=config,
            log=self.recall_log(config) if writable and index is self._index and self._holds_authority() else None,
            retrievals=self.retrievals if writable else RetrievalLog(self.home, record=False),
            entry_meta=self._turns.entry_meta,  # asked with the index's derived ids (lca.derived)
            corrections=lambda: self.events.corrections(hold=hold, mark=mark),
            reply_to=self._turns.reply_to,
            agent_turns=self._turns.agent_turns,
            replacements=lambda: self.events.replacements(hold=hold, mark=mark),
        )

    def recall_log(self, config: RecallConfig | None = None) -> RecallLog:
        """The store's recall log, bounded by ``log_max_bytes`` of the recall settings (``lca.recall_log``)."""
        return RecallLog(self.layout.recall_log, max_bytes=(config or self.recall_config).log_max_bytes)

    def forget(self, request: ForgetRequest, *, by: str, why: str, dry_run: bool = False) -> ForgetReport:
        """Tombstone the selected entries in the transcript and drop or rebuild everything derived from them
        (``lca.forget``): the one rewrite of history, recorded in the tombstones and checked by health."""
        return forget(self, request, by=by, why=why, dry_run=dry_run)

    # ---- replacement events (lca.events) --------------------------------------------
    def decide_event(self, event_id: str, decision: str, *, by: str, reason: str = "") -> ReplacementEvent:
        """Confirm or reject a replacement event, recorded in the ledger: a confirmed one acts as a host's label, a
        rejected one never acts again. An unknown id is refused (``UnknownEventError``) and nothing is written."""
        if decision not in ("confirmed", "rejected"):
            raise ValueError(f"decision must be 'confirmed' or 'rejected', got {decision!r}")
        if not by.strip():
            raise ValueError("a decision names who made it")
        with self.writer_lock():
            event = self.events.find(event_id)
            kind = "event_confirmed" if decision == "confirmed" else "event_rejected"
            self.ledger.append(kind, event.id, {"by": by, "reason": reason, "event": event.to_dict()})
        return event

    def recall(self, context: RecallContext | str, *, config: RecallConfig | None = None) -> RecallResult:
        """Resonance-weighted recall for one turn; see lca.recall."""
        if isinstance(context, str):
            context = RecallContext(query=context)
        return self.recaller(config).recall(context)

    def checkpoint(
        self,
        writer: TextGenerator,
        *,
        reviewer: TextGenerator | None = None,
        trigger: str = "elected",
        approver: str | None = None,
        config: ConsolidationConfig | None = None,
        session_id: str | None = None,
        handoff: Callable[[str], str] | None = None,
        progress: Callable[[str], None] | None = None,
        now: datetime | None = None,
    ) -> ConsolidationResult:
        """Run one consolidation cycle over the transcript since the last checkpoint (lca.consolidation)."""
        return Consolidator(
            self.cycle_stores(), writer, reviewer=reviewer, config=config, approver=approver, progress=progress
        ).run(trigger, session_id=session_id, handoff=handoff, now=now)

    def cycle_stores(self) -> CycleStores:
        """The stores and operations a consolidation cycle works with. Recall is looked up at call
        time, so a host (or a test) that wraps ``self.recall`` is seen by the cycle too."""
        return CycleStores(
            layout=self.layout,
            transcript=self.transcript,
            memory=self.memory,
            index=self.index,
            embedder=self.embedder,
            experience=self.experience,
            ledger=self.ledger,
            recall_config=self.recall_config,
            memory_files=self.memory_files,
            recall=lambda context, config: self.recall(context, config=config),
            ingest=self.ingest,
            append=lambda entries: self.append(entries, index=False),
            writer_lock=self.writer_lock,
        )

    def health(self, *, acknowledge: bool = False, by: str | None = None) -> HealthReport:
        """What the store holds, what failed, and whether its views agree (lca.health). A store whose
        index or settings cannot be read is reported, not refused. ``acknowledge`` first records the
        quarantined lines present now as reviewed (their bytes stay), under the writer lock."""
        if acknowledge:
            with self.writer_lock():
                acknowledge_quarantine(self.layout, self.transcript, by=by)
        index: IndexStore | None = None
        index_error: LCAError | None = None
        try:
            index = self._index_as_it_is()
        except LCAError as exc:  # a damaged catalog, or one of another schema: a failed check, named
            index_error = exc
        return store_health(
            layout=self.layout,
            transcript=self.transcript,
            memory=self.memory,
            index=index,
            embedder=self.embedder,
            ledger=self.ledger,
            count_tokens=self.count_tokens,
            critical_budget=self.critical_budget,
            index_error=index_error,
            settings_errors=tuple(self._settings_errors.values()),
            events=self.events,
            recall_log=None if "recall" in self._settings_errors else self.recall_log(),  # broken: named above
        )

    # ---- progress ----------------------------------------------------------------
    def _bar(self, total: int, desc: str, unit: str) -> Any:
        if not self.progress or total == 0:
            return None

        return tqdm(total=total, desc=desc, unit=unit, leave=False)

    def _progress(self, items: Sequence[Any], desc: str, unit: str) -> Iterable[Any]:
        if not self.progress or len(items) < 2:
            return items

        return tqdm(items, desc=desc, unit=unit, leave=False)


def _settings_error(path: Path, exc: Exception) -> LCAError:
    """A settings file's error as one line that names the file (a YAML error spans several lines)."""
    if isinstance(exc, RecordFormatError):
        return RecordFormatError(" ".join(exc.reason.split()), path=str(path), line=exc.line, field=exc.field)
    text = " ".join(str(exc).split())
    if isinstance(exc, LCAError):
        return LCAError(text if str(path) in text else f"{path}: {text}")
    return RecordFormatError(f"cannot be read: {type(exc).__name__}: {text}", path=str(path))
