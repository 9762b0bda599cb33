"""Operational freshness: each operational fault the LCA paper records, injected into a fresh store, and whether the
store's own health report sees it, how many steps and seconds after it is present. No model is asked anything.

inspect eval protocols/evals/freshness/freshness.py --model mockllm/model
lca run freshness --conditions full-lca --model mockllm/model
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from inspect_ai import Task, task, task_with
from inspect_ai.solver import solver

from protocols.evals.freshness.dataset import DEFAULT_FAULTS, freshness_samples
from protocols.evals.freshness.faults import FaultSpec, run_with_baseline
from protocols.evals.freshness.scorer import RUN_KEY, fault_detection
from protocols.evals.registry import folder_metadata
from protocols.harness import solvers
from protocols.harness.tasks import answered_without_model, condition_task


def inject_fault():
    """The solver: run the sample's fault scenario and its healthy baseline on fresh stores (the process's shared
    embedder) and set the run as the output, without calling the model (zero tokens used)."""

    @solver(name="inject_fault")
    def _make():
        async def solve(state, generate):
            spec = FaultSpec.model_validate(state.metadata["fault"])
            run = await asyncio.to_thread(run_with_baseline, spec, solvers.shared_embedder())
            state.store.set(RUN_KEY, run)
            verdict = (
                f"detected by {run['check']} ({run['status']}) {run['steps_to_detection']} step(s) after onset: "
                f"{run['message']}"
                if run["detected"]
                else "not detected by any health check"
            )
            return answered_without_model(state, f"{spec.id}: {verdict}")

        return solve

    return _make()


@task
def freshness(
    faults: str = str(DEFAULT_FAULTS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
) -> Task:
    """``condition`` and ``params`` are checked and recorded like every protocol's, but no condition is built: the
    faults are injected into a Substrate directly, so every condition gives the same figures."""
    task = condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=16,
        dataset=faults,
        dataset_name=Path(faults).stem,
        load=lambda: freshness_samples(faults),
        scorers=lambda: [fault_detection()],
    )
    return task_with(task, solver=inject_fault())
