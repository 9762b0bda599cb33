"""How a generated figure names its numbers, its source and its day: the helpers every figure template shares
(``protocols.bench.figures`` and ``protocols.bench.figures_retrieval``)."""

from __future__ import annotations

from pathlib import Path

from protocols.evals.benchmark import BenchmarkResult

EXAMPLES = Path("results/examples")


def source(*files: str) -> str:
    """The record files a figure reads, as the document shows them."""
    return ", ".join(f"`{EXAMPLES / f}`" for f in files)


def day(result: BenchmarkResult) -> str:
    """The day a record was written."""
    return result.provenance.date[:10]


def share(value: float | None) -> str:
    """A share to two decimals, or n/a."""
    return "n/a" if value is None else f"{value:.2f}"
