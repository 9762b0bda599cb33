"""Protocols as inspect tasks, one folder each (the inspect_evals layout)."""

from __future__ import annotations

from lca.errors import LCAError

PROTOCOLS = {
    "continuity": "protocols.evals.continuity.continuity:continuity",
    "longmemeval": "protocols.evals.longmemeval.longmemeval:longmemeval",
    "locomo": "protocols.evals.locomo.locomo:locomo",
}


def protocol_task(name: str):
    """The @task function of a protocol by name; unknown names are refused with the list."""
    if name not in PROTOCOLS:
        raise LCAError(f"unknown protocol '{name}'; known: {', '.join(sorted(PROTOCOLS))}")
    module, _, attr = PROTOCOLS[name].partition(":")
    import importlib

    return getattr(importlib.import_module(module), attr)
