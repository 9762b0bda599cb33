"""The insight protocol: one integration cycle (``lca.insight.integrate``) over each planted corpus, its surfaced
pairs against the corpus's gold rhymes, beside the content-only detector on the same corpus. Signatures are the
generator's own (``corpus.GeneratorSigner``), so the figures measure the cycle, not a signer; ``lca bench insight``
adds SmolLM2's signatures on a slice and the corpus-size curve. No model is asked anything.

inspect eval protocols/evals/insight/insight.py --model mockllm/model
lca run insight --conditions full-lca --model mockllm/model
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from inspect_ai import Task, task, task_with
from inspect_ai.solver import solver

from protocols.evals.insight.dataset import DEFAULT_CORPUS, insight_samples
from protocols.evals.insight.scorer import RUN_KEY, rhyme_detection
from protocols.evals.registry import folder_metadata
from protocols.harness import solvers
from protocols.harness.tasks import answered_without_model, condition_task


def run_corpus(records, embedder, seed: int) -> dict:
    """The cycle and the content-only detector over ``records`` in fresh stores, measured against their gold."""
    from lca.insight import IntegrationConfig
    from protocols.evals.insight.corpus import GeneratorSigner, PlantedRecord
    from protocols.evals.insight.measure import content_only, measure_cycle, planted_store

    planted = [r if isinstance(r, PlantedRecord) else PlantedRecord(**r) for r in records]
    config = IntegrationConfig(seed=seed)
    out = {}
    for arm, arm_config in (("cycle", config), ("content_only", content_only(config))):
        home = Path(tempfile.mkdtemp(prefix="lca-insight-"))
        try:
            planted_store(planted, home)
            _, out[arm] = measure_cycle(home, planted, GeneratorSigner(planted), embedder, arm_config)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return out


def integrate_corpus(seed: int):
    """The solver: run the sample's corpus through the cycle and the content-only detector (the process's shared
    embedder) and set the verdict as the output, without calling the model (zero tokens used)."""

    @solver(name="integrate_corpus")
    def _make():
        async def solve(state, generate):
            run = await asyncio.to_thread(run_corpus, state.metadata["records"], solvers.shared_embedder(), seed)
            state.store.set(RUN_KEY, run)
            cycle = run["cycle"]
            return answered_without_model(
                state,
                f"{state.metadata['corpus']}: {cycle['above_threshold_pairs']} pair(s) above the threshold "
                f"{cycle['threshold']}, {cycle['true_discoveries']} of {cycle['gold_pairs']} gold rhymes",
            )

        return solve

    return _make()


@task
def insight(
    corpus: str = str(DEFAULT_CORPUS),
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
) -> Task:
    """``condition`` and ``params`` are checked and recorded like every protocol's, but no condition is built: the
    corpus is written into a fresh store and integrated directly, so every condition gives the same figures."""
    task = condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=16,
        dataset=corpus,
        dataset_name=Path(corpus).stem,
        load=lambda: insight_samples(corpus),
        scorers=lambda: [rhyme_detection()],
    )
    return task_with(task, solver=integrate_corpus(seed))
