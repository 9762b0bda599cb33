"""Hollow-copy's samples: one per probe of a scenario file whose category is in the shared vocabulary
(``protocols.harness.continuity_scorers.CATEGORIES``) or is a behaviour probe
(``protocols.scenarios.behaviour.BEHAVIOUR_CATEGORIES``), each carrying its scenario's history in metadata."""

from __future__ import annotations

from pathlib import Path

from protocols.harness.continuity_scorers import CATEGORIES, category_counts, vocabulary_samples
from protocols.harness.scenario import scenario_samples
from protocols.scenarios.behaviour import BEHAVIOUR_CATEGORIES

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
FIXTURE = REPO / "data" / "fixtures" / "continuity-v2-fixture.jsonl"
BEHAVIOUR_FIXTURE = REPO / "data" / "fixtures" / "behaviour-v2-fixture.jsonl"
BEHAVIOUR_SCENARIOS = REPO / "data" / "scenarios" / "study-behaviour-v1.jsonl"


def hollow_copy_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and the probes per category (the task's ``load``): the probes of the
    vocabulary and the behaviour probes (push-back, role-defer, role-act); a file with neither is refused naming
    the categories it holds."""
    samples, digest = scenario_samples(path)
    kept = [s for s in samples if (s.metadata or {}).get("category") in (*CATEGORIES, *BEHAVIOUR_CATEGORIES)]
    if not kept:
        vocabulary_samples(samples, path)  # refuses the file, naming the categories it holds
    kept = kept[:limit] if limit else kept
    return kept, digest, {"probe_categories": category_counts(kept)}
