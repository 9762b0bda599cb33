"""``lca fit retrieval|recall``: the steps in order (options checked before any model loads; one pass for the
parts; the folds fitted; one pass for the held-out rankings; the comparison; the weights fitted on every group
written only when the held-out folds show they beat the defaults). Exit 0 written, 1 refused, 2 a usage error."""

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
from protocols.bench.fit.retrieval import TARGETS, Kind, collect, fold_weights, held_out_rows
from protocols.bench.retrieval.config import AskedConfig, dataset_config, dataset_recall
from protocols.evals.benchmark import build_provenance, dataset_provenance
from protocols.evals.datasets import dataset_plugin, retrieval_spec


def starting_kind(args) -> Kind:
    """What the fit varies, from its defaults: for ``retrieval`` ``--config`` or the dataset's ``retrieval.yaml``;
    for ``recall`` the dataset's retrieval file and ``--config`` (a ``weights:`` file) or its
    ``recall-weights.yaml``. The defaults are what the fit must beat."""
    if args.fit == "recall":
        from protocols.bench.fit.recall import RecallKind, recall_weights_file

        weights = recall_weights_file(args.config) if args.config else dataset_recall(args.dataset)
        return RecallKind(AskedConfig(dataset_config(args.dataset), weights))
    config = RetrievalConfig.from_file(args.config) if args.config else dataset_config(args.dataset)
    return Kind(AskedConfig(config))


def checked(args) -> tuple[Kind, Path]:
    """The kind and the data file, every option checked (``ValueError`` and the like) before any model loads."""
    if args.dataset not in TARGETS:
        raise ValueError(f"unknown dataset {args.dataset!r}; known: {', '.join(TARGETS)}")
    kind = starting_kind(args)
    if args.limit is not None and args.limit < 2:
        raise ValueError(f"--limit must be at least 2 (folds need two groups), not {args.limit}")
    if args.depth < 1 or args.c <= 0:
        raise ValueError("--depth must be at least 1 and --c above 0")
    path = dataset_plugin(args.dataset).find_file(retrieval_spec(args.dataset).file, args.data)
    if path is None:
        raise ValueError(f"no {args.dataset} file: pass --data PATH (the official file or a folder) or set LCA_DATA")
    return kind, path


def fit_command(args, *, embedder=None) -> int:
    """The command's run; ``embedder`` stands in for the real one (MiniLM behind the embedding cache) in tests."""
    try:
        kind, path = checked(args)
    except (ValueError, ParameterError, LCAError, FileNotFoundError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2
    if embedder is None:
        from lca.index.embedders import SentenceTransformerEmbedder  # torch: loaded when the run starts
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache, cache_queries=True)
    started = time.perf_counter()
    target = TARGETS[args.dataset]
    settings = FitSettings(depth=args.depth, c=args.c, anchor=kind.anchor)
    options = {option.keyword: getattr(args, option.dest) for option in retrieval_spec(args.dataset).options}
    plugin = dataset_plugin(args.dataset)

    def progress(desc: str):
        return lambda items: tqdm(items, desc=f"fit {kind.name} {args.dataset}: {desc}", unit="q", disable=args.quiet)

    try:
        run = dict(embedder=embedder, limit=args.limit, workdir=Path(args.workdir), **options)
        collected = collect(kind, plugin, path, progress=progress("parts"), **run)
        groups = sorted(set(collected.group_of.values()))
        folds = group_folds(groups, target.folds, splits=args.folds)
        weights = fold_weights(kind, collected, folds, settings)
        fold_of = {group: i for i, (_, held) in enumerate(folds) for group in held}
        fitted_rows = held_out_rows(kind, plugin, path, fold_of, weights, progress=progress("held out"), **run)
        final = fit_weights(collected.questions, kind.names, kind.defaults, settings, upper=kind.upper())
    except FitError as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if hasattr(embedder, "close"):
            embedder.close()
    fold_of_question = {qid: fold_of[g] for qid, g in collected.group_of.items()}
    held = compare(target.metric, target.value, collected.rows, fitted_rows, fold_of_question, folds, weights)
    print(held.verdict())
    print(f"weights fitted on every group: {final} (defaults {kind.defaults})")
    if not held.beats_defaults:
        return 1
    file = retrieval_spec(args.dataset).file
    provenance = build_provenance(
        embedder_id=embedder.embedder_id,
        datasets=[dataset_provenance(path, file)],
        seeds={"bootstrap": BOOTSTRAP_SEED},
        wall_seconds=time.perf_counter() - started,
    )
    data = provenance.datasets[0]
    header: dict[str, Any] = {
        "dataset": args.dataset,
        "data": {"path": str(path), "sha256": data.sha256, "official": data.official},
        "defaults": args.config or "the dataset's own files (protocols/evals/<dataset>/)",
        "fitted": kind.names,
        "defaults_weights": kind.defaults,
        "model": f"pairwise logistic regression (scikit-learn), weights >= 0 and within their bounds, {kind.anchor} "
        f"kept; C {settings.c}, {settings.depth} irrelevant candidates a question",
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
    write_config(out, kind.written(final), header, kind=kind.name)
    print(f"wrote {out}")
    return 0
