"""The compaction protocol's samples: one per probe of a scenario file (``docs/scenario-format.md``); the probes
of category ``interruption`` open a resume sequence (``compaction.RESUME_FOLLOW_UPS``), those of category
``constraint`` and ``correction`` are asked once."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "compaction-v1.jsonl"


def compaction_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and no extra task metadata (the task's ``load``)."""
    samples, digest = scenario_samples(path, limit=limit)
    return samples, digest, {}
