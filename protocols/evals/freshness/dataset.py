"""Freshness's samples: one per line of a fault file (``faults-v1.jsonl``: which fault, how many health checks, the
step it is injected at, its settings; validated by ``faults.FaultSpec``, a bad line refused naming file, line and
field)."""

from __future__ import annotations

from pathlib import Path

from lca.importers import file_sha256
from protocols.evals.freshness.faults import load_faults

DEFAULT_FAULTS = Path(__file__).resolve().parent / "faults-v1.jsonl"


def freshness_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and the task metadata (the task's ``load``)."""
    from inspect_ai.dataset import Sample

    specs = load_faults(path)[:limit]
    samples = [
        Sample(
            id=spec.id,
            input=f"Inject '{spec.paper}' ({spec.title}) and read the store's health after each of {spec.steps} steps.",
            target=spec.paper,
            metadata={"fault": spec.model_dump(mode="json")},
        )
        for spec in specs
    ]
    return samples, file_sha256(Path(path)), {"faults": [s.id for s in specs]}
