"""Protocols as inspect tasks, one folder each (the inspect_evals layout), found by the registry."""

from __future__ import annotations

from protocols.evals.registry import (
    ProtocolMetadata,
    ProtocolRegistry,
    available_protocols,
    protocol_metadata,
    protocol_task,
)

__all__ = ["ProtocolMetadata", "ProtocolRegistry", "available_protocols", "protocol_metadata", "protocol_task"]
