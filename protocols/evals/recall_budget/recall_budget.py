"""Recall-budget ablation: the same probes under fixed-k, adaptive and no recall, and with each resonance term
zeroed, one condition variant per task, scored on what was injected (needed turns in, forbidden turns out,
tokens, latency) and on the answer.

lca run recall_budget --conditions 'full-lca[policy=fixed-k],full-lca[policy=adaptive],full-lca[policy=none]' \
    --model lca-local/smollm2
inspect eval protocols/evals/recall_budget/recall_budget.py -T 'condition=full-lca[policy=adaptive]' \
    --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.recall_budget.dataset import DEFAULT_SCENARIOS, recall_budget_samples
from protocols.evals.recall_budget.scorer import needed_forbidden
from protocols.evals.registry import folder_metadata
from protocols.harness.scorers import answer_match, substrate
from protocols.harness.tasks import condition_task


@task
def recall_budget(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 128,
) -> Task:
    """``condition``: a variant label such as ``full-lca[policy=none]``; ``params``: parameters every variant
    shares, as ``name=value`` pairs joined by ';' (a variant's bracketed ones win)."""
    return condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: recall_budget_samples(scenarios),
        scorers=lambda: [answer_match(), substrate(), needed_forbidden()],
    )
