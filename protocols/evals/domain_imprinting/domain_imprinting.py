"""Domain imprinting (longitudinal): identical agents after sustained work in different domains, tested at each
checkpoint on the same novel cases from every domain, in and out of their own. One condition (an arm) per task.

inspect eval protocols/evals/domain_imprinting/domain_imprinting.py --model lca-local/smollm2
lca run domain_imprinting --conditions 'full-lca[consolidate=0],full-lca[consolidate=1,approver=imprinting-study]' \
    --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task

from protocols.evals.domain_imprinting.dataset import DEFAULT_SCENARIOS, imprinting_samples, parse_checkpoints
from protocols.evals.domain_imprinting.scorer import lesson_behaviour, lesson_context
from protocols.evals.registry import folder_metadata
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task


@task
def domain_imprinting(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "consolidate=0",
    seed: int = 0,
    max_tokens: int = 160,
    checkpoints: str = "",
) -> Task:
    """``condition``: a registered name or variant label; ``params``: parameters every variant shares, as
    ``name=value`` pairs joined by ';' (default: the recall arm, consolidation off; a variant's bracketed ones win,
    so ``full-lca[consolidate=1,approver=NAME]`` is the procedural arm); ``checkpoints``: the checkpoints to ask at,
    joined by ',' (default: all), e.g. ``0,4`` for the first and the last: a short run along the longitudinal axis."""
    wanted = parse_checkpoints(checkpoints)
    return condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: imprinting_samples(scenarios, checkpoints=wanted),
        scorers=lambda: [lesson_behaviour(), lesson_context(), substrate()],
    )
