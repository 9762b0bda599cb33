"""Step 4 and the writes of step 5: carry out the review's plans through the memory write API.

Procedural writes pass the approval gate: without a named approver they are held as proposals.
Every version a write replaces is archived first; a half-applied plan is rolled back; a memory
edited by hand or changed since it was planned is never written over. The caller holds the
store's writer lock.
"""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import datetime
from pathlib import Path

from lca.consolidation.records import Failure, Plan, Write
from lca.derived import derived_tree
from lca.errors import ApprovalRequired, LCAError
from lca.fileio import atomic_write_bytes
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import PROCEDURAL_TYPES, Conflict, MemoryFile, MemoryRecord, MemoryStore, Supersession, render_memory


def archived_version(layout: StoreLayout, memory_id: str, content_hash: str) -> Path:
    """Where the version of a memory file with this content hash is kept once replaced."""
    return layout.memory_archive(memory_id) / (content_hash.split(":")[-1][:16] + ".md")


class PlanWriter:
    """Applies one cycle's plans; ``now`` dates the supersessions it records."""

    def __init__(
        self, layout: StoreLayout, memory: MemoryStore, ledger: Ledger, *, approver: str | None, now: datetime
    ) -> None:
        self.layout = layout
        self.memory = memory
        self.ledger = ledger
        self.approver = approver
        self.now = now

    @property
    def approved(self) -> bool:
        return bool(self.approver and self.approver.strip())

    def apply(self, plans: list[Plan], drifted: set[str], failures: list[Failure], cycle_id: str) -> list[Write]:
        writes: list[Write] = []
        for plan in plans:
            cand = plan.candidate
            if cand.resurfaced_by is not None:
                self.ledger.append(
                    "hypothesis_resurfaced",
                    cand.id,
                    {"by": cand.resurfaced_by, "cycle": cycle_id, "sources": [f"{s}#{e}" for s, e in cand.sources]},
                )
            else:
                self.ledger.propose(
                    cand.claim, type=cand.type, cycle=cycle_id, sources=[f"{s}#{e}" for s, e in cand.sources]
                )
            if plan.verdict.verdict in ("reject", "remove", "failed"):
                if plan.verdict.verdict != "failed":
                    self.ledger.append(
                        "hypothesis_refuted", cand.id, {"reason": plan.verdict.reason, "cycle": cycle_id}
                    )
                if plan.conflict_on is not None:
                    writes.extend(self.mark_conflict(plan, drifted, failures, cycle_id))
                continue
            if plan.record is not None:
                writes.extend(self.write_plan(plan, drifted, failures, cycle_id))
        return writes

    def changed_since_plan(self, plan: Plan, drifted: set[str], failures: list[Failure]) -> bool:
        for memory_id, base in plan.base_hashes.items():
            path = self.memory.path_for(memory_id)
            if str(path) in drifted:
                failures.append(
                    Failure(
                        "write",
                        "hand_edited",
                        f"{path} was edited outside the write API; the cycle will not write over it",
                        plan.candidate.id,
                    )
                )
                return True
            try:
                current = self.memory.get(memory_id).computed_hash
            except LCAError as exc:
                failures.append(Failure("write", "changed", str(exc), plan.candidate.id))
                return True
            if current != base:
                failures.append(
                    Failure(
                        "write",
                        "changed",
                        f"memory '{memory_id}' changed during the cycle; not written (run the cycle again)",
                        plan.candidate.id,
                    )
                )
                return True
        return False

    def archive(self, memory: MemoryFile) -> None:
        target = archived_version(self.layout, memory.record.id, memory.computed_hash)
        if not target.exists():
            atomic_write_bytes(target, memory.path.read_bytes())

    def write_plan(self, plan: Plan, drifted: set[str], failures: list[Failure], cycle_id: str) -> list[Write]:
        store = self.memory
        cand = plan.candidate
        record = plan.record
        assert record is not None
        if self.changed_since_plan(plan, drifted, failures):
            return []
        procedural = record.type.value in PROCEDURAL_TYPES or (
            plan.supersede is not None and plan.supersede.record.type.value in PROCEDURAL_TYPES
        )
        if procedural and not self.approved:
            return [self.hold(plan, cycle_id, "procedural write: needs a named approver (lca approve)")]
        existing = plan.base_hashes.keys()
        for memory_id in existing:
            self.archive(store.get(memory_id))
        written: list[MemoryFile] = []
        try:
            new = store.write(record, plan.body, approver=self.approver if procedural else None)
            written.append(new)
            out = [
                Write(
                    new.record.id,
                    "updated" if new.record.id in existing else "created",
                    cand.id,
                    new.computed_hash,
                    plan.verdict.reason,
                )
            ]
            if plan.supersede is not None:
                old = store.get(plan.supersede.record.id)
                marked = old.record.model_copy(
                    update={
                        "superseded_by": Supersession(id=new.record.id, reason=plan.verdict.reason),
                        "valid_to": old.record.valid_to or self.now,
                    }
                )
                done = store.write(marked, old.body, approver=self.approver if procedural else None)
                written.append(done)
                out.append(
                    Write(done.record.id, "superseded", cand.id, done.computed_hash, f"superseded by {new.record.id}")
                )
        except (ApprovalRequired, LCAError, OSError) as exc:
            self.roll_back(written, plan)
            failures.append(Failure("write", "error", f"{exc}; rolled back", cand.id))
            return []
        for w, memory in zip(out, written, strict=True):
            self.ledger.append(
                "memory_written",
                memory.record.id,
                {
                    "action": w.action,
                    "content_hash": memory.computed_hash,
                    "cycle": cycle_id,
                    "candidate": cand.id,
                    "file": render_memory(memory.record, memory.body),
                },
            )
        if plan.supersede is not None:
            self.ledger.append(
                "memory_superseded", plan.supersede.record.id, {"by": new.record.id, "reason": plan.verdict.reason}
            )
        self.ledger.append(
            "hypothesis_promoted",
            cand.id,
            {"memory_id": new.record.id, "cycle": cycle_id, "verdict": plan.verdict.verdict},
        )
        return out

    def roll_back(self, written: list[MemoryFile], plan: Plan) -> None:
        """Undo a half-applied plan: restore archived versions, delete what was created."""
        for memory in written:
            base = plan.base_hashes.get(memory.record.id)
            if base is None:
                memory.path.unlink(missing_ok=True)
            else:
                shutil.copyfile(archived_version(self.layout, memory.record.id, base), memory.path)

    def mark_conflict(self, plan: Plan, drifted: set[str], failures: list[Failure], cycle_id: str) -> list[Write]:
        target = plan.conflict_on
        assert target is not None
        plan.base_hashes[target.record.id] = target.computed_hash
        if self.changed_since_plan(plan, drifted, failures):
            return []
        reason = (
            f"contradicted by {', '.join(f'{s}#{e}' for s, e in plan.candidate.sources)}: "
            f"'{plan.candidate.claim[:160]}'"
        )
        record = target.record.model_copy(
            update={"conflicts": target.record.conflicts + (Conflict(id=plan.candidate.id, reason=reason),)}
        )
        procedural = record.type.value in PROCEDURAL_TYPES
        if procedural and not self.approved:
            return [
                self.hold(
                    plan,
                    cycle_id,
                    f"marking a conflict on procedural memory {target.record.id}",
                    record=record,
                    body=target.body,
                    promotes=False,
                )
            ]
        self.archive(target)
        done = self.memory.write(record, target.body, approver=self.approver if procedural else None)
        self.ledger.append(
            "memory_written",
            done.record.id,
            {
                "action": "conflict_marked",
                "content_hash": done.computed_hash,
                "cycle": cycle_id,
                "candidate": plan.candidate.id,
                "file": render_memory(done.record, done.body),
            },
        )
        return [Write(done.record.id, "conflict_marked", plan.candidate.id, done.computed_hash, reason)]

    def hold(
        self,
        plan: Plan,
        cycle_id: str,
        why: str,
        *,
        record: MemoryRecord | None = None,
        body: str | None = None,
        promotes: bool = True,
    ) -> Write:
        """A proposal waiting for a named approver: on disk and in the ledger, never in memory/."""
        record = record or plan.record
        body = plan.body if body is None else body
        assert record is not None
        proposal_id = f"proposal-{plan.candidate.id[-8:]}-{uuid.uuid4().hex[:6]}"
        payload = {
            "id": proposal_id,
            "why": why,
            "cycle": cycle_id,
            "candidate": plan.candidate.id,
            "record": record.model_dump(mode="json", exclude_none=True),
            "body": body,
            "supersede": plan.supersede.record.id if plan.supersede else None,
            "verdict": plan.verdict.reason,
            "base_hashes": plan.base_hashes,
            "promotes": promotes,
        }
        path = self.layout.proposal(proposal_id)
        atomic_write_bytes(path, json.dumps(derived_tree(payload), indent=2, sort_keys=True).encode())
        self.ledger.append(
            "proposal_held", proposal_id, {"path": str(path), "memory_id": record.id, "why": why, "cycle": cycle_id}
        )
        if promotes:
            self.ledger.append("hypothesis_held", plan.candidate.id, {"proposal": proposal_id, "cycle": cycle_id})
        return Write(record.id, "held", plan.candidate.id, None, f"{why}: {proposal_id}")
