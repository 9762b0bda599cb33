"""``lca bench retrieval --embedder a,b``: one record comparing embedders on the same benchmark, the same
stores and the same configuration (benchmark ``retrieval-embedders``), and its markdown table.

This record is ``--out``; each embedder's run keeps its own full record beside it (``<out stem>-<embedder>.json``),
and this one holds
each one's headline figures (the dataset adapter's ``headline``: LoCoMo's recall@5, LongMemEval's
recall_any@5, ...), their difference from the first embedder's, and each one's provenance (its id, which names
the model and a hash of its weights, dimension, wall time, embedding cache). No numpy or model here:
``protocols.bench.figures`` reads these records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocols.bench.retrieval.report import _checks_table, _heading, checks, headline
from protocols.evals.benchmark import BenchmarkResult, Provenance, write_result

BENCHMARK = "retrieval-embedders"


@dataclass(frozen=True)
class EmbedderRun:
    """One embedder's pass over the benchmark: its report (the adapter's summary) and what it ran with."""

    report: Mapping[str, Any]
    provenance: Mapping[str, Any]  # embedder_id, dimension, wall_seconds, embedding_cache, record


def embedder_comparison(
    runs: Mapping[str, EmbedderRun], *, config: Mapping[str, Any], provenance: Provenance
) -> BenchmarkResult:
    """The comparison record: per embedder (in the order asked) its headline figures and their change from the
    first; each embedder's own provenance under ``config["embedders"]``; the dataset's targets checked per
    embedder (``<embedder>: <target>``)."""
    dataset = config["dataset"]
    names = list(runs)
    if len(names) < 2:
        raise ValueError("a comparison needs two embedders or more")
    base = headline(runs[names[0]].report, dataset)
    compared: dict[str, Any] = {}
    found: dict[str, Any] = {}
    for name in names:
        figures = headline(runs[name].report, dataset)
        compared[name] = {"metrics": figures, "delta": {n: figures[n] - base[n] for n in base}}
        summary = {key: value for key, value in runs[name].report.items() if not isinstance(value, list)}
        found |= {f"{name}: {check}": value for check, value in checks(summary, dataset).items()}
    first = next(iter(base))
    top = max(compared[name]["metrics"][first] for name in names)
    best = [name for name in names if compared[name]["metrics"][first] == top]  # a tie names every one tied
    return BenchmarkResult(
        benchmark=BENCHMARK,
        metrics={"reference": names[0], "embedders": compared, "best": {"by": first, "embedders": best}},
        checks=found,
        config={**config, "embedders": {name: dict(runs[name].provenance) for name in names}},
        provenance=provenance,
    )


def embedder_table(result: BenchmarkResult) -> str:
    """The embedders as rows: each headline figure, and the change in the first from the reference embedder."""
    compared = result.metrics["embedders"]
    reference = result.metrics["reference"]
    names = list(compared[reference]["metrics"])
    lines = [
        *_heading(result, f"{result.config.get('retriever', 'hybrid')} per embedder"),
        "",
        "the same stores and configuration, one embedder at a time; the change is from " + reference,
        "",
        "| embedder | id | " + " | ".join(names) + f" | change in {names[0]} |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |",
    ]
    for name, row in compared.items():
        run = result.config["embedders"][name]
        change = "" if name == reference else f"{row['delta'][names[0]]:+.4f}"
        lines.append(
            f"| {name} | {run['embedder_id']} | "
            + " | ".join(f"{row['metrics'][n]:.4f}" for n in names)
            + f" | {change} |"
        )
    best = result.metrics["best"]
    lines += [
        "",
        f"best by {best['by']}: {' and '.join(best['embedders'])}{' (a tie)' if len(best['embedders']) > 1 else ''}",
    ]
    return "\n".join(lines + _checks_table(result)) + "\n"


def write_embedder_table(result: BenchmarkResult, path: Path) -> None:
    """The record, its table beside it (``.md``), and the table on the terminal."""
    table = embedder_table(result)
    write_result(result, path)
    path.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {path} and {path.with_suffix('.md')}")


def embedder_label(source: str) -> str:
    """A registered name as it is; a model folder by its folder name (what a file name and a table row use)."""
    label = Path(source).name if "/" in source else source
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
