"""The index benchmark's ingest steps: load the dataset, choose sessions to the target size, ingest the
transcript and the memory files (each metered), and re-ingest one unchanged session."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lca.importers import ImportReport, file_sha256, import_longmemeval, load_official_json
from lca.index.chunker import entry_chunks
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.types import EntryKind
from protocols.bench.index import SEED
from protocols.bench.index.instruments import Meter, measured


@dataclass(frozen=True)
class Dataset:
    """The LongMemEval_S dev file as imported: its sessions, its questions and what loading them took."""

    path: Path
    sessions: list
    import_report: Any
    questions: list
    load_seconds: float
    sha256: str


@dataclass(frozen=True)
class Selection:
    """The sessions ingested: in order until their chunks reach the target (counted, not timed)."""

    sessions: list
    entries_nonempty: int
    chunks_expected: int
    seconds: float
    report: Any  # the ImportReport of just these sessions

    @property
    def session_ids(self) -> set[str]:
        return {s.session_id for s in self.sessions}


def load_dataset(path: Path) -> Dataset:
    started = time.perf_counter()
    sessions, import_report = import_longmemeval(path, share_sessions=True)
    questions = load_official_json(path)
    load_seconds = time.perf_counter() - started
    return Dataset(path, sessions, import_report, questions, load_seconds, file_sha256(path))


def select_sessions(dataset: Dataset, chunker, target_chunks: int) -> Selection:
    """Sessions in order until their chunks reach ``target_chunks``. Chunks are counted with the store's own
    chunker (LongMemEval entries average about 1.6 chunks, so counting entries would overshoot the reference
    size by that factor)."""
    started = time.perf_counter()
    selected = []
    entries_selected = chunks_selected = 0
    for session in dataset.sessions:
        if chunks_selected >= target_chunks:
            break
        selected.append(session)
        for entry in session.entries:
            if entry.content.strip():
                entries_selected += 1
                chunks_selected += len(entry_chunks(entry, chunker))
    seconds = time.perf_counter() - started
    full = dataset.import_report
    report = ImportReport(
        source=full.source,
        source_sha256=full.source_sha256,
        sessions=len(selected),
        entries=sum(len(s.entries) for s in selected),
        repaired=full.repaired,
        unparsed=list(full.unparsed),
    )
    return Selection(selected, entries_selected, chunks_selected, seconds, report)


def meter_ingest(meter: Meter, embedder, index, events=None) -> None:
    """Meter what ingest spends its time on: embedding, token counting, index writes and flushes, and the model-free
    change detector (``events``: the store's ``lca.events.EventBook``) reading the new turns."""
    if events is not None:
        meter.wrap(events, "observe", label="detect_events", items=lambda entries: len(entries))
    meter.wrap(embedder, "embed", items=lambda texts: len(texts))
    meter.wrap(embedder, "count_tokens", items=lambda texts: len(texts))
    meter.wrap(embedder, "token_offsets", items=lambda text: 1)
    meter.wrap(index, "flush", label="index_flush")
    meter.wrap(index.vectors, "save", label="faiss_save")  # inside the flush: the whole faiss file written again
    meter.wrap(index, "add_chunks", label="index_add_chunks", items=lambda chunks, **_: len(chunks))


def measure_transcript_ingest(substrate, meter: Meter, selection: Selection) -> dict[str, Any]:
    transcript_ingest, wall, transcript_cpu, transcript_phases = measured(
        meter, lambda: substrate.import_sessions(selection.sessions, selection.report)
    )
    t_idx = transcript_ingest.index
    return {
        "sessions": len(selection.sessions),
        "entries_nonempty": selection.entries_nonempty,
        "chunks_expected": selection.chunks_expected,
        "selection_seconds": round(selection.seconds, 2),
        "entries_appended": transcript_ingest.entries_appended,
        "entries_duplicate": transcript_ingest.entries_duplicate,
        "entries_indexed": transcript_ingest.entries_indexed,
        "new_chunks": t_idx.new_chunks,
        "duplicate_chunks": t_idx.duplicate_chunks,
        "embedded_texts": t_idx.embedded_texts,
        "reused_vectors": t_idx.reused_vectors,
        "failed_chunks": t_idx.failed_chunks,
        "wall_seconds": round(wall, 3),
        "chunks_per_second": round(t_idx.new_chunks / wall, 2) if wall else None,
        "entries_per_second": round(transcript_ingest.entries_indexed / wall, 2) if wall else None,
        "embedded_texts_per_embed_second": round(
            transcript_phases["embed"]["items"] / transcript_phases["embed"]["seconds"], 2
        )
        if transcript_phases["embed"]["seconds"]
        else None,
        "phases": transcript_phases,
        "cpu": transcript_cpu,
        # the change detector's share, measured in this same ingest: the ingest's wall time over that time less the
        # detector's (issue 48's target: at most 1.2)
        "events_inferred": transcript_ingest.events_inferred,
        "detector_ratio": detector_ratio(wall, transcript_phases),
    }


def detector_ratio(wall: float, phases: dict[str, Any]) -> float | None:
    """Ingest with the change detector over ingest without it, from one run's phases (None: not metered)."""
    detect = (phases.get("detect_events") or {}).get("seconds")
    return round(wall / (wall - detect), 4) if detect is not None and wall > detect else None


def pick_memory_turns(sessions: list, selection: Selection, count: int) -> list[tuple[Any, Any, bool]]:
    """``count`` distinct user turns for memory bodies, seeded: from sessions not ingested first (their bodies
    cite no transcript), then from ingested ones (cited as sources); as ``(session, entry, in_store)``."""
    rng = random.Random(SEED)
    seen: set[str] = set()

    def user_turns(pool, in_store: bool):
        out = []
        for session in pool:
            for entry in session.entries:
                if entry.kind is EntryKind.USER_TURN and entry.content.strip() and entry.content not in seen:
                    seen.add(entry.content)
                    out.append((session, entry, in_store))
        return out

    selected_ids = selection.session_ids
    candidates = user_turns([s for s in sessions if s.session_id not in selected_ids], False)
    if len(candidates) >= count:
        picks = rng.sample(candidates, count)
    else:
        extra = user_turns(selection.sessions, True)
        picks = candidates + rng.sample(extra, min(count - len(candidates), len(extra)))
    order = {id(entry): i for i, (_, entry, _) in enumerate(candidates)}
    picks.sort(key=lambda p: (p[2], order.get(id(p[1]), 0), p[1].id))
    return picks


def _parse_created(timestamp: str) -> datetime:
    try:
        return datetime.fromisoformat(timestamp)
    except (TypeError, ValueError):
        return datetime(2000, 1, 1)


def write_memory_files(substrate, picks: list[tuple[Any, Any, bool]]) -> tuple[int, float]:
    """One unreviewed fact per pick; returns how many cite a transcript span and the seconds writing took."""
    started = time.perf_counter()
    with_sources = 0
    for number, (session, entry, in_store) in enumerate(picks):
        sources = (TranscriptSpan(session=session.session_id, entries=(entry.id,)),) if in_store else ()
        with_sources += bool(sources)
        record = MemoryRecord(
            id=f"bench-mem-{number:05d}",
            type=MemoryType.FACT,
            created=_parse_created(entry.timestamp),
            authority=Authority.UNREVIEWED,
            privacy=Privacy.PRIVATE,
            sources=sources,
        )
        substrate.memory.write(record, entry.content)
    return with_sources, time.perf_counter() - started


def measure_memory_ingest(substrate, meter: Meter, sessions: list, selection: Selection, count: int) -> dict[str, Any]:
    picks = pick_memory_turns(sessions, selection, count)
    with_sources, write_seconds = write_memory_files(substrate, picks)
    memory_ingest, wall, memory_cpu, memory_phases = measured(meter, substrate.ingest)
    m_idx = memory_ingest.index
    return {
        "files_written": len(picks),
        "files_with_sources": with_sources,
        "bodies_from_unselected_sessions": sum(1 for p in picks if not p[2]),
        "write_seconds": round(write_seconds, 3),
        "memory_files_indexed": memory_ingest.memory_files_indexed,
        "new_chunks": m_idx.new_chunks,
        "embedded_texts": m_idx.embedded_texts,
        "reused_vectors": m_idx.reused_vectors,
        "failed_chunks": m_idx.failed_chunks,
        "wall_seconds": round(wall, 3),
        "chunks_per_second": round(m_idx.new_chunks / wall, 2) if wall else None,
        "files_per_second": round(memory_ingest.memory_files_indexed / wall, 2) if wall else None,
        "phases": memory_phases,
        "cpu": memory_cpu,
    }


def measure_reingest(substrate, meter: Meter, selection: Selection) -> dict[str, Any]:
    """Re-ingest the middle selected session, unchanged: it should append and embed nothing."""
    probe = selection.sessions[len(selection.sessions) // 2]
    before = meter.snapshot()
    started = time.perf_counter()
    again = substrate.import_sessions([probe])
    wall = time.perf_counter() - started
    phases = meter.since(before)
    return {
        "session": probe.session_id,
        "entries": len(probe.entries),
        "entries_appended": again.entries_appended,
        "entries_duplicate": again.entries_duplicate,
        "entries_indexed": again.entries_indexed,
        "new_chunks": again.index.new_chunks,
        "embedded_texts": again.index.embedded_texts,
        "embed_calls": phases["embed"]["calls"],
        "embed_texts_passed": phases["embed"]["items"],
        "wall_seconds": round(wall, 3),
        "phases": phases,
    }
