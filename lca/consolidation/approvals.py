"""Held procedural writes (memory or identity) and their approval by a named approver."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from lca.consolidation.records import Write
from lca.errors import ApprovalRequired, LCAError
from lca.identity import IdentityStore
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryRecord, MemoryStore, Supersession, render_memory


class ProposalStore(Protocol):
    """What approving a proposal needs of a store (lca.substrate.Substrate is one)."""

    @property
    def home(self) -> Path: ...

    @property
    def memory(self) -> MemoryStore: ...

    def writer_lock(self) -> AbstractContextManager[Any]: ...

    def ingest(self) -> Any: ...


def pending_proposals(store: ProposalStore) -> list[dict[str, Any]]:
    folder = StoreLayout(store.home).proposals
    if not folder.exists():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def approve_proposal(store: ProposalStore, proposal_id: str, *, approver: str) -> list[Write]:
    """Apply a held procedural write with a named approver; refused if its targets changed since."""
    if not (approver and approver.strip()):
        raise ApprovalRequired("approving a proposal needs a named approver")
    layout = StoreLayout(store.home)
    path = layout.proposal(proposal_id)
    if not path.exists():
        known = ", ".join(p["id"] for p in pending_proposals(store)) or "none pending"
        raise LCAError(f"no proposal '{proposal_id}' ({known})")
    payload = json.loads(path.read_text(encoding="utf-8"))
    ledger = Ledger(layout.root)
    if payload.get("kind") == "identity":
        with store.writer_lock():
            IdentityStore(layout.root).write(payload["name"], payload["body"], approver=approver)
            ledger.append("proposal_resolved", proposal_id, {"resolution": "approved", "approver": approver})
            path.rename(path.with_suffix(".approved"))
        return [Write(payload["name"], "approved", None, None, approver)]
    memory = store.memory
    writes = []
    with store.writer_lock():
        for memory_id, base in (payload.get("base_hashes") or {}).items():
            current = memory.get(memory_id).computed_hash
            if current != base:
                raise LCAError(
                    f"proposal '{proposal_id}': memory '{memory_id}' changed since it was proposed; "
                    "the proposal no longer applies (reject it and run a new cycle)"
                )
        record = MemoryRecord.model_validate(payload["record"])
        new = memory.write(record, payload["body"], approver=approver)
        writes.append(Write(new.record.id, "approved", payload.get("candidate"), new.computed_hash, approver))
        if payload.get("supersede"):
            old = memory.get(payload["supersede"])
            marked = old.record.model_copy(
                update={
                    "superseded_by": Supersession(id=new.record.id, reason=payload.get("verdict") or "approved"),
                    "valid_to": old.record.valid_to or datetime.now(UTC),
                }
            )
            done = memory.write(marked, old.body, approver=approver)
            writes.append(Write(done.record.id, "superseded", payload.get("candidate"), done.computed_hash, approver))
            ledger.append("memory_superseded", done.record.id, {"by": new.record.id, "reason": "approved proposal"})
        for w in writes:
            written = memory.get(w.memory_id)
            ledger.append(
                "memory_written",
                w.memory_id,
                {
                    "action": w.action,
                    "content_hash": w.content_hash,
                    "approver": approver,
                    "proposal": proposal_id,
                    "file": render_memory(written.record, written.body),
                },
            )
        if payload.get("candidate") and payload.get("promotes", True):
            ledger.append(
                "hypothesis_promoted", payload["candidate"], {"memory_id": new.record.id, "approver": approver}
            )
        ledger.append("proposal_resolved", proposal_id, {"resolution": "approved", "approver": approver})
        path.rename(path.with_suffix(".approved"))
    store.ingest()
    return writes
