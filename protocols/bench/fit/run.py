"""``lca fit retrieval``: the steps in order (options checked before any model loads; one pass for the parts;
the folds fitted; one pass for the held-out rankings; the comparison; the weights fitted on every group written
only when the held-out folds show they beat the defaults). Exit 0 written, 1 refused, 2 a usage error."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lca.errors import LCAError
from lca.params import ParameterError
from lca.retrieval import RetrievalConfig
from protocols.bench.fit.model import FitError, FitSettings, fit_weights, group_folds
from protocols.bench.fit.record import BOOTSTRAP_SEED, RESAMPLES, compare, held_out_mapping, write_config
from protocols.bench.fit.retrieval import TARGETS, collect, fitted_names, fold_configs, held_out_rows, with_weights
from protocols.bench.retrieval.config import dataset_config
from protocols.evals.benchmark import build_provenance, dataset_provenance
from protocols.evals.datasets import dataset_plugin, retrieval_spec


def starting_config(args) -> RetrievalConfig:
    """``--config`` or the dataset's ``retrieval.yaml``: the defaults the fit must beat, and its starting point."""
    return RetrievalConfig.from_file(args.config) if args.config else dataset_config(args.dataset)


def fit_retrieval(args, *, embedder=None) -> int:
    """The command's run; ``embedder`` stands in for the real one (MiniLM behind the embedding cache) in tests."""
    try:
        if args.dataset not in TARGETS:
            raise ValueError(f"unknown dataset {args.dataset!r}; known: {', '.join(TARGETS)}")
        config = starting_config(args)
        names = fitted_names(config)
        settings = FitSettings(depth=args.depth, c=args.c)
        if args.limit is not None and args.limit < 2:
            raise ValueError(f"--limit must be at least 2 (folds need two groups), not {args.limit}")
        if settings.depth < 1 or settings.c <= 0:
            raise ValueError("--depth must be at least 1 and --c above 0")
        plugin = dataset_plugin(args.dataset)
        file = retrieval_spec(args.dataset).file
        path = plugin.find_file(file, args.data)
        if path is None:
            raise ValueError(
                f"no {args.dataset} file: pass --data PATH (the official file or a folder holding it) or set LCA_DATA"
            )
    except (ValueError, ParameterError, LCAError, FileNotFoundError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2

    started = time.perf_counter()
    target = TARGETS[args.dataset]
    options = {option.keyword: getattr(args, option.dest) for option in retrieval_spec(args.dataset).options}
    workdir = Path(args.workdir)
    if embedder is None:
        from lca.index.embedders import SentenceTransformerEmbedder  # torch: loaded when the run starts
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache, cache_queries=True)

    def progress(desc: str):
        return lambda items: tqdm(items, desc=f"fit {args.dataset}: {desc}", unit="q", disable=args.quiet)

    try:
        run = dict(embedder=embedder, limit=args.limit, workdir=workdir, **options)
        collected = collect(plugin, path, config, progress=progress("parts"), **run)
        groups = sorted(set(collected.group_of.values()))
        folds = group_folds(groups, target.folds, splits=args.folds)
        configs = fold_configs(collected, config, folds, settings)
        fold_of = {group: i for i, (_, held) in enumerate(folds) for group in held}
        fitted_rows = held_out_rows(plugin, path, fold_of, configs, progress=progress("held out"), **run)
        defaults = {name: getattr(config, name) for name in names}
        final = fit_weights(collected.questions, names, defaults, settings)
    except FitError as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if hasattr(embedder, "close"):
            embedder.close()
    weights = [{n: getattr(c, n) for n in names} for c in configs]
    fold_of_question = {qid: fold_of[g] for qid, g in collected.group_of.items()}
    held = compare(target.metric, target.value, collected.rows, fitted_rows, fold_of_question, folds, weights)
    print(held.verdict())
    print(f"weights fitted on every group: {final} (defaults {defaults})")
    if not held.beats_defaults:
        return 1
    provenance = build_provenance(
        embedder_id=embedder.embedder_id,
        datasets=[dataset_provenance(path, file)],
        seeds={"bootstrap": BOOTSTRAP_SEED},
        wall_seconds=time.perf_counter() - started,
    )
    header: dict[str, Any] = {
        "dataset": args.dataset,
        "data": {
            "path": str(path),
            "sha256": provenance.datasets[0].sha256,
            "official": provenance.datasets[0].official,
        },
        "defaults": args.config or f"protocols/evals/{args.dataset}/retrieval.yaml",
        "fitted": names,
        "defaults_weights": defaults,
        "model": f"pairwise logistic regression (scikit-learn), weights >= 0, {settings.anchor} kept; "
        f"C {settings.c}, {settings.depth} irrelevant candidates a question",
        "folds": {"scheme": target.folds, "count": len(folds), "groups": len(groups)},
        "seeds": {"bootstrap": BOOTSTRAP_SEED, "resamples": RESAMPLES, "fit": "deterministic (lbfgs)"},
        "held_out": held_out_mapping(held),
        "code_version": provenance.code_version,
        "revision": provenance.revision,
        "tree_clean": provenance.tree_clean,
        "embedder": provenance.embedder_id,
        "date": provenance.date,
        "command": " ".join(provenance.command) if provenance.command else None,
    }
    out = Path(args.out)
    write_config(out, with_weights(config, final).to_dict(), header)
    print(f"wrote {out}")
    return 0
