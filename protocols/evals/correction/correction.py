"""Correction and overclaim: after a user corrected the agent (a wrong value, or an overclaim such as "it was
tested"), is the mistake repeated where it would recur? One probe per sample, under one named condition.

inspect eval protocols/evals/correction/correction.py -T condition=full-lca --model lca-local/smollm2
lca run correction --conditions stateless,identity-only,transcript-recall,full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.correction.dataset import CATEGORIES, DEFAULT_SCENARIOS, correction_samples
from protocols.evals.registry import folder_metadata
from protocols.harness.continuity_scorers import continuity_behaviour, continuity_context, replacement_context
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task
from protocols.harness.variants import parse_variant

PROMPT_ONLY = "identity-only"  # the condition that carries the corrections as standing instructions


@task
def correction(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 160,
    standing_corrections: bool = True,
) -> Task:
    """``params``: the condition's parameters as ``name=value`` pairs joined by ';'. ``standing_corrections``:
    under ``identity-only`` (the prompt-only arm), give the history's corrections as standing instructions."""
    prompt_only = standing_corrections and parse_variant(condition).condition == PROMPT_ONLY
    return condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: correction_samples(scenarios, standing_corrections=prompt_only),
        scorers=lambda: [
            continuity_behaviour(CATEGORIES),
            continuity_context(CATEGORIES),
            replacement_context(),
            substrate(),
        ],
    )
