"""The retrieval benchmark's records and tables: a run, its ablation and its grid each as a ``BenchmarkResult``
(benchmark ``retrieval``, ``retrieval-ablation``, ``retrieval-grid``) with the issue's targets as checks, and
each record's markdown table, rendered from the record itself so the table and the JSON cannot disagree.

No numpy or model here: ``protocols.bench.figures`` reads the check names below.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocols.bench.result import BenchmarkResult, Provenance, write_result

DATASETS = {"longmemeval": "longmemeval_s_dev", "locomo": "locomo"}  # the eval.yaml names that pin each file
ROWS = {"longmemeval": "per_question", "locomo": "per_item"}  # the report's per-question rows, per dataset
# the targets: a check's name, where its figure is in a run's metrics, and the floor it must reach
TARGETS: dict[str, dict[str, tuple[tuple[str, ...], float]]] = {
    "longmemeval": {
        "session recall_any@5 (strict)": (("strict", "session", "recall_any@5"), 0.97),
        "session recall_all@5 (lenient)": (("lenient", "session", "recall_all@5"), 0.88),
    },
    "locomo": {"recall@5 (dialog turns)": (("overall", "recall@5"), 0.78)},
}
HELD_OUT = "recall@5 (dialog turns), leave one conversation out"  # the LoCoMo grid's check


def check(value: float | None, target: float) -> dict[str, Any]:
    """One target against its measured value, in the shape every benchmark's ``checks`` use."""
    return {"value": value, "target": f">= {target}", "pass": value is not None and value >= target}


def checks(metrics: Mapping[str, Any], dataset: str) -> dict[str, dict[str, Any]]:
    """The issue's targets for ``dataset`` against a run's summary figures."""
    out = {}
    for name, (path, target) in TARGETS[dataset].items():
        value: Any = metrics
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        out[name] = check(value, target)
    return out


def run_result(report: Mapping[str, Any], *, config: Mapping[str, Any], provenance: Provenance) -> BenchmarkResult:
    """One run's record: its summary figures as ``metrics``, its per-question (LongMemEval) or per-item
    (LoCoMo) rows as ``rows``, the targets as ``checks``."""
    dataset = config["dataset"]
    metrics = {name: value for name, value in report.items() if name != ROWS[dataset]}
    return BenchmarkResult(
        benchmark="retrieval",
        metrics=metrics,
        checks=checks(metrics, dataset),
        config=dict(config),
        rows=tuple(report[ROWS[dataset]]),
        provenance=provenance,
    )


def headline(report: Mapping[str, Any], dataset: str) -> dict[str, float]:
    """The figures an ablation table compares: the headline figures at k=5 and their @10 companions."""
    if dataset == "longmemeval":
        return {
            "recall_any@5 (strict)": report["strict"]["session"]["recall_any@5"],
            "recall_all@5 (lenient)": report["lenient"]["session"]["recall_all@5"],
            "ndcg_any@5 (strict)": report["strict"]["session"]["ndcg_any@5"],
            "recall_all@10 (lenient)": report["lenient"]["session"]["recall_all@10"],
        }
    return {
        "recall@5": report["overall"]["recall@5"],
        "recall@10": report["overall"]["recall@10"],
        "recall@5 (categories 1-4)": report["categories_1_to_4"]["recall@5"],
    }


def comparison_result(
    kind: str,
    default: Mapping[str, Any],
    variants: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
    *,
    config: Mapping[str, Any],
    provenance: Provenance,
    held_out: Mapping[str, Any] | None = None,
) -> BenchmarkResult:
    """An ablation's or a grid's record (``kind``): the default's headline figures and each variant's with
    their change (``variants``: name -> (its RetrievalConfig as a dict, its report)); each variant's full
    RetrievalConfig under ``config["variants"]``. A LoCoMo grid's leave-one-conversation-out figure
    (``held_out``) is in ``metrics`` and checked against the run's target."""
    dataset = config["dataset"]
    base = headline(default, dataset)
    compared = {}
    for name, (_, report) in variants.items():
        figures = headline(report, dataset)
        compared[name] = {"metrics": figures, "delta": {n: figures[n] - base[n] for n in base}}
    metrics: dict[str, Any] = {"default": base, "variants": compared}
    found = {}
    if held_out is not None:
        metrics["leave_one_conversation_out"] = dict(held_out)
        found[HELD_OUT] = check(held_out["held_out"], TARGETS["locomo"]["recall@5 (dialog turns)"][1])
    return BenchmarkResult(
        benchmark=f"retrieval-{kind}",
        metrics=metrics,
        checks=found,
        config={**config, "variants": {name: dict(variant) for name, (variant, _) in variants.items()}},
        provenance=provenance,
    )


def _store_keys(result: BenchmarkResult) -> list[str]:
    """Which extra keys the record's stores kept: "sentence", "window"."""
    return [name for name in ("sentence", "window") if result.config.get(f"{name}_keys")]


def store_conditions(result: BenchmarkResult) -> list[str]:
    """What a retrieval record's figures depend on beyond the retriever: nothing for a full run of the pinned
    file on the default stores."""
    conditions = []
    if result.config.get("roles") == "user":
        conditions.append("over user turns only")
    if keys := _store_keys(result):
        conditions.append(f"with {' and '.join(keys)} keys")
    if result.config.get("limit"):
        conditions.append(f"on the first {result.config['limit']} only")
    if not all(d.official for d in result.provenance.datasets):
        conditions.append("on a file that is not the pinned one")
    return conditions


def _heading(result: BenchmarkResult, what: str) -> list[str]:
    prov = result.provenance
    lines = [f"# {result.config['dataset']} retrieval, {what} ({prov.embedder_id})", ""]
    for data in prov.datasets:
        if data.official:
            pinned = f"the pinned {data.name}"
        else:
            pinned = f"not the pinned {data.name} file" if data.pinned_sha256 else "not a pinned dataset file"
        lines.append(f"file {data.path} (sha256 {data.sha256[:16]}..., {pinned}), code {prov.code_version}")
    roles = "the user's turns only (--roles user)" if result.config.get("roles") == "user" else "every turn"
    keys = _store_keys(result)
    lines.append(f"stores: {roles}, {' and '.join(keys) + ' keys' if keys else 'no sentence or window keys'}")
    return lines


def _checks_table(result: BenchmarkResult) -> list[str]:
    if not result.checks:
        return []
    lines = ["", "| target | measured | required | |", "| --- | --- | --- | --- |"]
    for name, c in result.checks.items():
        value = "n/a" if c["value"] is None else f"{c['value']:.4f}"
        lines.append(f"| {name} | {value} | {c['target']} | {'PASS' if c['pass'] else 'FAIL'} |")
    return lines


def grid_table(result: BenchmarkResult) -> str:
    """The grid's variants as rows, and on LoCoMo the held-out (leave-one-conversation-out) figure."""
    table = ablation_table(result, title="grid", note="each row sets the listed values, the rest at the default")
    loco = result.metrics.get("leave_one_conversation_out")
    if loco:
        table += (
            f"\nleave one conversation out ({loco['metric']}): held-out {loco['held_out']:.4f}, "
            f"fitted on all {len(loco['chosen_per_conversation'])} conversations {loco['fitted']:.4f} ({loco['fitted_variant']})\n"
        )
    return table


def ablation_table(
    result: BenchmarkResult,
    *,
    title: str = "ablation",
    note: str = "each row turns one part off, the rest at the default",
) -> str:
    default, variants = result.metrics["default"], result.metrics["variants"]
    names = list(default)
    lines = [
        *_heading(result, f"{result.config.get('retriever', 'hybrid')} {title}"),
        "",
        note,
        "",
        "| variant | " + " | ".join(names) + f" | change in {names[0]} |",
        "| --- | " + " | ".join("---" for _ in names) + " | --- |",
        "| default | " + " | ".join(f"{default[n]:.4f}" for n in names) + " | |",
    ]
    for variant, row in variants.items():
        lines.append(
            f"| {variant} | "
            + " | ".join(f"{row['metrics'][n]:.4f}" for n in names)
            + f" | {row['delta'][names[0]]:+.4f} |"
        )
    return "\n".join(lines + _checks_table(result)) + "\n"


def markdown_table(result: BenchmarkResult) -> str:
    """One run's figures: LongMemEval's session and turn tables and its question types, or LoCoMo's recall@k
    per category; then the targets, PASS or FAIL; then timings."""
    report, dataset = result.metrics, result.config["dataset"]
    lines = [*_heading(result, result.config["retriever"]), ""]
    if dataset == "longmemeval":
        strict, lenient = report["strict"], report["lenient"]
        lines += [
            "| convention | n | recall_any@5 | recall_all@5 | ndcg_any@5 | recall_any@10 | recall_all@10 |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, table in (("session, strict", strict), ("session, lenient", lenient)):
            s = table["session"]
            lines.append(
                f"| {name} | {table['n']} | {s['recall_any@5']:.4f} | {s['recall_all@5']:.4f} | "
                f"{s['ndcg_any@5']:.4f} | {s['recall_any@10']:.4f} | {s['recall_all@10']:.4f} |"
            )
        t = strict["turn"]
        lines.append(
            f"| turn, strict | {strict['n']} | {t['recall_any@5']:.4f} | {t['recall_all@5']:.4f} | "
            f"{t['ndcg_any@5']:.4f} | {t['recall_any@10']:.4f} | {t['recall_all@10']:.4f} |"
        )
        lines += [
            "",
            "| question type (strict) | n | session recall_any@5 | session recall_all@5 |",
            "| --- | --- | --- | --- |",
        ]
        for qtype, table in report["by_question_type"].items():
            if table["n"]:
                lines.append(
                    f"| {qtype} | {table['n']} | {table['session']['recall_any@5']:.4f} | "
                    f"{table['session']['recall_all@5']:.4f} |"
                )
    else:
        lines += [
            "| units: dialog turns | n | recall@1 | recall@5 | recall@10 | recall@25 |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, table in [
            ("all categories", report["overall"]),
            ("categories 1-4", report["categories_1_to_4"]),
            *report["by_category"].items(),
        ]:
            if table["n"]:
                lines.append(
                    f"| {name} | {table['n']} | "
                    + " | ".join(f"{table[f'recall@{k}']:.4f}" for k in (1, 5, 10, 25))
                    + " |"
                )
    lines += _checks_table(result)
    sec, prov = report.get("seconds_per_question", {}), result.provenance
    if sec:
        cache = prov.extra.get("embedding_cache", {})
        wall = f"{prov.wall_seconds:.1f}" if prov.wall_seconds is not None else "?"
        lines += [
            "",
            f"seconds per question: median {sec['median']:.2f}, total {sec['total']:.1f}; wall {wall} s; "
            f"embedding cache hits {cache.get('hits')}, misses {cache.get('misses')}",
        ]
    return "\n".join(lines) + "\n"


TABLES = {"retrieval": markdown_table, "retrieval-ablation": ablation_table, "retrieval-grid": grid_table}


def write_report(result: BenchmarkResult, path: Path) -> None:
    """The record (``write_result``), its markdown table beside it (``.md``), and the table on the terminal."""
    table = TABLES[result.benchmark](result)
    write_result(result, path)
    path.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {path} and {path.with_suffix('.md')}")
