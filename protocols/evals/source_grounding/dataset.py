"""Source grounding's samples: the probes of a scenario file (docs/scenario-format.md), each with its history.
Every probe is a question about past work; the scorer reads what sources the condition injected."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "mechanisms-v2.jsonl"


def source_grounding_samples(path: Path | str, *, limit: int | None = None):
    samples, digest = scenario_samples(path, limit=limit)
    return samples, digest, {}
