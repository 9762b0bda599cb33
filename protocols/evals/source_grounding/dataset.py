"""Source grounding's samples: the probes of a scenario file (docs/scenario-format.md), each with its history.
Every probe is a question about past work; the scorer reads what sources the condition injected."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_task_samples as source_grounding_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "mechanisms-v2.jsonl"

__all__ = ["DEFAULT_SCENARIOS", "source_grounding_samples"]
