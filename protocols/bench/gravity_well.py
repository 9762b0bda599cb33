"""``lca bench gravity-well``: does use-weighting collapse recall onto a few records?

A long, Zipf-skewed query stream runs against a synthetic store of topic-clustered unit
vectors. Each query injects the top k of a relevance pool, scored three ways in the
same run: relevance only; pure use-weighting (relevance plus a bonus linear in how often
a record was injected, the rich-get-richer well); and the living-memory defenses
(bounded, saturating ACT-R activation with query-diversity weighting, plus labeled UCB
wildcards for dormant relevant records). The figure is the share of all injections
taken by the top 1% of records.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, write_result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--out",
        default="results/bench/gravity-well.json",
        help="the result record (default results/bench/gravity-well.json); a file already there is replaced, "
        "said on stderr",
    )


def simulate(
    *,
    records: int = 2000,
    topics: int = 100,
    queries: int = 4000,
    k: int = 5,
    pool: int = 20,
    zipf: float = 1.1,
    use_weight: float = 0.2,
    seed: int = 11,
    dim: int = 64,
    wildcard_mode: str = "balanced",
) -> dict[str, Any]:
    import numpy as np

    from lca.activation import (
        WILDCARD_MODES,
        Access,
        activation_term,
        base_level_activation,
        query_shape,
        top_share,
        ucb_bonus,
    )

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((topics, dim))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    topic_of = rng.integers(0, topics, records)
    store = centers[topic_of] + 0.35 * rng.standard_normal((records, dim))
    store /= np.linalg.norm(store, axis=1, keepdims=True)
    ranks = np.arange(1, topics + 1)
    topic_p = ranks ** (-zipf) / np.sum(ranks ** (-zipf))
    stream = rng.choice(topics, size=queries, p=topic_p)
    share, temperature = WILDCARD_MODES[wildcard_mode]

    counts: dict[str, Counter[int]] = {
        name: Counter() for name in ("relevance_only", "use_weighted", "living_defenses")
    }
    history: dict[int, list[Access]] = defaultdict(list)
    examined: Counter = Counter()
    wildcards_injected = 0
    t = 0.0
    for topic in stream:
        t += 60.0
        q = centers[topic] + 0.5 * rng.standard_normal(dim)
        q /= np.linalg.norm(q)
        shape = query_shape(q.astype(np.float32))
        sims = store @ q
        cand = np.argpartition(-sims, pool)[:pool]
        cand = cand[np.argsort(-sims[cand], kind="stable")]
        # 1. relevance only
        counts["relevance_only"].update(cand[:k].tolist())
        # 2. pure use-weighting: a bonus linear in past injections, unbounded
        used = counts["use_weighted"]
        scores = sims[cand] + use_weight * np.array([used[i] for i in cand]) / 10.0
        counts["use_weighted"].update(cand[np.argsort(-scores, kind="stable")][:k].tolist())
        # 3. living defenses: bounded activation tilt + wildcards
        acts = np.array([activation_term(base_level_activation(history[i], t)) for i in cand])
        scores = sims[cand] + use_weight * acts
        order = cand[np.argsort(-scores, kind="stable")]
        n_wild = int(round(k * share))
        chosen = list(order[: k - n_wild])
        if n_wild:
            total_exam = sum(examined.values())
            dormant = [i for i in cand if i not in chosen and acts[list(cand).index(i)] < 0.5]
            bonus = sorted(dormant, key=lambda i: -(sims[i] + ucb_bonus(examined[i], total_exam, temperature)))
            wild = bonus[:n_wild]
            examined.update(wild)
            wildcards_injected += len(wild)
            chosen += wild
        counts["living_defenses"].update(int(i) for i in chosen)
        for i in chosen:
            history[int(i)].append(Access(str(i), t, shape))
    out = {
        name: {
            "top1pct_share": round(top_share(c, records), 4),
            "records_ever_recalled": len(c),
            "gini": round(_gini([c.get(i, 0) for i in range(records)]), 4),
        }
        for name, c in counts.items()
    }
    return {
        "figures": out,
        "wildcards_injected": wildcards_injected,
        "params": {
            "records": records,
            "topics": topics,
            "queries": queries,
            "k": k,
            "pool": pool,
            "zipf": zipf,
            "use_weight": use_weight,
            "seed": seed,
            "dim": dim,
            "wildcard_mode": wildcard_mode,
        },
    }


def _gini(values: list[int]) -> float:
    import numpy as np

    x = np.sort(np.asarray(values, dtype=float))
    if x.sum() == 0:
        return 0.0
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1).dot(x) / (n * x.sum()))


def record(simulated: dict[str, Any], provenance) -> BenchmarkResult:
    """A simulation's output as a ``BenchmarkResult``: the figures and wildcard count as metrics, the
    simulation's parameters as config."""
    return BenchmarkResult(
        benchmark="gravity-well",
        metrics={"figures": simulated["figures"], "wildcards_injected": simulated["wildcards_injected"]},
        config=simulated["params"],
        provenance=provenance,
    )


def run_gravity_well_bench(args) -> int:
    started = time.perf_counter()
    simulated = simulate(queries=args.queries, records=args.records, seed=args.seed)
    result = record(
        simulated, build_provenance(seeds={"simulation": args.seed}, wall_seconds=time.perf_counter() - started)
    )
    out = Path(args.out)
    write_result(result, out)
    print("gravity well: share of all injections taken by the top 1% of records")
    for name, fig in result.metrics["figures"].items():
        print(
            f"  {name:<16} {fig['top1pct_share']:.3f}   records ever recalled {fig['records_ever_recalled']:>5}"
            f"   gini {fig['gini']:.3f}"
        )
    print(f"  wildcards injected: {result.metrics['wildcards_injected']}; written to {out}")
    return 0


BENCHMARK = Benchmark(
    name="gravity-well",
    help="share of recalls taken by the top 1%% of records: pure use-weighting versus saturation + diversity + "
    "wildcards",
    description="A Zipf-skewed query stream over a synthetic store: the share of all injections taken by the "
    "top 1% of records under relevance only, pure use-weighting, and the living-memory defenses.",
    add_arguments=add_arguments,
    run=run_gravity_well_bench,
)
