"""The index benchmark's exact-versus-bounded step (issue 54): the same queries searched both ways
(``RetrievalConfig.candidates``), interleaved per query in alternating order so both see the same machine state,
with each one's p50/p95 and the bounded top 10's agreement with the exact top 10, at the store's size. A record
per size (this store's, and a run at another ``--chunks``) says where bounded search becomes faster; the auto
switch (``bounded_from``) is set from them."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from protocols.bench.index import TOP_K, WARMUP_QUERIES
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
        "auto_is": "bounded" if index.retrieval.bounded(index.chunk_count()) else "exact",
        "stats": stats,
        "bounded_over_exact_p50": round(stats["bounded"]["p50_ms"] / stats["exact"]["p50_ms"], 3),
        "bounded_over_exact_p95": round(stats["bounded"]["p95_ms"] / stats["exact"]["p95_ms"], 3),
        "top10_agreement_mean": round(float(np.mean(agreement)), 4),
        "top10_agreement_min": round(float(np.min(agreement)), 4),
        "identical_top10_share": round(float(np.mean([a == 1.0 for a in agreement])), 4),
    }
