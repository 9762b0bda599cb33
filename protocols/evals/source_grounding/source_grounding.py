"""Source grounding: answers about past work, each claim labeled with its source, scored for answer accuracy and
source accuracy apart.

lca run source_grounding --conditions transcript-recall,full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.registry import folder_metadata
from protocols.evals.source_grounding.dataset import DEFAULT_SCENARIOS, source_grounding_samples
from protocols.evals.source_grounding.scorer import INSTRUCTION, source_grounding_scorer
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task


@task
def source_grounding(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 160,
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
        load=lambda: source_grounding_samples(scenarios),
        scorers=lambda: [source_grounding_scorer(), substrate()],
        instruction=INSTRUCTION,
    )
