"""``lca bench retrieval``: the product's ranking scored by the benchmarks' own retrieval metrics, no LLM.

The datasets, their files, options (LongMemEval's ``--roles``), rows and targets are the registered dataset
plug-ins' (``protocols.evals.datasets``). Every retriever asks a real store built through the importers (one per
LongMemEval haystack, one per LoCoMo conversation; ``protocols.bench.retrieval.stores``):
- ``bm25`` and ``dense``: the store's plain lexical and dense search (the baselines);
- ``hybrid``: ``IndexStore.search`` under a ``RetrievalConfig`` (``lca.retrieval``): the dataset's file
  beside its task (``protocols/evals/<dataset>/retrieval.yaml``, or ``--config FILE``), then ``--fusion``,
  then each ``--set name=value``;
- ``resonance``: the store's recall (``Substrate.recall``: the hybrid's candidates re-weighed by the resonance
  terms, at the weights of the task's ``recall-weights.yaml`` where it has one), its ranked candidates first, the rest
  in hybrid order.

``--ablate`` asks the same stores again with each part of the hybrid off; ``--grid name=v1,v2`` with every
combination of some values (on LoCoMo each conversation is also scored under the combination that is best
on the other nine: the held-out figure). Embeddings are cached by content hash (``--cache``), so a warm run
embeds nothing.

``--embedder a,b`` builds the stores with each embedder in turn (a registered name, ``lca.index.embedder_choice``,
or a sentence-transformers model folder) and asks them under the same configuration: ``<out>`` is then the record
comparing their headline figures, each with its provenance (benchmark ``retrieval-embedders``,
``protocols.bench.retrieval.embedder_table``), and each run's own records go beside it as
``<out stem>-<embedder>.json``.

Each output is a ``BenchmarkResult`` (``protocols.bench.retrieval.report``): ``<out>.json`` (benchmark
``retrieval``: the summary figures, one row per question or item, the issue's targets as checks),
``<out>-ablation.json`` and ``<out>-grid.json`` (``retrieval-ablation``, ``retrieval-grid``), each with its
markdown table beside it (``.md``). A file already there is replaced, and stderr says so (``write_result``).
The progress bar counts questions. While the run goes, what has finished is kept: at most once a minute, after
a store is done, the records over the stores done so far go to ``<stem>.partial.json`` beside each record (its
``config["partial"]`` says how far it got); an interrupted run (Ctrl-C) writes them once more and exits 130; a
finished run writes its records and removes its partial files.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lca.errors import LCAError
from lca.fileio import atomic_write_bytes
from lca.params import ParameterError
from lca.retrieval import RetrievalConfig
from protocols.bench.retrieval.config import (
    RETRIEVERS,
    AskedConfig,
    dataset_config,
    dataset_recall,
    grid_variants,
    recall_config_for,
    with_assignments,
)
from protocols.bench.retrieval.embedder_table import (
    EmbedderRun,
    embedder_comparison,
    embedder_label,
    write_embedder_table,
)
from protocols.bench.retrieval.report import comparison_result, run_result, write_report
from protocols.evals.benchmark import Benchmark, build_provenance, dataset_provenance, jsonable, write_result
from protocols.evals.dataset_plugin import RetrievalSpec
from protocols.evals.datasets import dataset_plugin, options_by_flag, retrieval_datasets, retrieval_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=list(retrieval_datasets()), required=True)
    parser.add_argument("--data", help="the official file (plain, .gz or .xz) or a folder holding it")
    parser.add_argument("--retriever", choices=list(RETRIEVERS), default="hybrid")
    parser.add_argument("--config", help="a RetrievalConfig YAML file instead of the dataset's retrieval.yaml")
    parser.add_argument("--fusion", choices=["z", "rrf", "blend"], help="the hybrid's fusion (over the config's)")
    parser.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override one setting: a RetrievalConfig field (bm25_weight=0.3, context_weight=0) or, with "
        "--retriever resonance, a resonance weight (weights.temporal=0) or RecallConfig field (recall.mmr_lambda=0.7); "
        "an unknown name is refused with the list of every name; repeatable",
    )
    parser.add_argument(
        "--sentence-keys",
        choices=["on", "off"],
        default=None,
        help="build the stores with sentence keys (each sentence of a multi-sentence chunk also a dense key) or "
        "without; default: as the dataset's retrieval.yaml says (its sentence_keys), and off for bm25 and dense",
    )
    for option, _ in options_by_flag("retrieval").values():  # the options only some datasets read (--roles)
        option.add_to(parser)
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="hybrid or resonance: ask the stores again once per part that is on, with it off (resonance: each "
        "resonance term too); writes <out>-ablation.json and .md",
    )
    parser.add_argument(
        "--grid",
        action="append",
        metavar="NAME=V1,V2",
        help="hybrid or resonance: every combination of these values (names as --set takes); writes "
        "<out>-grid.json (LoCoMo: with the held-out figure)",
    )
    counted = " or ".join(f"{p.retrieval.records} ({p.title})" for p in retrieval_datasets().values() if p.retrieval)
    parser.add_argument("--limit", type=int, help=f"first N {counted}")
    parser.add_argument(
        "--embedder",
        default="minilm",
        metavar="NAME[,NAME...]",
        help="the embedder the stores are built with (registered: see `lca ingest --help`; or a sentence-transformers "
        "model folder); several, comma-separated, run the same benchmark once each: --out is then the record "
        "comparing them, and each run's record goes beside it as <out stem>-<embedder>.json",
    )
    parser.add_argument("--cache", default="results/bench/cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--out", default="results/bench/{dataset}-{retriever}{units}.json")
    parser.add_argument("--quiet", action="store_true")


def checked_config(args) -> AskedConfig:
    """The run's settings: the dataset's RetrievalConfig file (or ``--config``), ``--fusion``, then each
    ``--set`` (which wins over ``--fusion``; recall's names only for ``resonance``). Options that do not apply
    to the run are refused (``ValueError`` or ``ParameterError``) before any file is read or model loaded."""
    ranking = RetrievalConfig.from_file(args.config) if getattr(args, "config", None) else dataset_config(args.dataset)
    if getattr(args, "fusion", None):
        ranking = ranking.with_overrides([f"fusion={args.fusion}"], flag="--fusion")
    retriever = args.retriever
    keys = getattr(args, "sentence_keys", None) or ("off" if retriever in ("bm25", "dense") else None)
    if keys:  # the baselines stay plain: their stores keep no sentence keys unless asked
        ranking = ranking.with_overrides([f"sentence_keys={keys}"], flag="--sentence-keys")
    if retriever in ("bm25", "dense"):  # ... and no window keys (they never read them)
        ranking = ranking.with_overrides(["window_keys=off"], flag="--retriever")
    resonance = retriever == "resonance"
    recall = dataset_recall(args.dataset) if resonance else {}  # the weights its task's full-lca recalls by
    config = with_assignments(AskedConfig(ranking, recall), getattr(args, "set", None), resonance=resonance)
    if getattr(args, "limit", None) is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, not {args.limit}")
    for option, readers in options_by_flag("retrieval").values():
        if option.given(args) and args.dataset not in [p.name for p in readers]:
            raise ValueError(
                f"{option.flag} applies to {' and '.join(p.title for p in readers)}, not "
                f"{dataset_plugin(args.dataset).title}"
            )
    if len(embedder_sources(args)) > 1 and (getattr(args, "ablate", False) or getattr(args, "grid", None)):
        raise ValueError("several --embedder values compare the run's configuration only: drop --ablate and --grid")
    if (getattr(args, "ablate", False) or getattr(args, "grid", None)) and retriever not in ("hybrid", "resonance"):
        raise ValueError(
            "--ablate and --grid vary the hybrid's RetrievalConfig (and recall's settings): they need --retriever "
            "hybrid or resonance"
        )
    return config


def embedder_sources(args) -> list[str]:
    """``--embedder``'s names, each checked (a registered name or a model folder; ``LCAError`` otherwise), once."""
    from lca.index.embedder_choice import embedder_source

    names = [name.strip() for name in (getattr(args, "embedder", None) or "minilm").split(",") if name.strip()]
    sources = list(dict.fromkeys(embedder_source(name) for name in names))
    if not sources:
        raise ValueError("--embedder names no embedder")
    return sources


def run_configs(args, config: AskedConfig) -> dict[str, AskedConfig]:
    """The configurations one pass over the stores asks: the run's, then any ablation or grid variant."""
    resonance = args.retriever == "resonance"
    configs = {"default": config}
    if getattr(args, "ablate", False):
        variants = config.ablations(resonance=resonance)
        configs |= {f"without {name}": variant for name, variant in variants.items()}
    grid = grid_variants(config, getattr(args, "grid", None), resonance=resonance)
    configs |= {f"grid {name}": variant for name, variant in grid.items()}
    return configs


def out_path(args) -> Path:
    """``--out`` with its placeholders filled; a name without ``.json`` gets it (as the ablation's and the
    grid's records beside it do)."""
    path = Path(args.out.format(dataset=args.dataset, retriever=args.retriever, units=""))
    return path if path.suffix == ".json" else path.with_name(f"{path.name}.json")


def held_out(per_variant: dict[str, dict[str, Any]], spec: RetrievalSpec) -> dict[str, Any]:
    """Leave one group out (the dataset's ``HeldOut``; LoCoMo's group is a conversation): each group scored
    under the variant best on the others."""
    if spec.held_out is None:
        raise ValueError("the dataset declares no held-out figure")
    group, metric, summary, rows_key = spec.held_out.group, spec.held_out.metric, spec.held_out.summary, spec.rows
    samples = sorted({row[group] for report in per_variant.values() for row in report[rows_key]})

    def mean(rows):
        return sum(r[metric] for r in rows) / len(rows) if rows else 0.0

    chosen, rows = {}, []
    for sample in samples:
        best = max(
            per_variant,
            key=lambda name: mean([r for r in per_variant[name][rows_key] if r[group] != sample]),
        )
        chosen[sample] = best
        rows += [r for r in per_variant[best][rows_key] if r[group] == sample]
    fitted = max(per_variant, key=lambda name: per_variant[name][summary][metric])
    return {
        "metric": metric,
        "held_out": mean(rows),
        "chosen_per_conversation": chosen,
        "fitted": per_variant[fitted][summary][metric],
        "fitted_variant": fitted,
    }


CHECKPOINT_SECONDS = 60.0  # at most one checkpoint a minute: a store is done every few seconds


def partial_path(path: Path) -> Path:
    """Where a record's checkpoint goes while its run is unfinished: ``<stem>.partial.json`` beside it."""
    return path.with_name(f"{path.stem}.partial.json")


class PartialRecords:
    """Keeps what an unfinished run has finished: after a store is done (``__call__``, a runner's
    ``checkpoint``) it writes, at most every ``CHECKPOINT_SECONDS``, the run's records over the stores done so
    far to ``partial_path`` of each (``config["partial"]`` says how far it got); ``write`` does it now (on an
    interruption). Its first write of a file goes through ``write_result``, which says so when it replaces a
    file an earlier run left; later ones replace its own checkpoint."""

    def __init__(self, records: Callable[[dict[str, dict[str, Any]], dict[str, Any]], list[tuple[Path, Any]]]):
        self.records = records
        self.latest: tuple[Callable[[], dict[str, dict[str, Any]]], int, int] | None = None
        self.last_write = time.monotonic()
        self.written: list[Path] = []

    def __call__(self, snapshot: Callable[[], dict[str, dict[str, Any]]], done: int, total: int) -> None:
        self.latest = (snapshot, done, total)
        if time.monotonic() - self.last_write >= CHECKPOINT_SECONDS:
            self.write()

    def write(self) -> list[Path]:
        if self.latest is None:
            return []
        snapshot, done, total = self.latest
        for path, result in self.records(snapshot(), {"stores_done": done, "stores": total}):
            partial = partial_path(path)
            if partial in self.written:
                atomic_write_bytes(partial, result.to_json().encode("utf-8"))
            else:
                write_result(result, partial)
                self.written.append(partial)
        self.last_write = time.monotonic()
        return list(self.written)

    def remove(self) -> None:
        """The run finished: its final records supersede the checkpoints it wrote."""
        for partial in self.written:
            partial.unlink(missing_ok=True)


def run_retrieval_bench(args) -> int:
    try:  # options are checked before any file is read or model loaded
        config = checked_config(args)
        configs = run_configs(args, config)
        sources = embedder_sources(args)
    except (ValueError, ParameterError, LCAError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2

    file = retrieval_spec(args.dataset).file  # the eval.yaml dataset: where it is found, and its pinned sha256
    path = dataset_plugin(args.dataset).find_file(file, args.data)
    if path is None:
        raise FileNotFoundError(
            f"no {args.dataset} file: pass --data PATH (a file in the official format, plain, "
            ".gz or .xz, or a folder holding it) or set LCA_DATA"
        )
    started = time.perf_counter()
    out = out_path(args)
    runs: dict[str, EmbedderRun] = {}
    for source in sources:  # the same benchmark, stores and configuration, one embedder at a time
        label = embedder_label(source)
        each = out if len(sources) == 1 else out.with_name(f"{out.stem}-{label}.json")  # the comparison is <out>
        code, run = run_one_embedder(args, source, config, configs, path, file, each)
        if run is None:
            return code
        runs[label] = run
    if len(runs) > 1:
        provenance = build_provenance(
            embedder_id=", ".join(str(run.provenance["embedder_id"]) for run in runs.values()),
            datasets=[dataset_provenance(path, file)],
            seeds={},
            wall_seconds=time.perf_counter() - started,
        )
        result = embedder_comparison(runs, config=run_record_config(args, config), provenance=provenance)
        write_embedder_table(result, out)
    return 0


def run_one_embedder(
    args, source: str, config: AskedConfig, configs, path: Path, file, out: Path
) -> tuple[int, EmbedderRun | None]:
    """The benchmark over stores built with one embedder (``source``), its records written to ``out`` (and its
    ablation's and grid's beside it); (130, None) when interrupted, what finished kept in partial records."""
    from lca.index.embedder_choice import make_embedder  # torch: loaded when the run starts
    from lca.index.embedding_cache import CachedEmbedder

    embedder = CachedEmbedder(make_embedder(source), args.cache, cache_queries=True)
    workdir = out.parent / "work-retrieval"
    label = "" if source == "minilm" else f" {embedder_label(source)}"

    def progress(questions, desc: str = f"{args.dataset} {args.retriever}{label}"):
        return tqdm(questions, desc=desc, unit="q", disable=args.quiet)

    started = time.perf_counter()
    run_config = run_record_config(args, config) | {"embedder": source}

    def records(reports: dict[str, dict[str, Any]], partial: dict[str, Any] | None = None) -> list[tuple[Path, Any]]:
        provenance = build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(path, file)],
            seeds={},
            wall_seconds=time.perf_counter() - started,
            extra={"embedding_cache": {"hits": embedder.hits, "misses": embedder.misses, "path": str(embedder.path)}},
        )
        config_now = run_config | ({"partial": partial} if partial else {})
        return run_records(args, reports, configs, config_now, provenance, out=out)

    checkpoints = PartialRecords(records)
    try:
        reports = _run(args, path, embedder, workdir, progress, configs, checkpoint=checkpoints)
        final = records(reports)
    except KeyboardInterrupt:
        kept = checkpoints.write()
        if kept and checkpoints.latest is not None:
            _, done, total = checkpoints.latest
            print(
                f"lca: interrupted after {done} of {total} stores; what finished is in {', '.join(map(str, kept))}",
                file=sys.stderr,
            )
        else:
            print("lca: interrupted before any store was done: nothing written", file=sys.stderr)
        return 130, None
    finally:
        embedder.close()
    for where, result in final:
        write_report(result, where)
    checkpoints.remove()
    prov = final[0][1].provenance
    return 0, EmbedderRun(
        report=reports["default"],
        provenance={
            "embedder": source,
            "embedder_id": embedder.embedder_id,
            "dimension": embedder.dimension,
            "wall_seconds": prov.wall_seconds,
            "embedding_cache": prov.extra["embedding_cache"],
            "record": final[0][0].name,
        },
    )


def companion_path(out: Path, kind: str) -> Path:
    """Where a run writes its ``ablation`` or ``grid`` record: beside ``out``, ``<out stem>-<kind>.json`` (its
    command names ``out``, the run's own record)."""
    return out.with_name(f"{out.stem}-{kind}.json")


def run_records(
    args, reports, configs, run_config: dict[str, Any], provenance, *, out: Path | None = None
) -> list[tuple[Path, Any]]:
    """The run's records and where each goes: the run (``out``, else ``<out>``), its ablation (``<out
    stem>-ablation.json``) and its grid (``<out stem>-grid.json``) when asked."""
    out = out or out_path(args)
    written = [(out, run_result(reports["default"], config=run_config, provenance=provenance))]
    if getattr(args, "ablate", False):
        ablation = _comparison("ablation", "without ", reports, configs, run_config, provenance)
        written.append((companion_path(out, "ablation"), ablation))
    if args.grid:
        grid_config = run_config | {"grid": list(args.grid)}
        grid = _comparison("grid", "grid ", reports, configs, grid_config, provenance, dataset=args.dataset)
        written.append((companion_path(out, "grid"), grid))
    return written


def run_record_config(args, config: AskedConfig) -> dict[str, Any]:
    """What a run asked, as its record's ``config``: the dataset, the retriever, the full RetrievalConfig, how
    the stores were built and, for ``resonance``, the RecallConfig recall is asked with."""
    out: dict[str, Any] = {
        "dataset": args.dataset,
        "retriever": args.retriever,
        "retrieval_config": config.retrieval.to_dict(),
        "sentence_keys": config.retrieval.sentence_keys,
        "window_keys": config.retrieval.window_keys,
        **{option.dest: getattr(args, option.dest) for option, _ in options_by_flag("retrieval").values()},  # roles
        "limit": args.limit,
    }
    if args.retriever == "resonance":
        out["recall_config"] = bench_recall_config(config)
        out["recall_pool"] = "each store's: min(its chunks, 100)"
        out["recall_set"] = dict(config.recall)
    return out


def bench_recall_config(config: AskedConfig | None = None, pool: int = 100) -> dict[str, Any]:
    """The RecallConfig the resonance retriever asks each store's recall with (``HaystackStore.recall_config``)
    for a store of ``pool`` chunks or more, with the run's recall settings; a smaller store's pool is its
    number of chunks. Its ``retrieval`` is left out: the record's ``retrieval_config`` is it."""
    base = recall_config_for(pool)
    recall = jsonable(config.recall_config(base) if config is not None else base)
    recall.pop("retrieval", None)
    return recall


def _comparison(kind: str, prefix: str, reports, configs, run_config, provenance, *, dataset: str | None = None):
    """The ablation's or the grid's record (``kind``): the variants asked as ``<prefix><name>`` against the
    default, with the leave-one-group-out figure over them when ``dataset`` (a grid's) declares one (LoCoMo)."""
    variants = {
        key[len(prefix) :]: (configs[key].to_dict(), report)
        for key, report in reports.items()
        if key.startswith(prefix)
    }
    spec = retrieval_spec(dataset) if dataset is not None else None
    loco = None
    if spec is not None and spec.held_out is not None:
        loco = held_out({name: report for name, (_, report) in variants.items()}, spec)
    return comparison_result(
        kind, reports["default"], variants, config=run_config, provenance=provenance, held_out=loco
    )


def _run(
    args, path: Path, embedder, workdir: Path, progress: Callable, configs, *, checkpoint: Callable | None = None
) -> dict[str, dict[str, Any]]:
    """The dataset's run through its retrieval adapter, with the options it declares (LongMemEval's ``roles``)."""
    from protocols.bench.retrieval.runners import run_dataset  # the stores: the substrate, faiss

    options = {option.keyword: getattr(args, option.dest) for option in retrieval_spec(args.dataset).options}
    return run_dataset(
        args.dataset,
        path,
        args.retriever,
        embedder=embedder,
        limit=args.limit,
        progress=progress,
        workdir=workdir,
        configs=configs,
        checkpoint=checkpoint,
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
