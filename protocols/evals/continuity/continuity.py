"""Continuity over multi-session scenarios: one probe per sample, under one named condition.

inspect eval protocols/evals/continuity/continuity.py -T condition=full-lca --model lca-local/smollm2
lca run continuity --conditions stateless,full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.continuity.dataset import DEFAULT_SCENARIOS, continuity_samples
from protocols.evals.registry import folder_metadata
from protocols.harness.scorers import answer_match, substrate
from protocols.harness.tasks import condition_task


@task
def continuity(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 128,
) -> Task:
    """``params``: the condition's parameters as ``name=value`` pairs joined by ';'."""
    return condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: continuity_samples(scenarios),
        scorers=lambda: [answer_match(), substrate()],
    )
