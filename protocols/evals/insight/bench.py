"""``lca bench insight``: the integration cycle on planted corpora (issue 52), measured against their gold.

For each corpus size (``--sizes``, default 1k, 4k and 16k records) and each seed (``--seed``, one or several) a planted
corpus
(``protocols/evals/insight/corpus.py``) is written into a fresh store as memory files and integrated once by the
product's cycle (``lca.insight.integrate``) with the generator's own signatures (``corpus.GeneratorSigner``) and the
real embedder: the pairs above the null model's threshold against the gold rhymes (precision, recall, false
discoveries), the topical pairs' differential, the cycle's wall time; then the content-only detector (the same cycle
with the ``content-only`` composition over content-space neighbours, no cluster rule) on a copy of that store.

Signing 16k records with SmolLM2 would take hours on two cores, so the model's signatures are measured on a small
slice (``--slice`` records of a corpus of their own, ``--slice-model``, 0 or ``none`` skips): the share of its
answers that validate, and the cycle's precision and recall on its signatures beside the generator's on the same
slice. The scale curve uses the generator's signatures only; the record says so.

With several seeds (``--seed 1,2,3``) the first seed's corpora are the record's ``scale`` (its checks, curve and
slice) and every seed's are in ``seeds``, one table row per seed and size: how much the figures depend on the
corpus drawn.

Writes the record, a markdown table and the false-discovery curve (``.png``) beside ``--out``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, loadavg, write_result

TARGET_PRECISION = 0.8
TARGET_SECONDS = 600.0
DEFAULT_SIZES = "1000,4000,16000"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="corpus sizes in records, joined by ','")
    parser.add_argument(
        "--seed",
        default="0",
        help="the corpora's seed and the cycle's; several joined by ',' (the first is the scale's)",
    )
    parser.add_argument("--slice", type=int, default=40, help="records of the slice a model signs (0 skips)")
    parser.add_argument(
        "--slice-model",
        default="smollm2",
        help="the slice's signer: smollm2, a .gguf path or a model string; none skips",
    )
    parser.add_argument("--threads", type=int, help="llama.cpp threads for the slice's model")
    parser.add_argument(
        "--cache",
        help="embedding cache folder kept across runs (the cycle's times then exclude embedding what it holds)",
    )
    parser.add_argument("--out", default="results/bench/insight.json")


def _sizes(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) >= 12 for p in parts):
        raise ValueError(f"--sizes: expected record counts of 12 or more joined by ',', got {text!r}")
    return sorted({int(p) for p in parts})


def _seeds(text: str) -> list[int]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(f"--seed: expected distinct non-negative integers joined by ',', got {text!r}")
    return [int(p) for p in parts]


def _embedder(cache: str | None) -> Any:
    from lca.index.embedders import SentenceTransformerEmbedder

    embedder: Any = SentenceTransformerEmbedder()
    if cache:
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, cache)
    embedder.embed(["warm up"])  # loaded once: the cycle's time then measures the cycle, not loading the model
    return embedder


def _arms(records: Sequence[Any], signer: Any, embedder: Any, seed: int, *, baseline: bool) -> dict[str, Any]:
    """The cycle (and the content-only detector, on a copy of its store) over ``records``."""
    from tqdm import tqdm

    from lca.insight import IntegrationConfig
    from protocols.evals.insight.measure import content_only, measure_cycle, planted_store

    config = IntegrationConfig(seed=seed)
    work = Path(tempfile.mkdtemp(prefix="lca-insight-bench-"))
    try:
        home = work / "store"
        started = time.perf_counter()
        planted_store(tqdm(records, desc=f"planting {len(records)} records", unit="record", leave=False), home)
        planted = time.perf_counter() - started
        started = time.perf_counter()
        result, measured = measure_cycle(home, records, signer, embedder, config, progress=True)
        out: dict[str, Any] = {
            "cycle": {**measured, "wall_seconds": round(time.perf_counter() - started, 3)},
            "planting_seconds": round(planted, 3),
            "clusters": result.clusters,
        }
        if baseline:
            copy = work / "content-only"
            shutil.copytree(home, copy)  # its signatures and embeddings are reused: the detector alone differs
            _, out["content_only"] = measure_cycle(copy, records, signer, embedder, content_only(config))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _slice(args: argparse.Namespace, embedder: Any, seed: int) -> dict[str, Any] | None:
    """The slice signed by the generator and by the model, each through one cycle (``seed``: the corpus's and the
    cycle's)."""
    if args.slice <= 0 or args.slice_model in ("", "none"):
        return None
    from lca.insight import SummarizerSigner
    from protocols.evals.insight.corpus import CorpusSpec, GeneratorSigner, generate
    from protocols.providers.models import is_local, local_generator, text_generator

    records = generate(CorpusSpec(f"slice-{args.slice}", seed, args.slice))
    out: dict[str, Any] = {"records": len(records), "model": None}
    out["generator"] = _arms(records, GeneratorSigner(records), embedder, seed, baseline=False)["cycle"]
    if is_local(args.slice_model):
        runtime = {"seed": seed, **({"n_threads": args.threads} if args.threads else {})}
        generator: Any = local_generator(args.slice_model, **runtime)
    else:
        generator = text_generator(args.slice_model, role="summarizer")
    try:
        out["model"] = generator.model_id
        out["signer"] = _arms(records, SummarizerSigner(generator, seed=seed), embedder, seed, baseline=False)["cycle"]
    finally:
        if hasattr(generator, "close"):
            generator.close()
    return out


def _checks(scale: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    sizes = sorted(scale)
    checks: dict[str, dict[str, Any]] = {}
    for n in sizes:
        precision = scale[n]["cycle"]["precision"]
        checks[f"precision_{n}"] = {
            "value": precision,
            "target": TARGET_PRECISION,
            "pass": precision is not None and precision >= TARGET_PRECISION,
        }
    first = sizes[0]
    for n in sizes[1:]:
        base, now = scale[first]["cycle"]["false_discoveries"], scale[n]["cycle"]["false_discoveries"]
        allowed = max(base, 1) * n / first  # linear growth from the smallest corpus (at least one false pair there)
        checks[f"false_discoveries_{n}_at_most_linear"] = {
            "value": now,
            "target": round(allowed, 3),
            "pass": now <= allowed,
        }
    largest = scale[sizes[-1]]["cycle"]["wall_seconds"]
    checks[f"cycle_seconds_{sizes[-1]}"] = {
        "value": largest,
        "target": TARGET_SECONDS,
        "pass": largest < TARGET_SECONDS,
    }
    return checks


def table(metrics: dict[str, Any]) -> str:
    """The markdown table of a record's metrics (the scale rows, then the slice)."""
    lines = [
        "| records | threshold | max statistic's threshold | above | precision | recall | false | topical differential "
        "(mean) | content-only precision | content-only topical | cycle s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    for n, row in sorted(metrics["scale"].items(), key=lambda kv: int(kv[0])):
        c, b = row["cycle"], row.get("content_only", {})
        lines.append(
            f"| {n} | {fmt(c['threshold'])} ({c.get('null_statistic') or 'max'}) | "
            f"{fmt(c.get('max_statistic_threshold'))} | {c['above_threshold_pairs']} | {fmt(c['precision'])} | "
            f"{fmt(c['recall'])} | {c['false_discoveries']} | {fmt(c['topical_differential'].get('mean'))} | "
            f"{fmt(b.get('precision'))} | {b.get('topical_discoveries', 'n/a')} | {c['wall_seconds']:.1f} |"
        )
    if seeds := metrics.get("seeds"):
        lines += [
            "",
            "| seed | records | threshold | max statistic's threshold | above | precision | recall | false |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for seed, rows in seeds.items():
            for n, row in sorted(rows.items(), key=lambda kv: int(kv[0])):
                c = row["cycle"]
                lines.append(
                    f"| {seed} | {n} | {fmt(c['threshold'])} | {fmt(c.get('max_statistic_threshold'))} | "
                    f"{c['above_threshold_pairs']} | {fmt(c['precision'])} | {fmt(c['recall'])} | "
                    f"{c['false_discoveries']} |"
                )
    sliced = metrics.get("slice")
    if sliced:
        lines += [
            "",
            "| slice signer | valid share | above | precision | recall | cycle s |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for who in ("generator", "signer"):
            c = sliced.get(who)
            if c:
                name = "generator's signatures" if who == "generator" else sliced["model"]
                lines.append(
                    f"| {name} | {fmt(c['signature_valid_share'])} | {c['above_threshold_pairs']} | "
                    f"{fmt(c['precision'])} | {fmt(c['recall'])} | {c['wall_seconds']:.1f} |"
                )
    return "\n".join(lines) + "\n"


def plot(metrics: dict[str, Any], path: Path) -> Path:
    """False discoveries and pairs above the threshold against corpus size, with the linear growth from the
    smallest corpus for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(metrics["scale"].items(), key=lambda kv: int(kv[0]))
    sizes = [int(n) for n, _ in rows]
    false = [r["cycle"]["false_discoveries"] for _, r in rows]
    above = [r["cycle"]["above_threshold_pairs"] for _, r in rows]
    baseline = [r["content_only"]["false_discoveries"] for _, r in rows if "content_only" in r]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, above, "o-", label="pairs above the null threshold")
    ax.plot(sizes, false, "s-", label="false discoveries (not a planted rhyme)")
    if len(baseline) == len(sizes):
        ax.plot(sizes, baseline, "^:", label="content-only detector: false discoveries")
    ax.plot(sizes, [max(false[0], 1) * n / sizes[0] for n in sizes], "k--", lw=0.8, label="linear from the smallest")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)  # 0 false discoveries stays on the axis
    ax.set_ylim(bottom=0)
    ax.set_xlabel("records in the planted corpus")
    ax.set_ylabel("pairs")
    ax.set_title("Integration cycle at the null-model threshold\n(generator's signatures)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_insight_bench(args: argparse.Namespace) -> int:
    from protocols.evals.insight.corpus import GENERATOR, GENERATOR_VERSION, CorpusSpec, GeneratorSigner, generate

    try:
        sizes, seeds = _sizes(args.sizes), _seeds(args.seed)
    except ValueError as exc:
        print(f"lca bench insight: {exc}", file=sys.stderr)
        return 2
    load_before = loadavg()
    started = time.perf_counter()
    embedder = _embedder(args.cache)
    by_seed: dict[int, dict[int, dict[str, Any]]] = {}
    for seed in seeds:
        by_seed[seed] = {}
        for n in sizes:
            records = generate(CorpusSpec(f"scale-{n}", seed, n))
            before = (getattr(embedder, "hits", 0), getattr(embedder, "misses", 0))
            row = _arms(records, GeneratorSigner(records), embedder, seed, baseline=True)
            if args.cache:  # what the cache held: a warm cache leaves embedding out of the cycle's time
                row["embedding_cache"] = {"hits": embedder.hits - before[0], "misses": embedder.misses - before[1]}
            by_seed[seed][n] = row
            c = row["cycle"]
            print(
                f"seed {seed}, {n} records: threshold {c['threshold']}, {c['above_threshold_pairs']} above, "
                f"precision {c['precision']}, recall {c['recall']}, {c['false_discoveries']} false, "
                f"cycle {c['wall_seconds']:.1f} s",
                flush=True,
            )
    scale = by_seed[seeds[0]]
    sliced = _slice(args, embedder, seeds[0])
    metrics: dict[str, Any] = {"scale": {str(n): row for n, row in scale.items()}, "slice": sliced}
    if len(seeds) > 1:
        metrics["seeds"] = {str(s): {str(n): row for n, row in rows.items()} for s, rows in by_seed.items()}
    wall = time.perf_counter() - started
    result = BenchmarkResult(
        benchmark="insight",
        metrics=metrics,
        checks=_checks(scale),
        config={
            "sizes": sizes,
            "seeds": seeds,
            "scale_signer": "the generator's own signatures (corpus.GeneratorSigner), not a model",
            "slice": args.slice,
            "slice_model": args.slice_model,
            "corpus_generator": {"module": GENERATOR, "version": GENERATOR_VERSION},
            "integration_config": "lca.insight.IntegrationConfig defaults, seed as given",
            "embedding_cache": bool(args.cache),
            "agent_model": None,
        },
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            seeds={"seed": seeds[0], **{f"seed_{i}": s for i, s in enumerate(seeds[1:], 2)}},
            wall_seconds=wall,
            load={"before": load_before, "after": loadavg()},
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    text = table(metrics)
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    print("insight: the integration cycle on planted corpora (generator's signatures at scale, real embedder)")
    print(text)
    for name, check in result.checks.items():
        print(f"  {name}: {check['value']} (target {check['target']}) {'pass' if check['pass'] else 'FAIL'}")
    figure = plot(metrics, out.with_suffix(".png"))
    print(f"written to {out}, {out.with_suffix('.md')} and {figure} in {wall:.1f} s")
    return 0


BENCHMARK = Benchmark(
    name="insight",
    help="the integration cycle on planted corpora: precision and recall at the null threshold, the false-discovery "
    "curve over corpus size, the content-only detector beside it, a model's signatures on a slice",
    description="Generates planted corpora (cross-domain rhymes, topical pairs, noise) of each --sizes, integrates "
    "each once in a fresh store with the generator's signatures and the real embedder, and reports the pairs above "
    "the null model's threshold against the gold (precision, recall, false discoveries), the topical pairs' "
    "differential, the content-only detector on the same corpus and the cycle's wall time; then signs a --slice with "
    "--slice-model (SmolLM2 by default) and compares. Writes the record, a markdown table and the curve.",
    add_arguments=add_arguments,
    run=run_insight_bench,
)
