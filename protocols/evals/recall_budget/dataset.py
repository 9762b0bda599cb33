"""The recall-budget ablation's samples: one per probe of a scenario file (``docs/scenario-format.md``), each
carrying its scenario's history and gold pointers in metadata, exactly as continuity reads them, so the
variants of one run are compared on the same probes."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_task_samples as recall_budget_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
FIXTURE = REPO / "data" / "scenarios" / "mechanisms-v2.jsonl"

__all__ = ["DEFAULT_SCENARIOS", "recall_budget_samples"]
