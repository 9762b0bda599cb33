"""The retrieval benchmarks' figures (LoCoMo, LongMemEval): the README's headline and the docs' unkeyed and embedder
comparisons, each read from the records ``lca bench retrieval`` writes; ``protocols.bench.figures`` registers them."""

from __future__ import annotations

from lca.errors import LCAError
from protocols.bench.figure_text import EXAMPLES, day, source
from protocols.bench.retrieval.report import HELD_OUT, TARGETS, store_conditions
from protocols.evals.benchmark import BenchmarkResult


def _retrieval_value(result: BenchmarkResult, check: str) -> str:
    value = result.checks[check]["value"]
    return "n/a" if value is None else f"{value:.3f}"


def _retrieval_target(check: str, dataset: str, passed: dict[str, bool]) -> str:
    """The target and who meets it: "target 0.97, not met", "target 0.97, met by hybrid only", "target 0.97, met"."""
    met = [who for who, ok in passed.items() if ok]
    verdict = "met" if len(met) == len(passed) else f"met by {' and '.join(met)} only" if met else "not met"
    return f"target {TARGETS[dataset][check][1]:g}, {verdict}"


UNKEYED_RUNS = ("retrieval/longmemeval-unkeyed-resonance.json", "retrieval/longmemeval-unkeyed-hybrid.json")
RETRIEVAL_RUNS = tuple(
    f"retrieval/{run}.json"
    for run in ("longmemeval-resonance", "longmemeval-hybrid", "locomo-resonance", "locomo-hybrid")
)
LOCOMO_GRID = "retrieval/locomo-hybrid-grid.json"


def _one_store(records: dict[str, BenchmarkResult]) -> str:
    """The stores a group of records shares, as " (over user turns only, with sentence keys)" ("" for the
    default stores). Records run on different stores are refused naming them: a comparison between them
    (resonance against hybrid, a target met by one only) would measure the stores, not the retrievers."""
    conditions = {source: store_conditions(record) for source, record in records.items()}
    if len({tuple(c) for c in conditions.values()}) > 1:
        named = "; ".join(
            f"{EXAMPLES / path}: {', '.join(c) or 'the default stores'}" for path, c in conditions.items()
        )
        raise LCAError(f"records compared in one figure were run on different stores or questions ({named}); rerun one")
    shared = next(iter(conditions.values()))
    return f" ({', '.join(shared)})" if shared else ""


def readme_retrieval(
    lme_resonance: BenchmarkResult,
    lme_hybrid: BenchmarkResult,
    locomo_resonance: BenchmarkResult,
    locomo_hybrid: BenchmarkResult,
    locomo_grid: BenchmarkResult | None = None,
) -> str:
    """Both retrievers on both datasets against the issue's targets, and LoCoMo's held-out figure when the grid
    record is there; the resonance figure comes first in each pair, and each dataset's records share one store."""
    any5, all5 = TARGETS["longmemeval"]
    (turns5,) = TARGETS["locomo"]

    def passed(check: str, resonance: BenchmarkResult, hybrid: BenchmarkResult) -> dict[str, bool]:
        return {"resonance": resonance.checks[check]["pass"], "hybrid": hybrid.checks[check]["pass"]}

    lme_stores = _one_store(dict(zip(RETRIEVAL_RUNS[:2], (lme_resonance, lme_hybrid))))
    lme_any5 = (
        f"{_retrieval_value(lme_resonance, any5)} with resonance recall and "
        f"{_retrieval_value(lme_hybrid, any5)} with hybrid search "
        f"({_retrieval_target(any5, 'longmemeval', passed(any5, lme_resonance, lme_hybrid))})"
    )
    lme_all5 = (
        f"{_retrieval_value(lme_resonance, all5)} and {_retrieval_value(lme_hybrid, all5)} "
        f"({_retrieval_target(all5, 'longmemeval', passed(all5, lme_resonance, lme_hybrid))})"
    )
    locomo_passed = passed(turns5, locomo_resonance, locomo_hybrid)
    locomo_records = dict(zip(RETRIEVAL_RUNS[2:], (locomo_resonance, locomo_hybrid)))
    locomo = (
        f"{_retrieval_value(locomo_resonance, turns5)} with resonance recall "
        f"and {_retrieval_value(locomo_hybrid, turns5)} with hybrid search"
    )
    records = [lme_resonance, lme_hybrid, locomo_resonance, locomo_hybrid]
    if locomo_grid is not None:
        held = locomo_grid.checks[HELD_OUT]
        locomo_passed["the held-out figure"] = held["pass"]
        locomo_records[LOCOMO_GRID] = locomo_grid
        locomo += f", {_retrieval_value(locomo_grid, HELD_OUT)} leave one conversation out"
        records.append(locomo_grid)
    locomo_stores = _one_store(locomo_records)
    days = sorted({day(r) for r in records})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return (
        f"LongMemEval_S dev{lme_stores}, {any5}: {lme_any5}; {all5}: {lme_all5}; LoCoMo{locomo_stores}, evidence "
        f"recall@5 over dialog turns: {locomo} ({_retrieval_target(turns5, 'locomo', locomo_passed)}) "
        f"(`{EXAMPLES / 'retrieval'}/`, {when})."
    )


def retrieval_unkeyed(unkeyed_resonance: BenchmarkResult, unkeyed_hybrid: BenchmarkResult) -> str:
    """LongMemEval_S on stores without sentence keys (the store's default; LongMemEval's retrieval.yaml turns
    them on), against the same targets: what the keys buy and what the default store gives up."""
    any5, all5 = TARGETS["longmemeval"]
    figures = []
    for check in (any5, all5):
        passed = {"resonance": unkeyed_resonance.checks[check]["pass"], "hybrid": unkeyed_hybrid.checks[check]["pass"]}
        figures.append(
            f"{check} {_retrieval_value(unkeyed_resonance, check)} with resonance recall and "
            f"{_retrieval_value(unkeyed_hybrid, check)} with hybrid search "
            f"({_retrieval_target(check, 'longmemeval', passed)})"
        )
    scope = _one_store(dict(zip(UNKEYED_RUNS, (unkeyed_resonance, unkeyed_hybrid))))
    return (
        f"Without sentence keys (`--sentence-keys off`, the store's default: the keys are over the index budget, "
        f"see `docs/index.md`), LongMemEval_S dev{scope}: {'; '.join(figures)} "
        f"({source(*UNKEYED_RUNS)}, "
        f"{day(unkeyed_resonance)})."
    )


EMBEDDER_RUNS = ("retrieval/locomo-hybrid-embedders.json", "retrieval/longmemeval-hybrid-embedders.json")


def retrieval_embedders(locomo: BenchmarkResult, longmemeval: BenchmarkResult | None = None) -> str:
    """Each dataset's first headline figure per embedder (``lca bench retrieval --embedder a,b``: the same stores and
    configuration, one run), its change from the reference embedder, which embedder is best on it, and each one's
    wall time; LongMemEval's when its record is there."""
    parts, files, records = [], [], []
    for title, path, record in (
        ("LoCoMo", EMBEDDER_RUNS[0], locomo),
        ("LongMemEval_S dev", EMBEDDER_RUNS[1], longmemeval),
    ):
        if record is None:
            continue
        compared, reference = record.metrics["embedders"], record.metrics["reference"]
        metric = record.metrics["best"]["by"]
        figures = ", ".join(
            f"{name} {row['metrics'][metric]:.3f}" + ("" if name == reference else f" ({row['delta'][metric]:+.3f})")
            for name, row in compared.items()
        )
        conditions = store_conditions(record)
        scope = f" ({', '.join(conditions)})" if conditions else ""
        best = record.metrics["best"]["embedders"]
        verdict = f"{' and '.join(best)} {'tie' if len(best) > 1 else 'best'}"
        runs = record.config["embedders"]
        wall = ", ".join(f"{name} {runs[name]['wall_seconds']:,.0f} s" for name in compared)
        parts.append(f"{title}{scope}, {record.config['retriever']} {metric}: {figures}; {verdict} (wall {wall})")
        files.append(path)
        records.append(record)
    days = sorted({day(r) for r in records})
    return f"{'; '.join(parts)} ({source(*files)}, {' to '.join(days)})"
