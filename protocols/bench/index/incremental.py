"""The index benchmark's incremental step (issue 54): new sessions of ``turns`` turns ingested one at a time into
the built store, what a long-lived agent pays after each session, timed whole and by phase; beside them, in the
same run, full rebuilds of the lexical index over the same store, what every ingest paid before the index kept
segments. The lexical part of each ingest is timed alone too: the index as saved before the session, brought to the
catalog after it (``Bm25LexicalIndex.synced``) and saved into a copy of its folder, as the ingest's flush does."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from lca.importers import ImportedSession
from lca.index.lexical import Bm25LexicalIndex
from protocols.bench.index.ingest import Dataset, Selection
from protocols.bench.index.instruments import Meter, measured


def new_sessions(dataset: Dataset, held: set[str], count: int, turns: int) -> list[ImportedSession]:
    """``count`` sessions the store does not hold, in the file's order, each cut to its first ``turns`` turns with
    text; the longest others where too few have that many (each run records its turns)."""
    fresh = [s for s in dataset.sessions if s.session_id not in held]
    with_text = [(s, tuple(e for e in s.entries if e.content.strip())) for s in fresh]
    long_enough = [(s, e) for s, e in with_text if len(e) >= turns]
    others = sorted((p for p in with_text if len(p[1]) < turns), key=lambda p: -len(p[1]))
    return [ImportedSession(s.session_id, e[:turns], s.origins) for s, e in (long_enough + others)[:count]]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def measure_incremental(
    substrate, meter: Meter, dataset: Dataset, selection: Selection, work: Path, *, sessions: int, turns: int
) -> dict[str, Any]:
    index = substrate.index
    held = set(substrate.transcript.session_ids()) | selection.session_ids
    chosen = new_sessions(dataset, held, sessions, turns)
    chunks_before = index.catalog_.chunk_count()
    runs = []
    with tempfile.TemporaryDirectory(prefix=".lexical-scratch-", dir=work.parent) as scratch_dir:
        scratch = Path(scratch_dir) / "lexical"
        for session in chosen:
            shutil.copytree(index.layout.lexical, scratch)  # the index as saved before the session (not timed)
            saved = Bm25LexicalIndex.load(scratch)
            report, wall, cpu, phases = measured(meter, partial(substrate.import_sessions, [session]))
            started = time.perf_counter()
            saved.synced(index.catalog_).save(scratch)
            lexical_seconds = time.perf_counter() - started
            shutil.rmtree(scratch)
            embed = phases.get("embed", {}).get("seconds", 0.0)
            runs.append(
                {
                    "session": session.session_id,
                    "turns": len(session.entries),
                    "new_chunks": report.index.new_chunks,
                    "embedded_texts": report.index.embedded_texts,
                    "wall_seconds": round(wall, 4),
                    "without_embedding_seconds": round(wall - embed, 4),
                    "lexical_seconds": round(lexical_seconds, 4),
                    "phases": phases,
                    "cpu": cpu,
                }
            )
        rebuilds = []
        for _ in range(max(1, len(chosen))):
            started = time.perf_counter()
            rows, texts = index.catalog_.lexical_corpus()
            rebuilt = Bm25LexicalIndex()
            rebuilt.build(rows, texts, index.catalog_.get_meta("chunks_generation") or "")
            rebuilt.save(scratch)
            rebuilds.append(time.perf_counter() - started)
            shutil.rmtree(scratch)
    ingest = _median([r["wall_seconds"] for r in runs])
    lexical = _median([r["lexical_seconds"] for r in runs])
    rebuild = _median(rebuilds)
    return {
        "session_turns": turns,
        "chunks_before": chunks_before,
        "runs": runs,
        "ingest_seconds_median": ingest,
        "ingest_without_embedding_seconds_median": _median([r["without_embedding_seconds"] for r in runs]),
        "lexical_seconds_median": lexical,
        "lexical_rebuild": {
            "documents": index.catalog_.chunk_count(),
            "seconds": [round(s, 4) for s in rebuilds],
            "median_seconds": rebuild,
            "what": "the catalog's chunk texts read, tokenized and indexed whole, and saved (one segment)",
        },
        "lexical_over_rebuild": round(lexical / rebuild, 5) if lexical and rebuild else None,
        "ingest_over_rebuild": round(ingest / rebuild, 4) if ingest and rebuild else None,
        "segments_after": len(index.lexical.segments_.segments),
    }
