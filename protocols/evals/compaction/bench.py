"""The compaction protocol's substrate figures without an agent model: each probe of a scenario file through
each condition with ``protocols.harness.substrate.replay_probe`` (the harness's replay, the real embedder), read at the
pointer level from the injected items:

- constraint probes: how many of the constraint turns (the probe's evidence) are not among the injected pointers;
- correction probes: how many mistaken turns (the probe's ``forbidden`` turns: the wrong turn and any stale
  artifact repeating it) are injected while the correction turn (its evidence) is not;
- interruption probes: whether the open thread's turn (any evidence turn) is in the first context built.

Summaries inject no pointers: their pointer-level values say nothing and are printed as n/a (the task's
``compaction`` scorer reads their text). ``lca bench compaction --help``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result
from protocols.evals.compaction.dataset import DEFAULT_SCENARIOS
from protocols.harness.scenario import load_scenarios
from protocols.harness.substrate import condition_params, replay_probe, runtime_factory

CONDITIONS = ("truncation", "summary", "transcript-recall", "full-lca")
POINTERLESS = ("summary", "adversarial-summary")


def pointer_measures(row: Mapping[str, Any]) -> dict[str, float]:
    """The pointer-level values of one ``replay_probe`` row, by its category (only the ones that apply)."""
    # lazy: the scorer loads the harness's solvers (numpy), and the bench registry imports this module for --help
    from protocols.evals.compaction.scorer import CONSTRAINT, CORRECTION, INTERRUPTION

    injected = set(row["pointers"])
    gold, forbidden = list(row["gold"]), list(row["forbidden"])
    category = row["category"]
    if category == CONSTRAINT:
        return {"constraints_missing": float(sum(1 for g in gold if g not in injected))}
    if category == CORRECTION:
        corrected = any(g in injected for g in gold)
        return {"repeated_mistakes": 0.0 if corrected else float(sum(1 for f in forbidden if f in injected))}
    if category == INTERRUPTION:
        return {"resume_context": float(any(g in injected for g in gold))}
    return {}


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over the probes each measure applies to, the probe counts, and the injected tokens."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for name, value in pointer_measures(row).items():
            values.setdefault(name, []).append(value)
    out: dict[str, Any] = {name: round(sum(v) / len(v), 3) for name, v in values.items()}
    out["probes"] = {name: len(v) for name, v in values.items()}
    out["injected_tokens_mean"] = round(sum(r["injected_tokens"] for r in rows) / len(rows), 1) if rows else 0.0
    return out


def measure(
    path: Path | str, conditions: Mapping[str, Mapping[str, Any]], make_runtime, *, limit: int | None = None
) -> dict[str, Any]:
    """Every probe through every condition (``replay_probe``): rows and figures per condition."""
    scenarios, digest = load_scenarios(path)
    pairs = [(s, p) for s in scenarios for p in s.probes][: limit or None]
    out: dict[str, Any] = {"file": str(path), "sha256": digest, "conditions": {}}
    for name, params in conditions.items():
        started = time.perf_counter()
        rows = [replay_probe(name, params, scenario, probe, make_runtime) for scenario, probe in pairs]
        out["conditions"][name] = {
            "params": dict(params),
            "figures": figures(rows),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "rows": [{k: r[k] for k in ("scenario", "probe", "category", "pointers", "injected_tokens")} for r in rows],
        }
    return out


# ---- the command ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenarios", default=str(DEFAULT_SCENARIOS), help="the compaction scenario file")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated condition names")
    parser.add_argument(
        "--param", action="append", default=[], metavar="CONDITION:NAME=VALUE", help="a condition parameter"
    )
    parser.add_argument("--budget", type=int, default=600, help="every condition's budget_tokens (the task's default)")
    parser.add_argument("--summarizer", choices=("none", "smollm2"), default="none")
    parser.add_argument("--cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="at most this many probes (for quick looks)")
    parser.add_argument("--out", default="results/bench/compaction.json", help="the record: figures and rows")


def run_compaction_bench(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.conditions.split(",") if n.strip()]
    try:
        params = condition_params(names, args.param)
    except Exception as exc:  # an unknown condition or parameter is refused before anything loads
        print(f"lca bench compaction: {exc}", file=sys.stderr)
        return 2
    for name in names:
        params[name].setdefault("budget_tokens", args.budget)
    if "full-lca" in params and args.summarizer == "none":
        params["full-lca"].setdefault("consolidate", 0)
    make, embedder, generators = runtime_factory(args)
    started = time.perf_counter()
    measured = measure(args.scenarios, params, make, limit=args.limit)
    result = BenchmarkResult(
        benchmark="compaction",
        metrics={name: block["figures"] for name, block in measured["conditions"].items()},
        config={
            "conditions": {name: block["params"] for name, block in measured["conditions"].items()},
            "budget_tokens": args.budget,
            "summarizer": next(iter(generators.values())).model_id if generators else None,
            "limit": args.limit,
        },
        rows=tuple(
            {"condition": name, **row} for name, block in measured["conditions"].items() for row in block["rows"]
        ),
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(measured["file"], sha256=measured["sha256"])],
            seeds={"seed": args.seed},
            wall_seconds=time.perf_counter() - started,
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    print(f"compaction, substrate level (pointers), no agent model; budget {args.budget} tokens; {measured['file']}")
    for name, block in measured["conditions"].items():
        f = block["figures"]
        shown = {k: ("n/a" if name in POINTERLESS else f.get(k)) for k in ("constraints_missing", "repeated_mistakes")}
        resume = "n/a" if name in POINTERLESS else f.get("resume_context")
        print(
            f"  {name:<18} constraints missing {shown['constraints_missing']}  repeated mistakes "
            f"{shown['repeated_mistakes']}  open thread in first context {resume}  tokens {f['injected_tokens_mean']}"
            f"  ({block['wall_seconds']} s)"
        )
    print(f"written to {out}")
    return 0


BENCHMARK = Benchmark(
    name="compaction",
    help="compaction's substrate figures: constraints missing, mistakes repeated, open thread resumed (no agent model)",
    description="Replays each probe of the compaction scenarios through each condition with the real embedder and no "
    "agent model, and reports per condition, read from the injected pointers, the constraint turns missing, the "
    "mistaken turns injected without their correction and whether the open thread's turn is in the first context "
    "(summaries inject no pointers: n/a; the task's compaction scorer reads their text).",
    add_arguments=add_arguments,
    run=run_compaction_bench,
)
