"""The index benchmark's query timing: hybrid search beside a brute-force numpy baseline over the same vectors,
each component on its own, interleaved per query and then back to back, and the top-10 overlap check."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from lca.substrate import Substrate
from protocols.bench.index import QUIET_OTHER_CORES, SEED, SEQUENTIAL_OPS, TOP_K, WARMUP_QUERIES
from protocols.bench.index.instruments import CpuWatch, one_blas_thread, summary
from protocols.evals.benchmark import loadavg

Op = Callable[[str, Any], None]
COMPONENT_OPS = ("query_embedding", "faiss_search", "bm25_search", "catalog_fetch")


def top_owners(scores, owners: list[tuple[int, ...]], k: int) -> list[int]:
    """The k best owners by their best vector: ``owners[i]`` names whoever vector ``i`` keys (a chunk's
    own text vector id, for each chunk that text or sentence serves). With one vector per chunk this is
    the plain top k; with sentence keys a chunk counts once, at its best key, as dense search ranks it."""
    scores = np.asarray(scores)
    depth = min(len(scores), max(k, 1) * 8)
    while True:
        top = np.argpartition(-scores, depth - 1)[:depth] if depth < len(scores) else np.arange(len(scores))
        chosen: list[int] = []
        for i in top[np.argsort(-scores[top], kind="stable")]:
            for owner in owners[i]:
                if owner not in chosen:
                    chosen.append(owner)
            if len(chosen) >= k:
                return chosen[:k]
        if depth >= len(scores):
            return chosen
        depth = min(len(scores), depth * 4)


def top_of(scores):
    """The TOP_K best positions of a score vector, best first."""
    top = np.argpartition(-scores, TOP_K - 1)[:TOP_K]
    return top[np.argsort(-scores[top], kind="stable")]


def open_reader(work: Path, embedder, first_query: str) -> tuple[Any, float]:
    """A reader opening the store from disk, and the milliseconds its open and first search took."""
    started = time.perf_counter()
    reader = Substrate(work, embedder=embedder)
    try:
        reader.search(first_query, k=TOP_K)
    except BaseException:
        reader.close()
        raise
    return reader, (time.perf_counter() - started) * 1000


@dataclass
class QueryOps:
    """The timed operations, each called as ``op(query, query vector)``, and the exact baseline's matrix.

    ``prepare`` embeds a query once (outside the timings) and records the faiss ids and BM25 rows the
    catalog-fetch op then reads."""

    ops: dict[str, Op]
    prepare: Callable[[str], Any]
    qvecs: dict[str, Any]
    matrix: Any
    row_ids: Any
    owners: list[tuple[int, ...]]
    pool: int


def query_ops(reader, embedder) -> QueryOps:
    index = reader.index
    vectors = index.vectors
    lexical = index.lexical
    pool = max(index.pool, TOP_K)
    matrix, row_ids = index.stored_vectors()
    owners = index.vector_owners(row_ids)

    def numpy_topk(qvec: np.ndarray) -> np.ndarray:
        return top_of(matrix @ qvec)

    def op_hybrid(q: str, qvec: np.ndarray) -> None:
        reader.search(q, k=TOP_K)

    def op_baseline(q: str, qvec: np.ndarray) -> None:
        numpy_topk(embedder.embed_query(q))

    def op_embed(q: str, qvec: np.ndarray) -> None:
        embedder.embed_query(q)

    def op_numpy(q: str, qvec: np.ndarray) -> None:
        numpy_topk(qvec)

    def op_faiss(q: str, qvec: np.ndarray) -> None:
        vectors.search(qvec, pool)

    def op_bm25(q: str, qvec: np.ndarray) -> None:
        lexical.search(q, pool)

    fetch_inputs: dict[str, tuple[list[int], list[int]]] = {}

    def op_catalog(q: str, qvec: np.ndarray) -> None:
        ids, rows = fetch_inputs[q]
        candidates = index.rows_of_vectors(ids) + rows
        index.chunks_by_rows(candidates[:TOP_K])

    ops: dict[str, Op] = {
        "hybrid": op_hybrid,
        "baseline_numpy": op_baseline,
        "query_embedding": op_embed,
        "numpy_matmul_topk": op_numpy,
        "faiss_search": op_faiss,
        "bm25_search": op_bm25,
        "catalog_fetch": op_catalog,
    }
    qvecs: dict[str, np.ndarray] = {}

    def prepare(q: str) -> np.ndarray:
        if q not in qvecs:
            qvecs[q] = embedder.embed_query(q)
            _, ids = vectors.search(qvecs[q], pool)
            _, rows = lexical.search(q, pool)
            fetch_inputs[q] = (ids.tolist(), rows.tolist())
        return qvecs[q]

    return QueryOps(ops, prepare, qvecs, matrix, row_ids, owners, pool)


@dataclass
class Interleaved:
    """Per-op timings of the interleaved loop, the top-10 overlaps, and other processes' load per query."""

    times: dict[str, list[float]]
    overlap_dense: list[float]
    overlap_faiss: list[float]
    overlap_hybrid: list[float]
    other_cores: list[float]
    cpu: dict[str, float]


def warm_up(bench: QueryOps, queries: list[str]) -> None:
    for q in queries[:WARMUP_QUERIES]:
        qvec = bench.prepare(q)
        for op in bench.ops.values():
            op(q, qvec)


def interleaved_loop(bench: QueryOps, reader, queries: list[str]) -> Interleaved:
    """Every op once per query, in a shuffled order, then the overlap of dense, faiss and hybrid results with
    the exact scan (the vectors for faiss, the chunks ranked at their best vector for the searches)."""
    ops = bench.ops
    times: dict[str, list[float]] = {name: [] for name in ops}
    order_rng = random.Random(SEED)
    overlap_dense, overlap_faiss, overlap_hybrid = [], [], []
    other_cores: list[float] = []
    loop_watch = CpuWatch()
    query_watch = CpuWatch()
    vectors, catalog = reader.index.vectors, reader.index.catalog_
    for q in tqdm(queries, desc="queries", unit="query"):
        qvec = bench.prepare(q)
        names = list(ops)
        order_rng.shuffle(names)  # no op always runs first (or right after another)
        query_watch.restart()
        for name in names:
            t0 = time.perf_counter()
            ops[name](q, qvec)
            times[name].append((time.perf_counter() - t0) * 1000)
        other_cores.append(query_watch.read()["other_cores"])
        scores = bench.matrix @ qvec  # once for both: the exact vectors and the exact chunks
        exact = set(bench.row_ids[top_of(scores)].tolist())
        base = set(top_owners(scores, bench.owners, TOP_K))
        # each hit's vector as the catalog records it by chunk id (a hit redacted when read no longer hashes to it)
        dense_ids = set(
            catalog.chunk_text_vectors([h.chunk_id for h in reader.search(q, k=TOP_K, mode="dense")]).values()
        )
        hybrid_ids = set(catalog.chunk_text_vectors([h.chunk_id for h in reader.search(q, k=TOP_K)]).values())
        _, fids = vectors.search(qvec, TOP_K)
        overlap_dense.append(len(dense_ids & base) / len(dense_ids) if dense_ids else 0.0)
        overlap_faiss.append(len(set(fids.tolist()) & exact) / TOP_K)
        overlap_hybrid.append(len(hybrid_ids & base) / len(hybrid_ids) if hybrid_ids else 0.0)
    return Interleaved(times, overlap_dense, overlap_faiss, overlap_hybrid, other_cores, loop_watch.read())


def back_to_back(bench: QueryOps, queries: list[str], names) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Each named op in its own loop over every query: its latency with no other thread pool run just before."""
    watch = CpuWatch()
    stats: dict[str, dict[str, float]] = {}
    for name in names:
        values = []
        for q in queries:
            qvec = bench.qvecs[q]
            t0 = time.perf_counter()
            bench.ops[name](q, qvec)
            values.append((time.perf_counter() - t0) * 1000)
        stats[name] = summary(values)
    return stats, watch.read()


def measure_latency(
    reader, embedder, queries: list[str], cold_ms: float, load_before: list[float] | None
) -> dict[str, Any]:
    """The ``latency`` section of the result: interleaved and back-to-back timings and the overlap check."""
    bench = query_ops(reader, embedder)
    norms = np.linalg.norm(bench.matrix, axis=1)
    # numpy's OpenBLAS threads busy-wait after each call; on 2 cores they fight torch's
    # OpenMP threads and an embed right after a matmul can take ~10x longer. A one-query
    # gemv gains nothing from threads, so the baseline (and every op in the interleaved
    # loop, which would otherwise slow the hybrid search timed next to it) runs with BLAS
    # limited to one thread; the default-thread baseline is timed on its own afterwards.
    blas_limit, blas_note = one_blas_thread()
    with blas_limit:
        warm_up(bench, queries)
        loop = interleaved_loop(bench, reader, queries)
        # The same operations each in its own back-to-back loop: no other thread pool
        # (torch, faiss, BLAS) ran just before, so the gap to the interleaved numbers is the
        # cost of switching between them, which a real search pays between embed and faiss.
        sequential, sequential_cpu = back_to_back(bench, queries, SEQUENTIAL_OPS)
    # Outside the limit: the baseline as numpy runs it by default, and hybrid beside it.
    default_blas, default_cpu = back_to_back(bench, queries, ("hybrid", "baseline_numpy"))

    latency = {name: summary(values) for name, values in loop.times.items()}
    quiet = [i for i, load in enumerate(loop.other_cores) if load < QUIET_OTHER_CORES]
    quiet_latency = (
        {name: summary([values[i] for i in quiet]) for name, values in loop.times.items()} if len(quiet) >= 20 else None
    )
    hybrid, baseline = latency["hybrid"], latency["baseline_numpy"]
    matrix = bench.matrix
    return {
        "queries": len(queries),
        "warmup_queries": min(WARMUP_QUERIES, len(queries)),
        "k": TOP_K,
        "pool": bench.pool,
        "cold_open_and_first_search_ms": round(cold_ms, 1),
        "stats": latency,
        "hybrid_over_baseline_p50": round(hybrid["p50_ms"] / baseline["p50_ms"], 3),
        "hybrid_over_baseline_p95": round(hybrid["p95_ms"] / baseline["p95_ms"], 3),
        "hybrid_p50_minus_component_p50s_ms": round(
            hybrid["p50_ms"] - sum(latency[p]["p50_ms"] for p in COMPONENT_OPS), 3
        ),
        "baseline_matrix": {
            "rows": int(matrix.shape[0]),
            "dimension": int(matrix.shape[1]),
            "bytes": int(matrix.nbytes),
            "max_norm_deviation": round(float(np.abs(norms - 1).max()), 6),
        },
        "top10_overlap": {
            "dense_search_vs_numpy_mean": round(float(np.mean(loop.overlap_dense)), 4),
            "dense_search_vs_numpy_min": round(float(np.min(loop.overlap_dense)), 4),
            "faiss_vs_numpy_mean": round(float(np.mean(loop.overlap_faiss)), 4),
            "hybrid_vs_numpy_mean": round(float(np.mean(loop.overlap_hybrid)), 4),
        },
        "query_chars_mean": round(float(np.mean([len(q) for q in queries])), 1),
        "blas_threads": blas_note,
        "sequential_loops": {"stats": sequential, "cpu": sequential_cpu},
        "sequential_loops_default_blas_threads": {"stats": default_blas, "cpu": default_cpu},
        "cpu": loop.cpu,
        "loadavg_before_ingest": load_before,
        "loadavg_after_queries": loadavg(),
        "queries_with_other_cores_below": {"threshold": QUIET_OTHER_CORES, "count": len(quiet), "stats": quiet_latency},
        "other_cores_per_query": {
            "p50": round(float(np.percentile(loop.other_cores, 50)), 3),
            "max": round(float(np.max(loop.other_cores)), 3),
        },
    }
