"""Continuity's samples: one per probe of a scenario file (``docs/scenario-format.md``), each carrying
its scenario's history in metadata. The format and its validation are the harness's
(``protocols.harness.scenario``), shared with any protocol written as scenarios."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_task_samples as continuity_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "continuity-v1.jsonl"

__all__ = ["DEFAULT_SCENARIOS", "continuity_samples"]
