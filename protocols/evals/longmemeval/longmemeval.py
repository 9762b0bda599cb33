"""LongMemEval under any condition: the haystack replayed as authoritative transcript, the question
asked on the question date. Scores: the official judged accuracy (grader role; overall, task-averaged,
abstention) and the model-free substrate measures (gold evidence injected? tokens, latency).

    lca run longmemeval --conditions transcript-recall,full-lca --model lca-local/smollm2 -T data=PATH --limit 5
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import generate

from conditions import build_condition
from lca.provenance import code_version
from protocols.data_paths import find_data_file
from protocols.evals.longmemeval.judge import longmemeval_judge
from protocols.harness.benchmarks import longmemeval_samples
from protocols.harness.scorers import substrate
from protocols.harness.solvers import parse_params, replay_condition


@task
def longmemeval(data: str = "", condition: str = "full-lca", params: str = "", seed: int = 0,
                max_tokens: int = 256, judge: int = 1) -> Task:
    """``data``: an official LongMemEval file (plain, .gz or .xz) or a folder; default LCA_DATA's
    LongMemEval_S dev split. ``judge`` = 0 scores only the substrate measures."""
    path = find_data_file("longmemeval_s_dev", data or None)
    if path is None:
        raise FileNotFoundError("no LongMemEval file: pass -T data=PATH or set LCA_DATA")
    parsed = parse_params(condition, params)
    resolved = build_condition(condition, **parsed).get_params()
    samples, report = longmemeval_samples(path)
    return Task(dataset=MemoryDataset(samples, name=path.name),
                solver=[replay_condition(condition, parsed, seed), generate()],
                scorer=[longmemeval_judge(), substrate()] if judge else [substrate()],
                config=GenerateConfig(temperature=0.0, seed=seed, max_tokens=max_tokens),
                name=f"longmemeval-{condition}",
                metadata={"protocol": "longmemeval", "condition": condition, "condition_params": resolved,
                          "dataset": str(path), "dataset_sha256": report.sha256, "load_report": report.to_dict(),
                          "seed": seed, "code_version": code_version()})
