"""``lca bench freshness``: the operational-freshness protocol's fault scenarios (``protocols/evals/freshness``) run
without inspect: each fault injected into a fresh store and its healthy baseline, the health report read after every
step, one table row per fault (detected, by which check, steps and seconds from onset, false alarms). The scenarios
and the table are the protocol's own (``protocols.evals.freshness.faults``); this module only runs them with the real
embedder and writes a BenchmarkResult. No model is asked anything.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result

# the protocol's fault file, named here: dataset.py has it too, but importing it loads numpy (faults.py) for --help
DEFAULT_FAULTS = Path(__file__).resolve().parent / "faults-v1.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--faults", default=str(DEFAULT_FAULTS), help="the fault file (one FaultSpec per line)")
    parser.add_argument("--only", action="append", help="only this fault id (repeatable)")
    parser.add_argument("--cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--out", default="results/bench/freshness.json")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Detection rate, mean steps and seconds to detection over the detected faults, and false alarms."""
    found = [r for r in rows if r["detected"]]
    mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
    return {
        "faults": len(rows),
        "detected": len(found),
        "detection_rate": round(len(found) / len(rows), 4) if rows else None,
        "mean_steps_to_detection": mean([r["steps_to_detection"] for r in found]),
        "mean_seconds_to_detection": mean([r["seconds_to_detection"] for r in found]),
        "false_alarms": sum(bool(r["false_alarm"]) for r in rows),
        "undetected": [r["id"] for r in rows if not r["detected"]],
    }


def run_freshness_bench(args: argparse.Namespace) -> int:
    from protocols.evals.freshness.faults import load_faults, run_with_baseline, table

    path = Path(args.faults)
    if not path.exists():
        print(f"lca bench freshness: no fault file at {path}", file=sys.stderr)
        return 2
    try:
        specs = load_faults(path)
    except LCAError as exc:
        print(f"lca bench freshness: {exc}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {s.id for s in specs})
        if unknown:
            print(f"lca bench freshness: unknown fault {', '.join(unknown)}; known: {', '.join(s.id for s in specs)}")
            return 2
        specs = [s for s in specs if s.id in args.only]
    from lca.index.embedders import SentenceTransformerEmbedder

    embedder: Any = SentenceTransformerEmbedder()
    if args.cache:
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.cache)
    embedder.embed(["warm up"])  # load once: seconds to detection then measure the stores, not loading the model
    started = time.perf_counter()
    rows = [run_with_baseline(spec, embedder) for spec in specs]
    metrics = summarize(rows)
    result = BenchmarkResult(
        benchmark="freshness",
        metrics=metrics,
        checks={
            r["id"]: {"value": float(r["detected"]), "target": 1.0, "pass": r["detected"] and not r["false_alarm"]}
            for r in rows
        },
        config={"faults": [s.model_dump(mode="json") for s in specs], "agent_model": None},
        rows=tuple(rows),
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(path)],
            wall_seconds=time.perf_counter() - started,
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    out.with_suffix(".md").write_text(table(rows), encoding="utf-8")
    print(f"freshness: each fault injected into a fresh store, health read after every step ({path})")
    print(table(rows))
    print(
        f"{metrics['detected']} of {metrics['faults']} faults detected; {metrics['false_alarms']} false alarm(s); "
        f"written to {out} and {out.with_suffix('.md')}"
    )
    return 0


BENCHMARK = Benchmark(
    name="freshness",
    help="inject each operational fault into a fresh store and measure whether health detects it (no model)",
    description="Runs the freshness protocol's fault scenarios (stale writer, oversize-rejecting embedder, nested "
    "schema drift, critical-set overflow, duplicate writers, a pre_compaction cycle after the prune) and their "
    "healthy baselines with the real embedder, and reports detection, the check, steps and seconds to detection "
    "and false alarms per fault.",
    add_arguments=add_arguments,
    run=run_freshness_bench,
)
