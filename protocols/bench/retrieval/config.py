"""What a retrieval run asks the store: the retrievers, each dataset's ``RetrievalConfig`` (a file beside
that benchmark's task, ``protocols/evals/<dataset>/retrieval.yaml``; the store's defaults where there is
none) and a grid of variants. No numpy here: the command line reads this module to check ``--set`` before
any model loads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import product
from pathlib import Path

from lca.params import ParameterError, coerce, split_assignment
from lca.retrieval.config import RETRIEVAL_FIELDS, RetrievalConfig

RETRIEVERS = ("bm25", "dense", "hybrid", "resonance")
EVALS = Path(__file__).resolve().parents[2] / "evals"


def dataset_config_path(dataset: str) -> Path:
    return EVALS / dataset / "retrieval.yaml"


def dataset_config(dataset: str) -> RetrievalConfig:
    """The dataset's retrieval settings, chosen on its dev split (the store's defaults where no file is)."""
    path = dataset_config_path(dataset)
    return RetrievalConfig.from_file(path) if path.exists() else RetrievalConfig()


def grid_variants(config: RetrievalConfig, items: Sequence[str] | None) -> dict[str, RetrievalConfig]:
    """``--grid name=v1,v2`` items: every combination of the listed values over ``config``, by name."""
    axes: list[tuple[str, list]] = []
    for item in items or ():
        name, raw = split_assignment(item, flag="--grid")
        if name not in RETRIEVAL_FIELDS:
            raise ParameterError("--grid", item, f"unknown name '{name}'; known: {', '.join(sorted(RETRIEVAL_FIELDS))}")
        values = [coerce(v.strip(), RETRIEVAL_FIELDS[name], flag="--grid", item=item) for v in raw.split(",")]
        axes.append((name, values))
    variants: dict[str, RetrievalConfig] = {}
    for combination in product(*(values for _, values in axes)):
        changes = {name: value for (name, _), value in zip(axes, combination)}
        label = ",".join(f"{n}={v}" for n, v in changes.items())
        try:
            variants[label] = replace(config, **changes)
        except ValueError as exc:
            raise ParameterError("--grid", label, str(exc)) from None
    return variants
