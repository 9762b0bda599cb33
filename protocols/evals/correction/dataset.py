"""Correction's samples: the correction and overclaim probes of a scenario file. For the prompt-only arm the
corrections the history records (each ``correction`` event's ``right``) are appended to the scenario's
identity instructions as standing instructions, so ``identity-only`` carries them and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocols.harness.continuity_scorers import category_counts, vocabulary_samples
from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
CATEGORIES = ("correction", "overclaim")
STANDING_HEADER = "Standing corrections from earlier sessions (follow them):"


def recorded_corrections(history: dict[str, Any]) -> list[str]:
    """What is right, per ``correction`` event of the history, in the order they were made (repeats once)."""
    out: list[str] = []
    for session in history["sessions"]:
        for entry in session["entries"]:
            event = (entry.get("meta") or {}).get("event") or {}
            right = str(event.get("right") or "").strip()
            if event.get("type") == "correction" and right and right not in out:
                out.append(right)
    return out


def with_standing_corrections(history: dict[str, Any]) -> dict[str, Any]:
    """The history with its corrections appended to the identity's instructions (a new dict; the others stay)."""
    corrections = recorded_corrections(history)
    if not corrections:
        return history
    identity = dict(history.get("identity") or {})
    block = "\n".join([STANDING_HEADER, *(f"- {c}" for c in corrections)])
    identity["instructions"] = "\n\n".join(t for t in (identity.get("instructions", "").strip(), block) if t)
    return {**history, "identity": identity}


def correction_samples(path: Path | str, *, standing_corrections: bool = False, limit: int | None = None):
    """The samples, the file's sha256 and the task metadata (probes per category, whether the corrections are
    standing instructions); a file without a correction or overclaim probe is refused naming it."""
    samples, digest = scenario_samples(path)
    kept = vocabulary_samples(samples, path, CATEGORIES)
    kept = kept[:limit] if limit else kept
    if standing_corrections:
        for sample in kept:
            sample.metadata = {**sample.metadata, "history": with_standing_corrections(sample.metadata["history"])}
    return kept, digest, {"probe_categories": category_counts(kept), "standing_corrections": standing_corrections}
