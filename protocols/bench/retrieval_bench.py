"""``lca bench retrieval``: the product's ranking scored by the benchmarks' own retrieval metrics, no LLM.

Every retriever asks a real store built through the importers (one per LongMemEval haystack, one per LoCoMo
conversation; ``protocols.bench.retrieval.stores``):
- ``bm25`` and ``dense``: the store's plain lexical and dense search (the baselines);
- ``hybrid``: ``IndexStore.search`` under a ``RetrievalConfig`` (``lca.retrieval``): the dataset's file
  beside its task (``protocols/evals/<dataset>/retrieval.yaml``, or ``--config FILE``), then ``--fusion``,
  then each ``--set name=value``;
- ``resonance``: the store's recall (``Substrate.recall``: the hybrid's candidates re-weighed by the resonance
  terms), its ranked candidates first, the rest in hybrid order.

``--ablate`` asks the same stores again with each part of the hybrid off; ``--grid name=v1,v2`` with every
combination of some values (on LoCoMo each conversation is also scored under the combination that is best
on the other nine: the held-out figure). Embeddings are cached by content hash (``--cache``), so a warm run
embeds nothing.

Each output is a ``BenchmarkResult`` (``protocols.bench.retrieval.report``): ``<out>.json`` (benchmark
``retrieval``: the summary figures, one row per question or item, the issue's targets as checks),
``<out>-ablation.json`` and ``<out>-grid.json`` (``retrieval-ablation``, ``retrieval-grid``), each with its
markdown table beside it (``.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lca.params import ParameterError
from lca.retrieval import RetrievalConfig
from protocols.bench.registry import Benchmark
from protocols.bench.retrieval.config import RETRIEVERS, dataset_config, grid_variants


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=["longmemeval", "locomo"], required=True)
    parser.add_argument("--data", help="the official file (plain, .gz or .xz) or a folder holding it")
    parser.add_argument("--retriever", choices=list(RETRIEVERS), default="hybrid")
    parser.add_argument("--config", help="a RetrievalConfig YAML file instead of the dataset's retrieval.yaml")
    parser.add_argument("--fusion", choices=["z", "rrf", "blend"], help="the hybrid's fusion (over the config's)")
    parser.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override one field of the RetrievalConfig, e.g. bm25_weight=0.3 or context_weight=0 "
        "(an unknown name is refused with the list of every field); repeatable",
    )
    parser.add_argument(
        "--sentence-keys",
        choices=["on", "off"],
        default="off",
        help="build the stores with sentence keys (each sentence of a multi-sentence chunk also a dense key)",
    )
    parser.add_argument(
        "--roles",
        choices=["all", "user"],
        default="all",
        help="LongMemEval: build each store from every turn (default, as an agent's store holds them) or from the "
        "user turns alone (the official retrieval units)",
    )
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="hybrid: ask the stores again once per part that is on, with it off; writes <out>-ablation.json and .md",
    )
    parser.add_argument(
        "--grid",
        action="append",
        metavar="NAME=V1,V2",
        help="hybrid: every combination of these values; writes <out>-grid.json (LoCoMo: with the held-out figure)",
    )
    parser.add_argument("--limit", type=int, help="first N questions (LongMemEval) or conversations (LoCoMo)")
    parser.add_argument("--cache", default="results/bench/cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--out", default="results/bench/{dataset}-{retriever}{units}.json")
    parser.add_argument("--quiet", action="store_true")


def checked_config(args) -> RetrievalConfig:
    """The run's RetrievalConfig: the dataset's file (or ``--config``), ``--fusion``, then each ``--set`` (which
    wins over ``--fusion``). Options that do not apply to the run are refused (``ValueError`` or
    ``ParameterError``) before any file is read or model loaded."""
    config = RetrievalConfig.from_file(args.config) if getattr(args, "config", None) else dataset_config(args.dataset)
    if getattr(args, "fusion", None):
        config = config.with_overrides([f"fusion={args.fusion}"], flag="--fusion")
    config = config.with_overrides(list(getattr(args, "set", None) or []))
    retriever = args.retriever
    if getattr(args, "roles", "all") != "all" and args.dataset != "longmemeval":
        raise ValueError("--roles applies to LongMemEval (both LoCoMo speakers are users)")
    if (getattr(args, "ablate", False) or getattr(args, "grid", None)) and retriever != "hybrid":
        raise ValueError("--ablate and --grid vary the hybrid's RetrievalConfig: they need --retriever hybrid")
    return config


def run_configs(args, config: RetrievalConfig) -> dict[str, RetrievalConfig]:
    """The configurations one pass over the stores asks: the run's, then any ablation or grid variant."""
    configs = {"default": config}
    if getattr(args, "ablate", False):
        keyed = getattr(args, "sentence_keys", "off") == "on"
        configs |= {f"without {name}": variant for name, variant in config.ablations(sentence_keys=keyed).items()}
    configs |= {f"grid {name}": variant for name, variant in grid_variants(config, args.grid).items()}
    return configs


def out_path(args) -> Path:
    return Path(args.out.format(dataset=args.dataset, retriever=args.retriever, units=""))


def held_out(per_variant: dict[str, dict[str, Any]], metric: str = "recall@5") -> dict[str, Any]:
    """Leave one conversation out: each conversation scored under the variant best on the others."""
    samples = sorted({row["sample_id"] for report in per_variant.values() for row in report["per_item"]})

    def mean(rows):
        return sum(r[metric] for r in rows) / len(rows) if rows else 0.0

    chosen, rows = {}, []
    for sample in samples:
        best = max(
            per_variant,
            key=lambda name: mean([r for r in per_variant[name]["per_item"] if r["sample_id"] != sample]),
        )
        chosen[sample] = best
        rows += [r for r in per_variant[best]["per_item"] if r["sample_id"] == sample]
    fitted = max(per_variant, key=lambda name: per_variant[name]["overall"][metric])
    return {
        "metric": metric,
        "held_out": mean(rows),
        "chosen_per_conversation": chosen,
        "fitted": per_variant[fitted]["overall"][metric],
        "fitted_variant": fitted,
    }


def run_retrieval_bench(args) -> int:
    try:  # options are checked before any file is read or model loaded
        config = checked_config(args)
        configs = run_configs(args, config)
    except (ValueError, ParameterError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2

    from tqdm import tqdm

    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder
    from protocols.bench.result import build_provenance, dataset_provenance
    from protocols.bench.retrieval.report import DATASETS, run_result, write_report
    from protocols.data_paths import find_data_file

    path = find_data_file(DATASETS[args.dataset], args.data)
    if path is None:
        raise FileNotFoundError(
            f"no {args.dataset} file: pass --data PATH (a file in the official format, plain, "
            ".gz or .xz, or a folder holding it) or set LCA_DATA"
        )
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache, cache_queries=True)
    workdir = out_path(args).parent / "work-retrieval"

    def progress(items, desc: str = f"{args.dataset} {args.retriever}"):
        return tqdm(items, desc=desc, unit="q", disable=args.quiet)

    started = time.perf_counter()
    reports = _run(args, path, embedder, workdir, progress, configs)
    wall_seconds = time.perf_counter() - started
    provenance = build_provenance(
        embedder_id=embedder.embedder_id,
        datasets=[dataset_provenance(path, DATASETS[args.dataset])],
        seeds={},
        wall_seconds=wall_seconds,
        extra={"embedding_cache": {"hits": embedder.hits, "misses": embedder.misses, "path": str(embedder.path)}},
    )
    run_config = run_record_config(args, config)
    out = out_path(args)
    write_report(run_result(reports["default"], config=run_config, provenance=provenance), out)
    if getattr(args, "ablate", False):
        ablation = _comparison("ablation", "without ", reports, configs, run_config, provenance)
        write_report(ablation, out.with_name(f"{out.stem}-ablation.json"))
    if args.grid:
        grid_config = run_config | {"grid": list(args.grid)}
        locomo = args.dataset == "locomo"
        grid = _comparison("grid", "grid ", reports, configs, grid_config, provenance, leave_one_out=locomo)
        write_report(grid, out.with_name(f"{out.stem}-grid.json"))
    embedder.close()
    return 0


def run_record_config(args, config: RetrievalConfig) -> dict[str, Any]:
    """What a run asked, as its record's ``config``: the dataset, the retriever, the full RetrievalConfig, how
    the stores were built and, for ``resonance``, the RecallConfig recall is asked with."""
    out: dict[str, Any] = {
        "dataset": args.dataset,
        "retriever": args.retriever,
        "retrieval_config": config.to_dict(),
        "sentence_keys": args.sentence_keys == "on",
        "roles": args.roles,
        "limit": args.limit,
    }
    if args.retriever == "resonance":
        out["recall_config"] = bench_recall_config()
        out["recall_pool"] = "each store's: min(its chunks, 100)"
    return out


def bench_recall_config(pool: int = 100) -> dict[str, Any]:
    """The RecallConfig the resonance retriever asks each store's recall with (``HaystackStore.recall_config``)
    for a store of ``pool`` chunks or more; a smaller store's pool is its number of chunks."""
    from protocols.bench.result import jsonable
    from protocols.bench.retrieval.stores import recall_config_for

    return jsonable(recall_config_for(pool))


def _comparison(kind: str, prefix: str, reports, configs, run_config, provenance, *, leave_one_out: bool = False):
    """The ablation's or the grid's record (``kind``): the variants asked as ``<prefix><name>`` against the
    default, with the leave-one-conversation-out figure over them when ``leave_one_out``."""
    from protocols.bench.retrieval.report import comparison_result

    variants = {
        key[len(prefix) :]: (configs[key].to_dict(), report)
        for key, report in reports.items()
        if key.startswith(prefix)
    }
    loco = held_out({name: report for name, (_, report) in variants.items()}) if leave_one_out else None
    return comparison_result(
        kind, reports["default"], variants, config=run_config, provenance=provenance, held_out=loco
    )


def _run(args, path: Path, embedder, workdir: Path, progress: Callable, configs) -> dict[str, dict[str, Any]]:
    from protocols.bench.retrieval.runners import run_locomo, run_longmemeval

    options: dict[str, Any] = {"roles": args.roles} if args.dataset == "longmemeval" else {}
    runner = run_locomo if args.dataset == "locomo" else run_longmemeval
    return runner(
        path,
        args.retriever,
        embedder=embedder,
        limit=args.limit,
        progress=progress,
        workdir=workdir,
        configs=configs,
        sentence_keys=args.sentence_keys == "on",
        **options,
    )


BENCHMARK = Benchmark(
    name="retrieval",
    help="benchmark retrieval through real stores, scored by the official metrics, no LLM: bm25, dense, hybrid "
    "or resonance recall",
    description="LongMemEval or LoCoMo retrieval scored by the benchmarks' own metrics with no LLM in the loop; "
    "every retriever asks a real store built through the importers; --ablate and --grid vary the store's "
    "RetrievalConfig.",
    add_arguments=add_arguments,
    run=run_retrieval_bench,
)
