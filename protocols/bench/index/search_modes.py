"""The index benchmark's exact-versus-bounded step (issue 54): the same queries searched both ways
(``RetrievalConfig.candidates``), interleaved per query in alternating order so both see the same machine state,
with each one's p50/p95 and the bounded top 10's agreement with the exact top 10, at the store's size and at the
smaller sizes ``--mode-sizes`` names. A smaller store holds the first sessions of the same selection, built with
the big store's own vectors (``StoredVectors``: no second embedding pass) and no memory files. The record says
from which size bounded search is faster; the auto switch (``RetrievalConfig.bounded_from``) is set from it."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lca.index.frames import bounded_search
from lca.index.vectors import vector_id_for
from lca.ports import Embedder
from lca.substrate import Substrate
from lca.types import text_digest
from protocols.bench.index import TOP_K, WARMUP_QUERIES
from protocols.bench.index.ingest import Dataset, select_sessions
from protocols.bench.index.instruments import one_blas_thread, summary

MODES = ("exact", "bounded")


def measure_search_modes(reader, queries: list[str]) -> dict[str, Any]:
    """The ``search_modes`` section: hybrid search p50/p95 under each mode (query embedding excluded: both embed
    the same query, so it is embedded once, outside the timings) and the top-10 agreement."""
    index = reader.index
    configs = {mode: replace(index.retrieval, candidates=mode) for mode in MODES}
    vectors = {q: index.query_vector(q) for q in queries}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    agreement: list[float] = []
    blas_limit, _ = one_blas_thread()
    with blas_limit:
        for q in queries[:WARMUP_QUERIES]:
            for mode in MODES:
                index.search(q, k=TOP_K, config=configs[mode], query_vector=vectors[q])
        for n, q in enumerate(queries):
            found: dict[str, list[str]] = {}
            for mode in MODES if n % 2 == 0 else reversed(MODES):  # neither mode always runs first
                t0 = time.perf_counter()
                hits = index.search(q, k=TOP_K, config=configs[mode], query_vector=vectors[q])
                times[mode].append((time.perf_counter() - t0) * 1000)
                found[mode] = [h.chunk_id for h in hits]
            exact = found["exact"]
            agreement.append(len(set(exact) & set(found["bounded"])) / len(exact) if exact else 1.0)
    stats = {mode: summary(values) for mode, values in times.items()}
    return {
        "chunks": index.chunk_count(),
        "queries": len(queries),
        "k": TOP_K,
        "pool": index.retrieval.pool,
        "z_all_limit": index.retrieval.z_all_limit,
        "approximate_vectors": bool(index.vectors.approximate),
        "auto_is": "bounded"
        if bounded_search(index.retrieval, index.chunk_count(), index.vectors.approximate)
        else "exact",
        "stats": stats,
        "bounded_over_exact_p50": round(stats["bounded"]["p50_ms"] / stats["exact"]["p50_ms"], 3),
        "bounded_over_exact_p95": round(stats["bounded"]["p95_ms"] / stats["exact"]["p95_ms"], 3),
        "top10_agreement_mean": round(float(np.mean(agreement)), 4),
        "top10_agreement_min": round(float(np.min(agreement)), 4),
        "identical_top10_share": round(float(np.mean([a == 1.0 for a in agreement])), 4),
    }


class StoredVectors:
    """The embedder of a built store answering for its texts with the vectors the store holds (by text hash, as
    the store files them), so a smaller store of the same chunks costs no second embedding pass. Queries go to the
    embedder itself; a text the store does not hold reads as a zero vector, which the store refuses and counts."""

    def __init__(self, index, embedder: Embedder) -> None:
        self.index = index
        self.embedder = embedder

    @property
    def embedder_id(self) -> str:
        return self.embedder.embedder_id

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def max_input_tokens(self) -> int:
        return self.embedder.max_input_tokens

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.embedder.count_tokens(texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.embedder.token_offsets(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        ids = np.asarray([vector_id_for(text_digest(t)) for t in texts], dtype=np.int64)
        return self.index.vectors.reconstruct(ids)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)


def measure_mode_sizes(
    reader, embedder: Embedder, dataset: Dataset, chunker, queries: list[str], sizes: Sequence[int], work: Path
) -> dict[str, Any]:
    """The ``search_modes`` section: ``measure_search_modes`` on a store of each of ``sizes`` smaller than the built
    one (``<work>-modes-<size>``, removed after), then on the built store; and the smallest size from which bounded
    search's p50 is below exact search's at every measured size."""
    built = reader.index.chunk_count()
    records = []
    source = StoredVectors(reader.index, embedder)
    for size in sorted(s for s in set(sizes) if s < built):
        folder = work.parent / f"{work.name}-modes-{size}"
        if folder.exists():
            shutil.rmtree(folder)
        selection = select_sessions(dataset, chunker, size)
        with Substrate(folder, embedder=source, retrieval=reader.index.retrieval) as smaller:
            smaller.import_sessions(selection.sessions, selection.report)
        with Substrate(folder, embedder=source, retrieval=reader.index.retrieval) as smaller:
            records.append(measure_search_modes(smaller, queries))
        shutil.rmtree(folder)
    records.append(measure_search_modes(reader, queries))
    faster = [r["stats"]["bounded"]["p50_ms"] < r["stats"]["exact"]["p50_ms"] for r in records]
    from_size = next((r["chunks"] for i, r in enumerate(records) if all(faster[i:])), None)
    return {"sizes": records, "bounded_faster_from": from_size}
