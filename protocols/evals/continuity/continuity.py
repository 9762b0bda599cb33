"""Continuity over multi-session scenarios: one probe per sample, under one named condition.

    inspect eval protocols/evals/continuity/continuity.py -T condition=full-lca --model lca-local/smollm2
    lca run continuity --conditions stateless,full-lca --model lca-local/smollm2
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import generate

from conditions import build_condition
from lca.provenance import code_version
from protocols.harness.scenario import scenario_samples
from protocols.harness.scorers import answer_match, substrate
from protocols.harness.solvers import parse_params, replay_condition

DEFAULT_SCENARIOS = Path(__file__).resolve().parents[3] / "data" / "scenarios" / "continuity-v1.jsonl"


@task
def continuity(scenarios: str = str(DEFAULT_SCENARIOS), condition: str = "full-lca", params: str = "",
               seed: int = 0, max_tokens: int = 128) -> Task:
    """``params``: the condition's parameters as ``name=value`` pairs joined by ';'."""
    parsed = parse_params(condition, params)
    resolved = build_condition(condition, **parsed).get_params()   # refuses bad names before any sample
    samples, digest = scenario_samples(scenarios)
    return Task(
        dataset=MemoryDataset(samples, name=Path(scenarios).stem),
        solver=[replay_condition(condition, parsed, seed), generate()],
        scorer=[answer_match(), substrate()],
        config=GenerateConfig(temperature=0.0, seed=seed, max_tokens=max_tokens),
        name=f"continuity-{condition}",
        metadata={"protocol": "continuity", "condition": condition, "condition_params": resolved,
                  "dataset": str(scenarios), "dataset_sha256": digest, "seed": seed,
                  "code_version": code_version()},
    )
