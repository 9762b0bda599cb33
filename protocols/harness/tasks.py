"""The one shape every protocol task has: a named condition replayed over a dataset, then the probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

Loaded = tuple[Sequence[Any], str, dict[str, Any]]   # samples, the file's sha256, extra metadata


def condition_task(*, protocol: str, condition: str, params: str, seed: int, max_tokens: int, dataset: str | Path,
                   dataset_name: str, load: Callable[[], Loaded], scorers: Callable[[], list]):
    """An inspect Task. A bad condition name or parameter is refused first, before the dataset is
    even loaded. Its metadata records the protocol, the condition's resolved parameters, the dataset
    and its sha256, the seed and the code revision."""
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import GenerateConfig
    from inspect_ai.solver import generate

    from conditions import build_condition
    from lca.provenance import code_version
    from protocols.harness.solvers import parse_params, replay_condition

    parsed = parse_params(condition, params)
    resolved = build_condition(condition, **parsed).get_params()
    samples, sha256, metadata = load()
    return Task(dataset=MemoryDataset(list(samples), name=dataset_name),
                solver=[replay_condition(condition, parsed, seed), generate()],
                scorer=scorers(),
                config=GenerateConfig(temperature=0.0, seed=seed, max_tokens=max_tokens),
                name=f"{protocol}-{condition}",
                metadata={"protocol": protocol, "condition": condition, "condition_params": resolved,
                          "dataset": str(dataset), "dataset_sha256": sha256, "seed": seed,
                          "code_version": code_version(), **metadata})
