"""``lca bench recall``: full resonance recall beside plain hybrid search, in one loop.

Runs on the store ``lca bench index`` built (``results/bench/work-index`` by default):
for each LongMemEval_S dev question, times plain hybrid search (k = 10) and full
recall (fixed-k policy, all terms) interleaved in random order, reports p50 / p95 of
both and their ratio (targets: recall p50 at most 1.5x search, recall p95 at most
50 ms), the injected tokens per turn under each policy, and the gravity-well figures.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from tqdm import tqdm

from lca.importers import load_official_json
from lca.layout import StoreLayout
from protocols.bench.gravity_well import simulate
from protocols.evals import data_paths
from protocols.evals.benchmark import (
    Benchmark,
    BenchmarkResult,
    build_provenance,
    dataset_provenance,
    jsonable,
    loadavg,
    write_result,
)

TARGETS = {"recall_over_search_p50": 1.5, "recall_p95_ms": 50.0}
SEED = 7  # the order search and recall take within each query


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", default="results/bench/work-index", help="the store (default: lca bench index's)")
    parser.add_argument("--data", help="LongMemEval_S dev file or data folder (for the queries)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--token-queries", type=int, default=100)
    parser.add_argument("--gravity-queries", type=int, default=5000)
    parser.add_argument(
        "--out",
        default="results/bench/recall.json",
        help="the result record (default results/bench/recall.json); a file already there is replaced, said on stderr",
    )


def _stats(values: list[float]) -> dict[str, float]:
    import numpy as np

    arr = np.asarray(values)
    return {
        "n": len(values),
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "mean_ms": round(float(arr.mean()), 3),
    }


def run_recall_bench(args) -> int:
    import numpy as np

    from lca.recall import RecallConfig, RecallContext
    from lca.substrate import Substrate

    started = time.perf_counter()
    work = Path(args.work)
    if not StoreLayout(work).catalog.exists():
        print(
            f"lca bench recall: no store at {work}; build it first with `lca bench index` (or pass --work)",
            file=sys.stderr,
        )
        return 2
    data = data_paths.find_data_file("longmemeval_s_dev", args.data)
    if data is None:
        print(
            "lca bench recall: the LongMemEval_S dev file was not found; pass --data or set $LCA_DATA", file=sys.stderr
        )
        return 2
    queries = [str(r["question"]) for r in load_official_json(data)][: args.queries]
    rng = random.Random(SEED)
    load_before = loadavg()
    with Substrate(work) as substrate:
        chunks = substrate.index.stats()["chunks"]
        for q in queries[:5]:  # warm: model, traced encoder, row maps, memory cache, logs
            substrate.search(q, k=10)
            substrate.recall(RecallContext(q))
        times: dict[str, list[float]] = {"search": [], "recall": []}
        for q in tqdm(queries, desc="queries", unit="query"):
            order = ["search", "recall"]
            rng.shuffle(order)
            for name in order:
                started_query = time.perf_counter()
                if name == "search":
                    substrate.search(q, k=10)
                else:
                    substrate.recall(RecallContext(q))
                times[name].append((time.perf_counter() - started_query) * 1000)
        load_after = loadavg()
        tokens: dict[str, dict[str, float]] = {}
        for policy in ("fixed-k", "adaptive", "none"):
            config = RecallConfig(policy=policy)
            per_turn = [substrate.recall(RecallContext(q), config=config).tokens for q in queries[: args.token_queries]]
            tokens[policy] = {
                "mean": round(float(np.mean(per_turn)), 1),
                "p50": float(np.median(per_turn)),
                "max": int(max(per_turn)),
                "turns": len(per_turn),
                "turns_with_nothing_injected": int(sum(1 for t in per_turn if t == 0)),
            }
        embedder_id = substrate.embedder.embedder_id
    search, recall = _stats(times["search"]), _stats(times["recall"])
    ratio = recall["p50_ms"] / search["p50_ms"]
    gravity = simulate(queries=args.gravity_queries)
    result = BenchmarkResult(
        benchmark="recall",
        metrics={
            "store": {"path": str(work), "chunks": chunks},
            "latency": {
                "search": search,
                "recall": recall,
                "recall_over_search_p50": round(ratio, 3),
                "recall_over_search_p95": round(recall["p95_ms"] / search["p95_ms"], 3),
            },
            "injected_tokens_per_turn": tokens,
            "gravity_well": gravity,
        },
        checks={
            "recall_over_search_p50": {
                "value": round(ratio, 3),
                "target": f"<= {TARGETS['recall_over_search_p50']}",
                "pass": ratio <= TARGETS["recall_over_search_p50"],
            },
            "recall_p95_ms": {
                "value": recall["p95_ms"],
                "target": f"<= {TARGETS['recall_p95_ms']}",
                "pass": recall["p95_ms"] <= TARGETS["recall_p95_ms"],
            },
        },
        config={
            "args": {
                "work": str(work),
                "queries": args.queries,
                "token_queries": args.token_queries,
                "gravity_queries": args.gravity_queries,
            },
            "targets": TARGETS,
            "recall_config": jsonable(RecallConfig()),
        },
        rows=tuple(
            {"query": i, "search_ms": round(s, 3), "recall_ms": round(r, 3)}
            for i, (s, r) in enumerate(zip(times["search"], times["recall"]))
        ),
        provenance=build_provenance(
            embedder_id=embedder_id,
            datasets=[dataset_provenance(data, "longmemeval_s_dev")],
            seeds={"order": SEED, "gravity_well": gravity["params"]["seed"]},
            wall_seconds=time.perf_counter() - started,
            load={"before_queries": load_before, "after_queries": load_after},
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    print(f"recall benchmark on {work} ({chunks} chunks), {len(queries)} queries interleaved")
    print(f"  search  p50 {search['p50_ms']:.2f} ms  p95 {search['p95_ms']:.2f} ms")
    print(f"  recall  p50 {recall['p50_ms']:.2f} ms  p95 {recall['p95_ms']:.2f} ms   x{ratio:.2f} of search at p50")
    for policy, t in tokens.items():
        print(
            f"  tokens/turn {policy:<9} mean {t['mean']:>7.1f}  max {t['max']:>5}  "
            f"nothing injected in {t['turns_with_nothing_injected']}/{t['turns']} turns"
        )
    for name, fig in gravity["figures"].items():
        print(f"  gravity well {name:<16} top-1% share {fig['top1pct_share']:.3f}")
    for name, check in result.checks.items():
        print(f"  [{'PASS' if check['pass'] else 'FAIL'}] {name}: {check['value']}")
    print(f"  written to {out}")
    return 0


BENCHMARK = Benchmark(
    name="recall",
    help="full resonance recall beside plain hybrid search on the index benchmark's store; tokens per policy; "
    "gravity-well figures",
    description="Full resonance recall and plain hybrid search timed interleaved on the store `lca bench index` "
    "built, the injected tokens per turn under each policy, and the gravity-well figures.",
    add_arguments=add_arguments,
    run=run_recall_bench,
)
