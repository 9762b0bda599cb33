"""``lca bench retrieval``: the product's ranking scored by the benchmarks' own retrieval metrics, no LLM.

Every retriever asks a real store built through the importers (one per LongMemEval haystack, one per LoCoMo
conversation; ``protocols.bench.retrieval.stores``):
- ``bm25`` and ``dense``: the store's plain lexical and dense search (the baselines);
- ``hybrid``: ``IndexStore.search`` under a ``RetrievalConfig`` (``lca.retrieval``): the dataset's file
  beside its task (``protocols/evals/<dataset>/retrieval.yaml``, or ``--config FILE``), then ``--fusion``,
  then each ``--set name=value``;
- ``resonance``: the store's recall (``Substrate.recall``), ranked candidates first, the rest in hybrid order;
- ``legacy``: the benchmark-only ranker this replaces, kept to compare against until the store's path
  matches it on the dev splits.

``--ablate`` asks the same stores again with each part of the hybrid off; ``--grid name=v1,v2`` with every
combination of some values (on LoCoMo each conversation is also scored under the combination that is best
on the other nine: the held-out figure). Embeddings are cached by content hash (``--cache``), so a warm run
embeds nothing.
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
    if retriever == "legacy" and (args.set or args.fusion or getattr(args, "config", None)):
        raise ValueError("--retriever legacy runs the old benchmark-only ranker at its own weights: no --set")
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

    from lca.importers import file_sha256
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder
    from lca.provenance import code_version
    from protocols.bench.retrieval.report import ablation_table, grid_table, markdown_table, write_report
    from protocols.data_paths import find_data_file

    path = find_data_file("locomo" if args.dataset == "locomo" else "longmemeval_s_dev", args.data)
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
    report = reports["default"]
    report["provenance"] = {
        "dataset": args.dataset,
        "file": str(path),
        "sha256": file_sha256(path),
        "retriever": args.retriever,
        "embedder": embedder.embedder_id,
        "retrieval_config": config.to_dict(),
        "sentence_keys": args.sentence_keys == "on",
        "roles": args.roles,
        "code_version": code_version(),
        "limit": args.limit,
        "embedding_cache": {"path": str(embedder.path), "hits": embedder.hits, "misses": embedder.misses},
        "wall_seconds": time.perf_counter() - started,
    }
    out = out_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_report(out, report, markdown_table(report, args.dataset))
    if getattr(args, "ablate", False):
        ablation = _compare(report, reports, configs, "without ", args.dataset)
        write_report(out.with_name(f"{out.stem}-ablation.json"), ablation, ablation_table(ablation, args.dataset))
    if args.grid:
        grid = _compare(report, reports, configs, "grid ", args.dataset)
        if args.dataset == "locomo":
            grid["leave_one_conversation_out"] = held_out({n: reports[f"grid {n}"] for n in grid["variants"]})
        write_report(out.with_name(f"{out.stem}-grid.json"), grid, grid_table(grid, args.dataset))
    embedder.close()
    return 0


def _run(args, path: Path, embedder, workdir: Path, progress: Callable, configs) -> dict[str, dict[str, Any]]:
    if args.retriever == "legacy":
        from lca.index.chunker import Chunker
        from protocols.bench.retrieval.legacy import run_locomo as legacy_locomo
        from protocols.bench.retrieval.legacy import run_longmemeval as legacy_longmemeval

        legacy = legacy_locomo if args.dataset == "locomo" else legacy_longmemeval
        report = legacy(
            path,
            "hybrid",
            embedder=embedder,
            chunker=Chunker(embedder),
            limit=args.limit,
            progress=progress,
            workdir=workdir,
        )
        return {"default": report}
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


def _compare(report: dict[str, Any], reports: dict[str, Any], configs, prefix: str, dataset: str) -> dict[str, Any]:
    """The default's headline figures and those of each variant named ``<prefix><name>``, with their change."""
    from protocols.bench.retrieval.report import headline

    default = headline(report, dataset)
    out: dict[str, Any] = {"default": default, "variants": {}, "provenance": report["provenance"]}
    for key, variant in reports.items():
        if not key.startswith(prefix):
            continue
        metrics = headline(variant, dataset)
        out["variants"][key[len(prefix) :]] = {
            "config": configs[key].to_dict(),
            "metrics": metrics,
            "delta": {n: metrics[n] - default[n] for n in default},
        }
    return out


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
