"""LongMemEval under any condition: the haystack replayed as authoritative transcript, the question
asked on the question date. Scores: the official judged accuracy (grader role; overall, task-averaged,
abstention) and the model-free substrate measures (gold evidence injected? tokens, latency).

    lca run longmemeval --conditions transcript-recall,full-lca --model lca-local/smollm2 -T data=PATH --limit 5
    inspect eval protocols/evals/longmemeval/longmemeval.py -T condition=full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from inspect_ai import Task, task

from protocols.evals.data_paths import find_data_file
from protocols.evals.longmemeval.dataset import longmemeval_samples
from protocols.evals.longmemeval.scorer import longmemeval_judge
from protocols.evals.registry import folder_metadata, folder_recall_weights, folder_retrieval
from protocols.harness.scorers import substrate
from protocols.harness.tasks import condition_task

SPLITS = ("s_dev", "oracle")


@task
def longmemeval(
    data: str = "",
    condition: str = "full-lca",
    params: str = "",
    seed: int = 0,
    max_tokens: int = 256,
    judge: int = 1,
    split: str = "s_dev",
) -> Task:
    """``data``: an official LongMemEval file (plain, .gz or .xz) or a folder; default LCA_DATA's file of
    ``split``: ``s_dev`` (LongMemEval_S dev, full haystacks) or ``oracle`` (evidence sessions only: what a
    short study can afford for conditions that summarize every session). ``judge`` = 0 scores only the
    substrate measures."""
    if split not in SPLITS:
        raise ValueError(f"longmemeval: unknown split '{split}'; known: {', '.join(SPLITS)}")
    path = find_data_file(f"longmemeval_{split}", data or None)
    if path is None:
        raise FileNotFoundError(f"no LongMemEval {split} file: pass -T data=PATH or set LCA_DATA")

    def load():
        samples, report = longmemeval_samples(path)
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
        recall_weights=folder_recall_weights(__file__),  # none yet: recall's defaults
        scorers=lambda: [longmemeval_judge(), substrate()] if judge else [substrate()],
    )
