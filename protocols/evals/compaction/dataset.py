"""The compaction protocol's samples: one per probe of a scenario file (``docs/scenario-format.md``); the probes
of category ``interruption`` open a resume sequence (``compaction.RESUME_FOLLOW_UPS``), those of category
``constraint`` and ``correction`` are asked once."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_task_samples as compaction_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "compaction-v1.jsonl"

__all__ = ["DEFAULT_SCENARIOS", "compaction_samples"]
