"""The retrieval benchmark's tables: the headline figures an ablation compares, the ablation table and the
markdown table of one run; and writing a report (JSON, the markdown table beside it, the table printed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def headline(report: dict[str, Any], dataset: str) -> dict[str, float]:
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


def grid_table(grid: dict[str, Any], dataset: str) -> str:
    """The grid's variants as rows, and on LoCoMo the held-out (leave-one-conversation-out) figure."""
    table = ablation_table(grid, dataset, title="grid", note="each row sets the listed values, the rest at the default")
    loco = grid.get("leave_one_conversation_out")
    if loco:
        table += (
            f"\nleave one conversation out ({loco['metric']}): held-out {loco['held_out']:.4f}, "
            f"fitted on all ten {loco['fitted']:.4f} ({loco['fitted_variant']})\n"
        )
    return table


def ablation_table(
    ablation: dict[str, Any],
    dataset: str,
    *,
    title: str = "ablation",
    note: str = "each row turns one part off, the rest at the default",
) -> str:
    prov = ablation["provenance"]
    names = list(ablation["default"])
    lines = [
        f"# {dataset} retrieval, hybrid {title} ({prov['embedder']})",
        "",
        f"file {prov['file']} (sha256 {prov['sha256'][:16]}...), code {prov['code_version']}; {note}",
        "",
        "| variant | " + " | ".join(names) + f" | change in {names[0]} |",
        "| --- | " + " | ".join("---" for _ in names) + " | --- |",
        "| default | " + " | ".join(f"{ablation['default'][n]:.4f}" for n in names) + " | |",
    ]
    for variant, row in ablation["variants"].items():
        lines.append(
            f"| {variant} | "
            + " | ".join(f"{row['metrics'][n]:.4f}" for n in names)
            + f" | {row['delta'][names[0]]:+.4f} |"
        )
    return "\n".join(lines) + "\n"


def markdown_table(report: dict[str, Any], dataset: str) -> str:
    prov = report["provenance"]
    lines = [
        f"# {dataset} retrieval, {prov['retriever']} ({prov['embedder']})",
        "",
        f"file {prov['file']} (sha256 {prov['sha256'][:16]}...), code {prov['code_version']}",
        "",
    ]
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
    sec = report.get("seconds_per_question", {})
    if sec:
        lines += [
            "",
            f"seconds per question: median {sec['median']:.2f}, total {sec['total']:.1f}; wall "
            f"{prov['wall_seconds']:.1f} s; embedding cache hits {prov['embedding_cache']['hits']}, "
            f"misses {prov['embedding_cache']['misses']}",
        ]
    return "\n".join(lines) + "\n"


def write_report(path: Path, data: dict[str, Any], table: str) -> None:
    """The JSON and its markdown table beside it, and the table on the terminal."""
    path.write_text(json.dumps(data, indent=2, default=float), encoding="utf-8")
    path.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {path} and {path.with_suffix('.md')}")
