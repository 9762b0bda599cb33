"""Compaction / interruption: a long task whose context is cut, resumed under one named condition.

inspect eval protocols/evals/compaction/compaction.py -T condition=truncation --model lca-local/smollm2
lca run compaction --conditions truncation,summary,transcript-recall,full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task, task_with
from inspect_ai.model import ChatMessageUser
from inspect_ai.solver import chain, solver

from lca.errors import LCAError
from protocols.evals.compaction.dataset import DEFAULT_SCENARIOS, compaction_samples
from protocols.evals.compaction.scorer import ANSWERS_KEY, INTERRUPTION
from protocols.evals.compaction.scorer import compaction as compaction_scorer
from protocols.evals.registry import folder_metadata
from protocols.harness.continuity_scorers import replacement_context
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task

RESUME_FOLLOW_UPS = (
    "What exactly was still unfinished when we stopped?",
    "Which piece of work should I pick up first, concretely?",
    "Name the task we were in the middle of.",
)
"""The turns after "where did we leave off?": generic nudges, the same for every scenario, naming nothing."""


def resume_sequence(follow_ups: int):
    """After the first answer, a resume probe gets ``follow_ups`` more user turns in the same conversation (the
    context built at resumption stays; no new recall); every answer is kept for ``turns_to_resume``."""

    @solver(name="resume_sequence")
    def _make():
        async def solve(state, generate):
            answers = [state.output.completion if state.output else ""]
            if state.metadata.get("category") == INTERRUPTION:
                for text in RESUME_FOLLOW_UPS[:follow_ups]:
                    state.messages.append(ChatMessageUser(content=text))
                    state = await generate(state)
                    answers.append(state.output.completion)
            state.store.set(ANSWERS_KEY, answers)
            return state

        return solve

    return _make()


@task
def compaction(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "budget_tokens=600",
    follow_ups: int = 2,
    seed: int = 0,
    max_tokens: int = 128,
) -> Task:
    """``params``: the condition's parameters as ``name=value`` pairs joined by ';' (the default budget is the
    context left after the interruption, the same for every condition). ``follow_ups``: user turns after
    "where did we leave off?" (0 to 3)."""
    if not 0 <= follow_ups <= len(RESUME_FOLLOW_UPS):
        raise LCAError(f"compaction: follow_ups must be 0 to {len(RESUME_FOLLOW_UPS)}, got {follow_ups}")
    base = condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: compaction_samples(scenarios),
        scorers=lambda: [compaction_scorer(), replacement_context(), substrate()],
    )
    base.metadata = {**(base.metadata or {}), "follow_ups": follow_ups}
    return task_with(base, solver=chain(base.solver, resume_sequence(follow_ups)))
