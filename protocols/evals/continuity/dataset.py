"""Continuity's samples: one per probe of a scenario file (``docs/scenario-format.md``), each carrying
its scenario's history in metadata. The format and its validation are the harness's
(``protocols.harness.scenario``), shared with any protocol written as scenarios."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "continuity-v1.jsonl"


def continuity_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and no extra task metadata (the task's ``load``)."""
    samples, digest = scenario_samples(path, limit=limit)
    return samples, digest, {}
