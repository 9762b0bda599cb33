"""The migration protocol's samples: each probe of a scenario file in the shared vocabulary (as hollow-copy's),
once per binding the migration varies. Sample ids are ``<scenario>:<probe>@<binding>``; the bindings of one
probe are adjacent, so a ``limit`` takes whole probes."""

from __future__ import annotations

from pathlib import Path

from inspect_ai.dataset import Sample

from lca.errors import LCAError
from protocols.evals.hollow_copy.dataset import DEFAULT_SCENARIOS, FIXTURE, hollow_copy_samples

BINDINGS = ("host", "model", "surface")
"""What one migration changes, one at a time: ``host`` only the store's folder (every migration moves it);
``model`` also the agent model that answers after (the ``migrated`` role); ``surface`` also how the context
reaches the model (the task's ``surface``)."""

__all__ = ["BINDINGS", "DEFAULT_SCENARIOS", "FIXTURE", "migration_samples", "parse_bindings"]


def parse_bindings(spec: str) -> tuple[str, ...]:
    """``"host,model"`` -> the bindings; unknown or repeated names refused, naming the known ones."""
    names = tuple(part.strip() for part in (spec or "").split(",") if part.strip())
    unknown = [n for n in names if n not in BINDINGS]
    if not names or unknown or len(set(names)) != len(names):
        raise LCAError(
            f"migration: bindings {spec!r} must name each of {', '.join(BINDINGS)} at most once (got "
            + (f"unknown {', '.join(unknown)}" if unknown else "none" if not names else "a repeat")
            + ")"
        )
    return names


def migration_samples(path: Path | str, bindings: tuple[str, ...], *, limit: int | None = None):
    """The samples, the file's sha256 and the task's extra metadata (``protocols.harness.tasks.Loaded``)."""
    probes, digest, extra = hollow_copy_samples(path)
    samples = [
        Sample(
            id=f"{s.id}@{binding}",
            input=s.input,
            target=s.target,
            metadata={**(s.metadata or {}), "binding": binding},
        )
        for s in probes
        for binding in bindings
    ]
    return (samples[:limit] if limit else samples), digest, {**extra, "bindings": list(bindings)}
