"""``lca bench retrieval``: the substrate's recall scored by the benchmarks' own retrieval metrics,
with no LLM in the loop.

Retrievers, so each layer's contribution shows:
- ``bm25``: bm25s with the substrate's tokenizer (lowercase, English stopwords, Snowball stems);
- ``dense``: all-MiniLM-L6-v2 cosine; a unit longer than the embedder's input is split by the
  substrate's chunker and scores as its best piece (never truncated);
- ``hybrid``: ``HybridConfig``: z-scored dense plus 0.5 x z-scored BM25, sentence keys, one round
  of Rocchio feedback, and each dataset's signals (temporal anchors; for LoCoMo also the
  neighbour-context key, question-turn, answer-after-question and named-speaker signals). Each part
  is a weight ``--set`` can zero, so each can be ablated; ``--fusion rrf`` is the substrate store's
  reciprocal-rank fusion alone. Chosen on the dev splits only (docs/benchmarks.md);
- ``resonance``: the full recall pipeline of a real substrate built from the haystack (transcript,
  faiss, bm25s, SQLite), candidates ranked by resonance score R with the question date as
  ``as_of``; the units beyond its candidate pool follow in hybrid order. ``--sentence-keys on``
  builds that substrate with the store's sentence keys.

LoCoMo is scored over dialog turns, observations or session summaries (``--units``), the LoCoMo
paper's three RAG settings. Embeddings are cached by content hash across runs (``--cache``), so a
warm run embeds nothing.

The parts live in ``protocols.bench.retrieval``; this module checks the options, runs and registers it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from lca.params import ParameterError
from protocols.bench.registry import Benchmark
from protocols.bench.retrieval.config import HYBRID_DEFAULTS, RETRIEVERS, HybridConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=["longmemeval", "locomo"], required=True)
    parser.add_argument("--data", help="the official file (plain, .gz or .xz) or a folder holding it")
    parser.add_argument("--retriever", choices=list(RETRIEVERS), default="hybrid")
    parser.add_argument("--fusion", choices=["z", "rrf"], help="hybrid fusion (default z; rrf is the store's)")
    parser.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override one field of the hybrid's HybridConfig, e.g. bm25_weight=0.3 or sentences=off "
        "(an unknown name is refused with the list of every field); repeatable",
    )
    parser.add_argument(
        "--context",
        choices=["on", "off"],
        help="score each unit also through its neighbours (default: on for LoCoMo, off for LongMemEval)",
    )
    parser.add_argument(
        "--anchors",
        choices=["on", "off"],
        help="temporal anchors (default on): relative times read against the question date, and "
        "absolute dates in the question (LoCoMo has no question date: absolute only)",
    )
    parser.add_argument(
        "--units",
        choices=["turns", "observations", "summaries"],
        help="LoCoMo retrieval units: dialog turns (default), the record's observations, or its "
        "session summaries (the LoCoMo paper's three RAG settings); LongMemEval uses user turns",
    )
    parser.add_argument(
        "--sentence-keys",
        choices=["on", "off"],
        help="resonance only: build the substrate with the store's sentence keys, each sentence of "
        "a multi-sentence chunk also a dense key (default off, the substrate's default)",
    )
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="after the hybrid run, run it again once per part that is on (each weight at 0, "
        "sentence keys off, names kept in the embedded query) and write <out>-ablation.json "
        "and .md",
    )
    parser.add_argument("--limit", type=int, help="first N questions (LongMemEval) or conversations (LoCoMo)")
    parser.add_argument("--cache", default="results/bench/cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--out", default="results/bench/{dataset}-{retriever}{units}.json")
    parser.add_argument("--quiet", action="store_true")


def checked_config(args) -> HybridConfig:
    """The run's hybrid configuration: the dataset's defaults, ``--fusion``, then each ``--set`` (which wins
    over ``--fusion``). Options that do not apply to the run are refused (``ValueError`` or
    ``ParameterError``) before any file is read or model loaded."""
    units = getattr(args, "units", None)
    if units is not None and args.dataset != "locomo":
        raise ValueError("--units applies to LoCoMo only (LongMemEval's official units are user turns)")
    config = HYBRID_DEFAULTS[args.dataset]
    if args.fusion:
        config = replace(config, fusion=args.fusion)
    config = config.with_overrides(list(getattr(args, "set", None) or []))
    if getattr(args, "sentence_keys", None) is not None and args.retriever != "resonance":
        raise ValueError(
            "--sentence-keys is the substrate store's option: it applies to --retriever resonance "
            "(the hybrid's own sentence keys are --set sentences=on|off)"
        )
    if getattr(args, "ablate", False) and (args.retriever != "hybrid" or config.fusion != "z"):
        raise ValueError(
            "--ablate turns off the parts of the hybrid's z fusion one at a time: "
            "it needs --retriever hybrid and --fusion z"
        )
    return config


def runner_options(args, config: HybridConfig) -> dict[str, Any]:
    """The keyword options the runner gets: the config, and each on/off option the command line set."""
    options: dict[str, Any] = {"config": config}
    if args.context is not None:
        options["context"] = args.context == "on"
    if args.anchors is not None:
        options["anchors"] = args.anchors == "on"
    if getattr(args, "units", None) is not None:
        options["units"] = args.units
    if getattr(args, "sentence_keys", None) is not None:
        options["sentence_keys"] = args.sentence_keys == "on"
    return options


def out_path(args) -> Path:
    units = getattr(args, "units", None)
    return Path(
        args.out.format(
            dataset=args.dataset, retriever=args.retriever, units=f"-{units}" if units and units != "turns" else ""
        )
    )


def run_ablation(
    run: Callable[..., dict[str, Any]], report: dict[str, Any], dataset: str, options: dict[str, Any], progress
) -> dict[str, Any]:
    """The run again once per part of the hybrid that is on and used, each with that part off: its headline
    figures and their change from the default run's."""
    from protocols.bench.retrieval.config import ablations
    from protocols.bench.retrieval.report import headline

    default = headline(report, dataset)
    ablation: dict[str, Any] = {"default": default, "variants": {}}
    for variant, variant_config in ablations(options["config"], uses=set(report["weights_used"])).items():
        variant_report = run(
            progress=lambda items, v=variant: progress(items, f"without {v}"), **{**options, "config": variant_config}
        )
        metrics = headline(variant_report, dataset)
        ablation["variants"][variant] = {
            "config": asdict(variant_config),
            "metrics": metrics,
            "delta": {n: metrics[n] - default[n] for n in default},
        }
    return ablation


def run_retrieval_bench(args) -> int:
    try:  # options are checked before any file is read or model loaded
        config = checked_config(args)
    except (ValueError, ParameterError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2

    from tqdm import tqdm

    from lca.importers import file_sha256
    from lca.index.chunker import Chunker
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder
    from lca.provenance import code_version
    from protocols.bench.retrieval.report import ablation_table, markdown_table, write_report
    from protocols.bench.retrieval.runners import run_locomo, run_longmemeval
    from protocols.data_paths import find_data_file

    path = find_data_file("locomo" if args.dataset == "locomo" else "longmemeval_s_dev", args.data)
    if path is None:
        raise FileNotFoundError(
            f"no {args.dataset} file: pass --data PATH (a file in the official format, plain, "
            ".gz or .xz, or a folder holding it) or set LCA_DATA"
        )
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache)
    chunker = Chunker(embedder)
    workdir = Path(args.out).parent / "work-retrieval"

    def progress(items, desc: str = f"{args.dataset} {args.retriever}"):
        return tqdm(items, desc=desc, unit="q", disable=args.quiet)

    def cache_state() -> dict[str, Any]:
        return {"path": str(embedder.path), "hits": embedder.hits, "misses": embedder.misses}

    started = time.perf_counter()
    runner = run_longmemeval if args.dataset == "longmemeval" else run_locomo
    options = runner_options(args, config)

    def run(**kwargs: Any) -> dict[str, Any]:
        return runner(
            path, args.retriever, embedder=embedder, chunker=chunker, limit=args.limit, workdir=workdir, **kwargs
        )

    report = run(progress=progress, **options)
    report["provenance"] = {
        "dataset": args.dataset,
        "file": str(path),
        "sha256": file_sha256(path),
        "retriever": args.retriever,
        "embedder": embedder.embedder_id,
        "options": {**options, "config": asdict(config)},
        "code_version": code_version(),
        "limit": args.limit,
        "embedding_cache": cache_state(),
        "wall_seconds": time.perf_counter() - started,
    }
    out = out_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_report(out, report, markdown_table(report, args.dataset))
    if getattr(args, "ablate", False):
        ablation = run_ablation(run, report, args.dataset, options, progress)
        ablation["provenance"] = {
            **report["provenance"],
            "wall_seconds": time.perf_counter() - started,
            "embedding_cache": cache_state(),
        }
        write_report(out.with_name(f"{out.stem}-ablation.json"), ablation, ablation_table(ablation, args.dataset))
    embedder.close()
    return 0


BENCHMARK = Benchmark(
    name="retrieval",
    help="benchmark retrieval scored by the official metrics, no LLM: bm25, dense, hybrid or full resonance recall",
    description="LongMemEval or LoCoMo retrieval scored by the benchmarks' own metrics with no LLM in the loop, "
    "for the bm25, dense, hybrid or resonance retriever; --ablate measures what each part of the "
    "hybrid adds.",
    add_arguments=add_arguments,
    run=run_retrieval_bench,
)
