"""The migration protocol's samples: each probe of a scenario file in the shared vocabulary (as hollow-copy's),
once per binding the migration varies (a binding is one axis or a combined move: ``model+surface``). Sample ids are ``<scenario>:<probe>@<binding>``; the bindings of one
probe are adjacent, so a ``limit`` takes whole probes."""

from __future__ import annotations

from pathlib import Path

from inspect_ai.dataset import Sample

from lca.errors import LCAError
from protocols.evals.hollow_copy.dataset import DEFAULT_SCENARIOS, FIXTURE, hollow_copy_samples

AXES = ("host", "model", "harness", "surface")
"""What a migration can change: ``host`` only the store's folder (every migration moves it); ``model`` also the
agent model that answers after (the ``migrated`` role); ``harness`` also the loop that drives the agent (inspect's
agent loop before, the task's ``harness`` after: ``lca.scripted_loop``); ``surface`` also how the context reaches
the model (the task's ``surface``)."""
BINDINGS = AXES  # the single-axis moves, one binding each
COMBINE = "+"

__all__ = ["AXES", "BINDINGS", "DEFAULT_SCENARIOS", "FIXTURE", "binding_axes", "migration_samples", "parse_bindings"]


def binding_axes(binding: str) -> tuple[str, ...]:
    """The axes one binding changes: ``"model+surface"`` -> ``("model", "surface")``, in ``AXES`` order."""
    return tuple(axis for axis in AXES if axis in binding.split(COMBINE))


def _one_binding(part: str, spec: str) -> str:
    axes = [a.strip() for a in part.split(COMBINE)]
    unknown = [a for a in axes if a not in AXES]
    if unknown or not all(axes) or len(set(axes)) != len(axes):
        why = (
            f"{', '.join(repr(a) for a in unknown)} is not an axis"
            if unknown and all(axes)
            else "an axis is empty"
            if not all(axes)
            else "an axis is repeated"
        )
        raise LCAError(
            f"migration: field 'bindings': {part!r} in {spec!r}: {why}; a binding is one axis of "
            f"{', '.join(AXES)}, or several joined by '{COMBINE}' (model{COMBINE}surface)"
        )
    return COMBINE.join(a for a in AXES if a in axes)  # one spelling per move: surface+model is model+surface


def parse_bindings(spec: str) -> tuple[str, ...]:
    """``"host,model,model+surface"`` -> the bindings, each a move (one axis, or several joined by ``+``); an
    unknown axis, an empty or repeated one, or a move named twice is refused, naming the field and the axes."""
    parts = [part.strip() for part in (spec or "").split(",") if part.strip()]
    if not parts:
        raise LCAError(f"migration: field 'bindings': {spec!r} names no move; known axes: {', '.join(AXES)}")
    names = tuple(_one_binding(part, spec) for part in parts)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise LCAError(f"migration: field 'bindings': {spec!r} names the move {', '.join(repeated)} twice")
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
