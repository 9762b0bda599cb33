"""``lca bench recall-budget``: what each recall policy and each resonance term buys, in continuity per token.

Protocol 6 of issue 18 at the substrate level (the real embedder, no agent model): every probe of a scenario
file is replayed through each condition variant (``full-lca[policy=fixed-k]``, ``[policy=adaptive]``,
``[policy=none]``, each resonance term zeroed) with ``protocols.harness.substrate.replay_probe``, as the harness
replays it, and the injected context is checked against the probe's gold
(``protocols.evals.recall_budget.scorer``): its evidence turns in, its forbidden turns out. Per variant: the
share of probes meeting both (the frontier's y), injected tokens per probe (its x), recall latency p50 / p95,
and, paired by probe against the first variant, how many probes it gained or lost. The record is written as a
``BenchmarkResult`` with the frontier plot (``.png``) and a markdown table (``.md``) beside it.

full-lca runs with consolidation off (no summarizer: no model writes memories; the scenario's own memories are
still ingested), as ``lca bench probes`` does by default; identity and handoff stay on, so ``policy=none``
still injects those (its ``recall_items`` are 0).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from protocols.evals.benchmark import (
    Benchmark,
    BenchmarkResult,
    build_provenance,
    dataset_provenance,
    loadavg,
    write_result,
)
from protocols.harness import substrate
from protocols.harness.scenario import load_scenarios
from protocols.harness.substrate import evidence_of, replay_probe
from protocols.harness.variants import checked_condition, parse_variants, split_conditions, variant_params

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")
POLICY_VARIANTS = ("full-lca[policy=fixed-k]", "full-lca[policy=adaptive]", "full-lca[policy=none]")


def default_variants() -> tuple[str, ...]:
    """The three recall policies, then full-lca with each resonance term that is on by default zeroed."""

    from lca.recall import ResonanceWeights

    zeroed = [f"full-lca[weights.{term}=0]" for term, weight in asdict(ResonanceWeights()).items() if weight > 0]
    return (*POLICY_VARIANTS, *zeroed)


@dataclass(frozen=True)
class BudgetVariant:
    """One condition variant of the run: its label, the registered condition and its typed parameters."""

    label: str
    condition: str
    params: dict[str, Any] = field(default_factory=dict)


def parse_budget_variants(text: str) -> list[BudgetVariant]:
    """``--variants`` (comma-separated labels, commas inside brackets kept) as typed variants; an unknown
    condition or parameter, or a label given twice, is refused here, before anything loads. full-lca runs with
    consolidation off unless the label sets ``consolidate``."""

    out = []
    for variant in parse_variants(split_conditions(text)):
        params = variant_params(variant)
        if variant.condition == "full-lca":
            params.setdefault("consolidate", 0)
        checked_condition(variant.label, variant.condition, params)  # a bad policy fails now, naming the label
        out.append(BudgetVariant(variant.label, variant.condition, params))
    if not out:
        raise ValueError("--variants names no condition variant")
    return out


def short_label(label: str) -> str:
    """``full-lca[policy=none]`` -> ``policy=none`` for the plot; other conditions keep their whole label."""
    return label[len("full-lca[") : -1] if label.startswith("full-lca[") and label.endswith("]") else label


# ---- the measure -----------------------------------------------------------------------------------------
def variant_outcome(row: Mapping[str, Any]) -> dict[str, Any]:
    """A ``replay_probe`` row as one variant's outcome on one probe: the gold check and what it cost."""
    from protocols.evals.recall_budget.scorer import probe_continuity

    checked = probe_continuity(row["pointers"], row["gold"], row["forbidden"])
    return {
        "needed_in": checked.needed_in,
        "forbidden_out": checked.forbidden_out,
        "needed_in_forbidden_out": checked.both,
        "injected_tokens": row["injected_tokens"],
        "items": row["items"],
        "recall_items": row["recall_items"],
        "recall_action": row["recall_action"],
        "recall_latency_ms": row["recall_latency_ms"],
        "build_ms": row["build_ms"],
        "pointers": row["pointers"],
    }


def summarize(outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One variant's figures over probes. ``needed_in`` is over the probes that name evidence turns,
    ``forbidden_out`` over those that name forbidden ones, ``needed_in_forbidden_out`` over all."""
    import numpy as np

    def share(key: str) -> float | None:
        named = [o[key] for o in outcomes if o[key] is not None]
        return round(sum(1 for v in named if v) / len(named), 4) if named else None

    def quantile(key: str, q: float) -> float:
        return round(float(np.percentile([o[key] for o in outcomes], q)), 3) if outcomes else 0.0

    actions: dict[str, int] = {}
    for o in outcomes:
        actions[str(o["recall_action"])] = actions.get(str(o["recall_action"]), 0) + 1
    n = len(outcomes)
    return {
        "probes": n,
        "needed_probes": sum(1 for o in outcomes if o["needed_in"] is not None),
        "forbidden_probes": sum(1 for o in outcomes if o["forbidden_out"] is not None),
        "needed_in": share("needed_in"),
        "forbidden_out": share("forbidden_out"),
        "needed_in_forbidden_out": share("needed_in_forbidden_out"),
        "injected_tokens_mean": round(sum(o["injected_tokens"] for o in outcomes) / n, 1) if n else 0.0,
        "recall_items_mean": round(sum(o["recall_items"] for o in outcomes) / n, 2) if n else 0.0,
        "nothing_recalled": round(sum(1 for o in outcomes if not o["recall_items"]) / n, 4) if n else None,
        "recall_latency_p50_ms": quantile("recall_latency_ms", 50),
        "recall_latency_p95_ms": quantile("recall_latency_ms", 95),
        "build_p50_ms": quantile("build_ms", 50),
        "build_p95_ms": quantile("build_ms", 95),
        "recall_actions": dict(sorted(actions.items())),
    }


def against_baseline(rows: Sequence[Mapping[str, Any]], baseline: str, label: str) -> dict[str, Any]:
    """Paired by probe: the probes where ``label`` met the gold and ``baseline`` did not (gained), the reverse
    (lost), and the mean change in injected tokens."""
    gained = [
        r["probe_key"]
        for r in rows
        if r["variants"][label]["needed_in_forbidden_out"] and not r["variants"][baseline]["needed_in_forbidden_out"]
    ]
    lost = [
        r["probe_key"]
        for r in rows
        if r["variants"][baseline]["needed_in_forbidden_out"] and not r["variants"][label]["needed_in_forbidden_out"]
    ]
    deltas = [r["variants"][label]["injected_tokens"] - r["variants"][baseline]["injected_tokens"] for r in rows]
    return {
        "baseline": baseline,
        "gained": len(gained),
        "lost": len(lost),
        "gained_probes": gained,
        "lost_probes": lost,
        "injected_tokens_delta_mean": round(sum(deltas) / len(deltas), 1) if deltas else 0.0,
    }


def measure(
    path: Path | str,
    variants: Sequence[BudgetVariant],
    make_runtime: Callable[[Path, Mapping[str, str]], Any],
    *,
    limit: int | None = None,
) -> dict[str, Any]:
    """Every probe of one scenario file through every variant: per-variant figures, and one row per probe holding
    every variant's outcome on it (so variants are compared on the same probes)."""

    scenarios, digest = load_scenarios(path)
    pairs = [(s, p) for s in scenarios for p in s.probes][: limit or None]
    rows: list[dict[str, Any]] = []
    for scenario, probe in pairs:
        outcomes = {}
        for variant in variants:
            replayed = replay_probe(variant.condition, variant.params, scenario, probe, make_runtime)
            outcomes[variant.label] = variant_outcome(replayed)
        rows.append(
            {
                "file": str(path),
                "scenario": scenario.id,
                "probe": probe.id,
                "probe_key": f"{scenario.id}:{probe.id}",
                "category": probe.category,
                "gold": evidence_of(probe, scenario, "evidence"),
                "forbidden": evidence_of(probe, scenario, "forbidden"),
                "variants": outcomes,
            }
        )
    return figures_of(str(path), digest, variants, rows)


def figures_of(file: str, sha256: str, variants: Sequence[BudgetVariant], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-variant figures of paired rows (one file's, or several files' pooled)."""
    baseline = variants[0].label
    out: dict[str, Any] = {"file": file, "sha256": sha256, "variants": {}, "rows": rows}
    for variant in variants:
        figures = summarize([r["variants"][variant.label] for r in rows])
        if variant.label != baseline:
            figures["against_baseline"] = against_baseline(rows, baseline, variant.label)
        out["variants"][variant.label] = {
            "condition": variant.condition,
            "params": dict(variant.params),
            "figures": figures,
        }
    return out


def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """The variants no other beats on both axes (fewer or equal tokens and a higher or equal share, one of them
    strictly), by tokens: the frontier the plot draws."""
    front = []
    for label, x, y in points:
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for _, x2, y2 in points)
        if not dominated:
            front.append((label, x, y))
    return sorted(front, key=lambda p: (p[1], p[2]))


# ---- what it writes ------------------------------------------------------------------------------------
def coincident(points: Sequence[tuple[str, float, float]]) -> dict[tuple[float, float], list[str]]:
    """Variants that land on one spot of the plot (same tokens and share), so they share one label."""
    spots: dict[tuple[float, float], list[str]] = {}
    for label, x, y in points:
        spots.setdefault((round(x, 1), round(y, 4)), []).append(label)
    return spots


def plot_frontier(panels: Sequence[Mapping[str, Any]], out: Path, *, embedder_id: str = "") -> Path:
    """One row per scenario file (and the pooled files): continuity against injected tokens, one point per
    variant with the non-dominated ones joined, and beside it the recall latency p50 / p95 per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(panels), 2, figsize=(15, 4.8 * len(panels)), gridspec_kw={"width_ratios": (1.25, 1)}, squeeze=False
    )
    for (frontier_ax, latency_ax), panel in zip(axes, panels, strict=True):
        name = Path(panel["file"]).name
        labels = list(panel["variants"])
        figures = [panel["variants"][label]["figures"] for label in labels]
        points = [
            (label, f["injected_tokens_mean"], f["needed_in_forbidden_out"] or 0.0)
            for label, f in zip(labels, figures, strict=True)
        ]
        ring = {label: k for together in coincident(points).values() for k, label in enumerate(together)}
        for n, (label, x, y) in enumerate(points):  # variants on one spot: concentric rings, all visible
            frontier_ax.scatter(
                [x],
                [y],
                s=40 + 70 * ring[label],
                marker=MARKERS[n % len(MARKERS)],
                facecolors="none",
                edgecolors=f"C{n % 10}",
                linewidths=1.4,
                zorder=3,
                label=short_label(label),
            )
        front = pareto_front(points)
        frontier_ax.plot(
            [p[1] for p in front], [p[2] for p in front], "--", color="grey", lw=1, zorder=2, label="frontier"
        )
        frontier_ax.set_xlabel("injected tokens per probe (mean)")
        frontier_ax.set_ylabel("needed turns in and forbidden out (share of probes)")
        frontier_ax.set_ylim(-0.05, 1.1)
        frontier_ax.set_xlim(left=0, right=max([p[1] for p in points] + [1.0]) * 1.3)
        frontier_ax.set_title(f"{name}: {figures[0]['probes']} probes", fontsize=10)
        frontier_ax.grid(alpha=0.3)
        legend = frontier_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False)
        for handle in legend.legend_handles:  # one marker size in the key, whatever the ring
            if hasattr(handle, "set_sizes"):
                handle.set_sizes([40])
        positions = range(len(labels))
        p50 = [f["recall_latency_p50_ms"] for f in figures]
        p95 = [f["recall_latency_p95_ms"] for f in figures]
        latency_ax.bar([p - 0.2 for p in positions], p50, width=0.4, label="p50")
        latency_ax.bar([p + 0.2 for p in positions], p95, width=0.4, label="p95")
        latency_ax.set_xticks(
            list(positions), [short_label(label) for label in labels], rotation=35, ha="right", fontsize=8
        )
        latency_ax.set_ylabel("recall latency (ms)")
        latency_ax.set_title(f"{name}: recall latency per probe", fontsize=10)
        latency_ax.legend(fontsize=8)
        latency_ax.grid(axis="y", alpha=0.3)
    fig.suptitle(
        f"Recall-budget ablation, substrate level (embedder {embedder_id or 'unnamed'}, no agent model)", fontsize=11
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # room for the title above the first row
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def table(panel: Mapping[str, Any]) -> str:
    """A markdown table of one file's (or the pooled) figures, per variant."""

    def share(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = [
        f"{Path(panel['file']).name} (sha256 {panel['sha256'] if '+' in panel['sha256'] else panel['sha256'][:12]})\n",
        "| variant | needed in and forbidden out | needed in | forbidden out | injected tokens | recalled items | "
        "recall p50 / p95 ms | vs first: gained / lost |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, block in panel["variants"].items():
        f = block["figures"]
        paired = f.get("against_baseline")
        versus = f"+{paired['gained']} / -{paired['lost']}" if paired else "(baseline)"
        lines.append(
            f"| `{label}` | {share(f['needed_in_forbidden_out'])} | {share(f['needed_in'])} "
            f"({f['needed_probes']}) | {share(f['forbidden_out'])} ({f['forbidden_probes']}) | "
            f"{f['injected_tokens_mean']:.1f} | {f['recall_items_mean']:.2f} | "
            f"{f['recall_latency_p50_ms']:.1f} / {f['recall_latency_p95_ms']:.1f} | {versus} |"
        )
    return "\n".join(lines) + "\n"


# ---- the command ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenarios",
        action="append",
        help=f"a scenario file (repeatable; default: {DEFAULT_SCENARIOS.relative_to(REPO)})",
    )
    parser.add_argument(
        "--variants",
        default=",".join(default_variants()),
        help="comma-separated condition variants, e.g. 'full-lca[policy=adaptive],full-lca[weights.temporal=0]'; "
        "the first is the baseline the others are paired against (default: the three policies, then each "
        "resonance term zeroed)",
    )
    parser.add_argument("--cache", help="embedding cache folder kept across runs (default: one for this run only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="at most this many probes per file (for quick looks)")
    parser.add_argument("--out", default="results/bench/recall-budget.json", help="the record; .png and .md beside it")


def run_recall_budget_bench(args: argparse.Namespace) -> int:

    files = [Path(p) for p in (args.scenarios or [DEFAULT_SCENARIOS])]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        print(f"lca bench recall-budget: no scenario file at {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        variants = parse_budget_variants(args.variants)
    except (LCAError, ValueError) as exc:  # an unknown condition, parameter or policy: refused before loading
        print(f"lca bench recall-budget: {exc}", file=sys.stderr)
        return 2

    scratch = None
    if not args.cache:  # document embeddings shared across variants; queries are never cached, so latency is fair
        scratch = tempfile.mkdtemp(prefix="lca-recall-budget-cache-")
        args.cache = scratch
    args.summarizer = "none"  # substrate level: no model writes memories or handoffs
    try:
        make, embedder, _ = substrate.runtime_factory(args)
        load_before, started = loadavg(), time.perf_counter()
        measured = [measure(path, variants, make, limit=args.limit) for path in files]
        wall = time.perf_counter() - started
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
            args.cache = None
    panels = list(measured)
    if len(measured) > 1:
        pooled = [row for m in measured for row in m["rows"]]
        panels.append(figures_of("all files", "+".join(m["sha256"][:12] for m in measured), variants, pooled))
    result = BenchmarkResult(
        benchmark="recall-budget",
        metrics={p["file"]: {label: block["figures"] for label, block in p["variants"].items()} for p in panels},
        checks={
            f"{Path(m['file']).stem}/{v.label}/nothing_recalled": {
                "value": m["variants"][v.label]["figures"]["nothing_recalled"],
                "target": 1.0,
                "pass": m["variants"][v.label]["figures"]["nothing_recalled"] == 1.0,
            }
            for m in measured
            for v in variants
            if v.params.get("policy") == "none"
        },
        config={
            "variants": [{"label": v.label, "condition": v.condition, "params": v.params} for v in variants],
            "baseline": variants[0].label,
            "full_lca_consolidation": "off (no summarizer; the scenarios' own memories are ingested)",
            "agent_model": None,
            "limit": args.limit,
        },
        rows=tuple(row for m in measured for row in m["rows"]),
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(m["file"], sha256=m["sha256"]) for m in measured],
            seeds={"seed": args.seed},
            wall_seconds=wall,
            load={"before": load_before, "after": loadavg()},  # latency on a busy machine reads high
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    tables = "\n".join(table(p) for p in panels)
    out.with_suffix(".md").write_text(tables, encoding="utf-8")
    print("recall-budget ablation, substrate level (real embedder, no agent model; full-lca consolidation off)")
    print(tables)
    try:
        plot = plot_frontier(panels, out.with_suffix(".png"), embedder_id=embedder.embedder_id)
    except ImportError as exc:
        print(f"lca bench recall-budget: no plot ({exc}); install matplotlib", file=sys.stderr)
        return 1
    print(f"written to {out}, {out.with_suffix('.md')} and {plot}")
    return 0 if result.all_pass is not False else 1


BENCHMARK = Benchmark(
    name="recall-budget",
    help="continuity per injected token under each recall policy and with each resonance term zeroed (no agent model)",
    description="Replays each probe of a scenario file through full-lca variants (policy fixed-k, adaptive, none; "
    "each resonance term zeroed) with the real embedder and no agent model, and reports per variant the share of "
    "probes whose needed turns were injected and forbidden turns kept out, injected tokens, recall latency p50/p95, "
    "and gains and losses paired by probe against the first variant; writes the record, a markdown table and the "
    "frontier plot.",
    add_arguments=add_arguments,
    run=run_recall_budget_bench,
)
