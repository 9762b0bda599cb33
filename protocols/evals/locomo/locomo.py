"""LoCoMo under any condition. Scores: the official QA score per item (LoCoMo's category rules),
reported overall and per category by LoCoMo's own ids, and the substrate measures.

    lca run locomo --conditions transcript-recall,full-lca --model lca-local/smollm2 -T data=PATH --limit 20
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import generate

from conditions import build_condition
from lca.provenance import code_version
from protocols.data_paths import find_data_file
from protocols.evals.locomo.qa_metrics import CATEGORY_NAMES, locomo_score
from protocols.harness.benchmarks import locomo_samples
from protocols.harness.scorers import substrate
from protocols.harness.solvers import parse_params, replay_condition


def locomo_qa():
    from inspect_ai.scorer import Score, grouped, mean, scorer

    @scorer(metrics=[mean(), grouped(mean(), "category_name", all=False)], name="locomo_qa")
    def _make():
        async def score(state, target):
            response = state.output.completion if state.output else ""
            value = locomo_score(response, target.text, int(state.metadata["category"]))
            return Score(value=value, answer=response, explanation=f"gold: {target.text}")
        return score
    return _make()


@task
def locomo(data: str = "", condition: str = "full-lca", params: str = "", seed: int = 0,
           max_tokens: int = 32) -> Task:
    """The paper's generation settings: temperature 0, at most 32 output tokens."""
    path = find_data_file("locomo", data or None)
    if path is None:
        raise FileNotFoundError("no LoCoMo file: pass -T data=PATH or set LCA_DATA")
    parsed = parse_params(condition, params)
    resolved = build_condition(condition, **parsed).get_params()
    samples, report = locomo_samples(path)
    for sample in samples:
        sample.metadata["category_name"] = f"{sample.metadata['category']} {CATEGORY_NAMES[sample.metadata['category']]}"
    return Task(dataset=MemoryDataset(samples, name=path.name),
                solver=[replay_condition(condition, parsed, seed), generate()],
                scorer=[locomo_qa(), substrate()],
                config=GenerateConfig(temperature=0.0, seed=seed, max_tokens=max_tokens),
                name=f"locomo-{condition}",
                metadata={"protocol": "locomo", "condition": condition, "condition_params": resolved,
                          "dataset": str(path), "dataset_sha256": report.sha256, "load_report": report.to_dict(),
                          "seed": seed, "code_version": code_version()})
