"""``lca bench recall-log``: the recall log stays under its bound over a long life of recalls.

Every recall appends about 24 KB to ``logs/recall.jsonl`` (``lca.recall_log``), so an agent that recalls for months
would fill a disk unless the log rotates, compacts and drops its oldest segments. This bench builds a store from a
shipped scenario file (every history's sessions, so it needs no benchmark data), asks ``--recalls`` real recalls
through ``Substrate.recall`` (the probes' questions in turn, with the real embedder; query embeddings are cached, so
the loop measures recall and its log, not the model), reads the log's size on disk every ``--every`` recalls, and
reports the largest size seen against the bound, the segments kept and dropped, the records still readable, the
recall rate, and health's ``recall_log`` check at the end. The check passes when the log never exceeded its bound.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lca.recall_log import RecallLog
from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result
from protocols.harness.scenario import load_scenarios

DEFAULT_SCENARIOS = "data/scenarios/continuity-v1.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recalls", type=int, default=100_000, help="how many recalls (default 100,000)")
    parser.add_argument("--max-bytes", type=int, help="the log's bound in bytes (default: RecallConfig's, 64 MiB)")
    parser.add_argument("--every", type=int, default=500, help="read the log's size every N recalls")
    parser.add_argument("--scenarios", default=DEFAULT_SCENARIOS, help="the scenario file the store is built from")
    parser.add_argument("--work", default="results/bench/work-recall-log", help="the store (rebuilt each run)")
    parser.add_argument("--cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--out", default="results/bench/recall-log.json")


def soak(substrate: Any, queries: list[str], recalls: int, every: int, *, progress: bool = True) -> dict[str, Any]:
    """Ask ``recalls`` recalls, cycling through ``queries``; the log's size read every ``every`` recalls."""
    log = RecallLog(substrate.layout.recall_log, max_bytes=substrate.recall_config.log_max_bytes)
    sizes: list[int] = []
    started = time.perf_counter()
    for n in tqdm(range(recalls), desc="recalls", unit="recall", disable=not progress, mininterval=2.0):
        substrate.recall(queries[n % len(queries)])
        if (n + 1) % every == 0 or n + 1 == recalls:
            sizes.append(log.size().bytes)
    seconds = time.perf_counter() - started
    size = log.size()
    return {
        "recalls": recalls,
        "seconds": round(seconds, 2),
        "recalls_per_second": round(recalls / seconds, 1) if seconds else None,
        "max_bytes": size.max_bytes,
        "largest_bytes_seen": max(sizes) if sizes else 0,
        "final_bytes": size.bytes,
        "segments": size.segments,
        "dropped_segments": size.dropped_segments,
        "records_readable": sum(1 for _ in log.records()),
        "sizes_read": len(sizes),
    }


def run_recall_log_bench(args: argparse.Namespace) -> int:
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.recall import RecallConfig
    from lca.substrate import Substrate

    if args.recalls < 1 or args.every < 1:
        print("lca bench recall-log: --recalls and --every must be at least 1", file=sys.stderr)
        return 2
    path = Path(args.scenarios)
    if not path.exists():
        print(f"lca bench recall-log: no scenario file at {path}", file=sys.stderr)
        return 2
    scenarios, _ = load_scenarios(path)
    embedder: Any = SentenceTransformerEmbedder()
    if args.cache:
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.cache, cache_queries=True)
    config = RecallConfig() if args.max_bytes is None else RecallConfig(log_max_bytes=args.max_bytes)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    with Substrate(work, embedder=embedder, recall_config=config, progress=True) as substrate:
        for scenario in scenarios:
            for session in scenario.sessions:
                substrate.append(list(scenario.entries(session)))
        substrate.ingest()
        queries = [probe.question for scenario in scenarios for probe in scenario.probes]
        metrics = soak(substrate, queries, args.recalls, args.every)
        health = next(c for c in substrate.health().checks if c.name == "recall_log")
    metrics["health"] = {"status": health.status.value, "detail": health.detail}
    metrics["queries"] = len(set(queries))
    under = metrics["largest_bytes_seen"] <= metrics["max_bytes"]
    result = BenchmarkResult(
        benchmark="recall-log",
        metrics=metrics,
        checks={
            "largest_bytes_seen_le_bound": {
                "value": float(metrics["largest_bytes_seen"]),
                "target": float(metrics["max_bytes"]),
                "pass": under,
            }
        },
        config={
            "recalls": args.recalls,
            "every": args.every,
            "scenarios": str(path),
            "max_bytes": config.log_max_bytes,
        },
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(path)],
            wall_seconds=time.perf_counter() - started,
        ),
    )
    write_result(result, Path(args.out))
    mib = 2**20
    print(
        f"recall-log: {metrics['recalls']:,} recalls in {metrics['seconds']:.0f} s ({metrics['recalls_per_second']}/s); "
        f"largest log {metrics['largest_bytes_seen'] / mib:.1f} MiB of {metrics['max_bytes'] / mib:.0f} MiB "
        f"({'under' if under else 'OVER'} its bound), {metrics['segments']} segments kept, "
        f"{metrics['dropped_segments']} dropped, {metrics['records_readable']:,} records readable; "
        f"health: {metrics['health']['status']}; written to {args.out}"
    )
    return 0 if under else 1


BENCHMARK = Benchmark(
    name="recall-log",
    help="the recall log stays under its bound over many recalls (default 100,000; real embedder, no model)",
    description="Builds a store from a shipped scenario file, asks --recalls real recalls, reads the recall log's "
    "size every --every recalls and reports the largest size seen against its bound, segments kept and dropped, "
    "the records still readable, the recall rate and health's recall_log check.",
    add_arguments=add_arguments,
    run=run_recall_log_bench,
)
