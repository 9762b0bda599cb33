"""Hollow-copy's samples: one per probe of a scenario file whose category is in the shared vocabulary
(``protocols.harness.continuity_scorers.CATEGORIES``), each carrying its scenario's history in metadata."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.continuity_scorers import category_counts, vocabulary_samples
from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
FIXTURE = REPO / "data" / "fixtures" / "continuity-v2-fixture.jsonl"


def hollow_copy_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and the probes per category (the task's ``load``); a file without a
    probe of the vocabulary is refused naming it."""
    samples, digest = scenario_samples(path)
    kept = vocabulary_samples(samples, path)
    kept = kept[:limit] if limit else kept
    return kept, digest, {"probe_categories": category_counts(kept)}
