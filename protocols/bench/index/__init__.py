"""The steps of ``lca bench index`` (``protocols/bench/index_bench.py`` runs them in order).

``instruments``: meters, CPU watches and latency summaries; ``ingest``: the sessions chosen, the transcript and
memory ingests and the re-ingest; ``incremental``: new sessions ingested one at a time beside full rebuilds of the
lexical index; ``sizes``: bytes per chunk; ``latency``: the query loops beside the numpy baseline and the top-10
overlap; ``search_modes``: exact and bounded hybrid search side by side; ``report``: checks, the run's
``BenchmarkResult`` and the printed table.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_WORK = Path("results/bench/work-index")
SEED = 20240607
TOP_K = 10
WARMUP_QUERIES = 5
SEQUENTIAL_OPS = ("hybrid", "baseline_numpy", "query_embedding", "faiss_search", "numpy_matmul_topk", "bm25_search")
QUIET_OTHER_CORES = 0.35  # a query counts as uncontended when other processes used less than this
TARGETS = {
    "hybrid_p50_ms": 15.0,
    "hybrid_p95_ms": 40.0,
    "index_bytes_per_chunk_beyond_text": 2048.0,
    "reingest_embedded_texts": 0,
    "ingest_with_detector_ratio": 1.2,  # issue 48: ingest with the change detector over ingest without it
    "incremental_session_seconds": 1.0,  # issue 54: one new session of 20 turns ingested (its target is at 1M chunks)
}
