"""lca.consolidation.approvals: held procedural writes wait for a named approver and never apply stale."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lca.consolidation import Candidate, Plan, Verdict, approve_proposal, pending_proposals
from lca.consolidation.writing import PlanWriter
from lca.errors import ApprovalRequired, LCAError
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        yield s


def rule(memory_id: str = "deploy-rule") -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        type=MemoryType.PROCEDURE,
        created=datetime(2026, 1, 1),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
    )


def hold_update(store, body: str) -> str:
    """Hold an update of 'deploy-rule' as a proposal, based on the memory's current version."""
    base = store.memory.get("deploy-rule")
    candidate = Candidate("h-deploy", "rule", body, (("s1", "s1:1"),), (1,), 1)
    verdict = Verdict("h-deploy", "accept", True, 1.0, None, "", True, "supported by its source lines")
    plan = Plan(candidate, verdict, rule(), body, base_hashes={"deploy-rule": base.computed_hash})
    writer = PlanWriter(store.layout, store.memory, store.ledger, approver=None, now=datetime.now(UTC))
    held = writer.hold(plan, "cycle-test", "procedural write: needs a named approver", promotes=False)
    assert held.action == "held" and store.memory.get("deploy-rule").body.strip() == base.body.strip()
    return held.detail.rsplit(": ", 1)[1]


def test_a_held_update_applies_with_a_named_approver(store):
    store.memory.write(rule(), "Deploy through staging.", approver="dana")
    proposal = hold_update(store, "Deploy through staging, then canary.")
    assert [p["id"] for p in pending_proposals(store)] == [proposal]
    assert store.layout.proposal(proposal).exists()
    with pytest.raises(ApprovalRequired):
        approve_proposal(store, proposal, approver=" ")
    (write,) = approve_proposal(store, proposal, approver="lee")
    assert write.action == "approved" and store.memory.get("deploy-rule").record.approved_by == "lee"
    assert pending_proposals(store) == [] and store.layout.proposal(proposal).with_suffix(".approved").exists()
    assert store.search("canary", k=1)[0].pointer.memory_id == "deploy-rule"  # indexed after approval


def test_a_proposal_whose_memory_changed_since_is_refused_and_stays_pending(store):
    store.memory.write(rule(), "Deploy through staging.", approver="dana")
    proposal = hold_update(store, "Deploy through staging, then canary.")
    store.memory.write(rule(), "Deploy on Fridays only.", approver="lee")
    with pytest.raises(LCAError, match="changed since it was proposed"):
        approve_proposal(store, proposal, approver="dana")
    assert store.memory.get("deploy-rule").body.strip() == "Deploy on Fridays only."
    assert [p["id"] for p in pending_proposals(store)] == [proposal]


def test_an_unknown_proposal_names_the_pending_ones(store):
    with pytest.raises(LCAError, match=r"no proposal 'nope' \(none pending\)"):
        approve_proposal(store, "nope", approver="dana")
    store.memory.write(rule(), "Deploy through staging.", approver="dana")
    proposal = hold_update(store, "Deploy through staging, then canary.")
    with pytest.raises(LCAError, match=proposal):
        approve_proposal(store, "nope", approver="dana")
