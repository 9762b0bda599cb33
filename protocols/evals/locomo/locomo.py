"""LoCoMo under any condition. Scores: the official QA score per item (LoCoMo's category rules),
reported overall and per category by LoCoMo's own ids, and the substrate measures.

    lca run locomo --conditions transcript-recall,full-lca --model lca-local/smollm2 -T data=PATH --limit 20
    inspect eval protocols/evals/locomo/locomo.py -T condition=full-lca -T data=PATH --model lca-local/smollm2
"""

from __future__ import annotations

from inspect_ai import Task, task

from protocols.evals.data_paths import find_data_file
from protocols.evals.locomo.dataset import CATEGORY_NAMES, locomo_samples
from protocols.evals.locomo.scorer import locomo_qa
from protocols.evals.registry import folder_metadata, folder_recall_weights, folder_retrieval
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task


@task
def locomo(
    data: str = "",
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 32,
    sessions: int = 0,
) -> Task:
    """The paper's generation settings: temperature 0, at most 32 output tokens. ``sessions`` > 0 replays
    only each conversation's first that many sessions and asks only the questions whose evidence lies
    inside them (a slice for slow agent models; the load report counts what it left out)."""
    path = find_data_file("locomo", data or None)
    if path is None:
        raise FileNotFoundError("no LoCoMo file: pass -T data=PATH or set LCA_DATA")

    def load():
        samples, report = locomo_samples(path, sessions=sessions)
        for sample in samples:
            category = sample.metadata["category"]
            sample.metadata["category_name"] = f"{category} {CATEGORY_NAMES[category]}"
        return samples, report.sha256, {"load_report": report.to_dict()}

    return condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=path,
        dataset_name=path.name,
        load=load,
        retrieval=folder_retrieval(__file__),
        recall_weights=folder_recall_weights(__file__),
        scorers=lambda: [locomo_qa(), substrate()],
    )
