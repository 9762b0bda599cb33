"""Hollow copy: is the agent the same collaborator after the history? One probe per sample, under one named
condition; computed measures per probe category, from the answer and from what the condition injected; push-back,
role judgment and style continuity from the answer, with the panel's items for their judged twins.

inspect eval protocols/evals/hollow_copy/hollow_copy.py -T condition=full-lca --model lca-local/smollm2
lca run hollow_copy --conditions stateless,identity-only,summary,transcript-recall,full-lca,adversarial-summary
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.hollow_copy.dataset import DEFAULT_SCENARIOS, hollow_copy_samples
from protocols.evals.registry import folder_metadata
from protocols.harness.continuity_scorers import continuity_behaviour, continuity_context, replacement_context
from protocols.harness.judgment_scorers import judgment_behaviour
from protocols.harness.scorers import substrate
from protocols.harness.style_scorers import style_behaviour
from protocols.harness.tasks import condition_task


@task
def hollow_copy(
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
        load=lambda: hollow_copy_samples(scenarios),
        scorers=lambda: [
            continuity_behaviour(),
            continuity_context(),
            replacement_context(),
            substrate(),
            judgment_behaviour(),
            style_behaviour(),
        ],
    )
