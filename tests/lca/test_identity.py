"""Layer 0: identity, user and instruction files change only through a named approver."""

from __future__ import annotations

import pytest

from lca.consolidation import approve_proposal, pending_proposals
from lca.context import ContextWindow, LiveContextManager
from lca.errors import ApprovalRequired, LCAError
from lca.identity import IdentityStore
from lca.ledger import Ledger
from lca.recall import RecallConfig
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        yield s


def test_identity_writes_need_an_approver_and_are_archived_and_logged(home):
    ids = IdentityStore(home.home)
    for nobody in (None, "", "  "):
        with pytest.raises(ApprovalRequired):
            ids.write("identity", "I am Atlas, the release assistant.", approver=nobody)
    assert not ids.path_for("identity").exists()
    with pytest.raises(LCAError, match="unknown identity file"):
        ids.write("soul", "x", approver="dana")
    ids.write("identity", "I am Atlas, the release assistant.", approver="dana")
    ids.write("identity", "I am Atlas, the release and incident assistant.", approver="lee")
    archived = list(home.layout.identity_archive("identity").iterdir())
    assert [p.read_text() for p in archived] == ["I am Atlas, the release assistant."]
    assert Ledger(home.home).state().identity["identity"]["approver"] == "lee"
    assert home.health().check("identity_files").status.value == "ok"


def test_an_edit_around_the_gate_shows_in_health(home):
    ids = IdentityStore(home.home)
    ids.write("user", "The user is Dana, an SRE.", approver="dana")
    ids.path_for("user").write_text("The user is Dana, an SRE, who is always right.")
    check = home.health().check("identity_files")
    assert check.status.value == "warn" and "user.md" in check.detail


def test_held_identity_change_is_applied_by_approval_and_loaded_as_standing_identity(home):
    ids = IdentityStore(home.home)
    proposal = ids.propose("instructions", "Answer in French.", why="the user asked for it")
    assert ids.read("instructions") == ""
    assert [p["id"] for p in pending_proposals(home)] == [proposal]
    approve_proposal(home, proposal, approver="dana")
    assert ids.read("instructions") == "Answer in French." and pending_proposals(home) == []
    manager = LiveContextManager(home, ContextWindow(total_tokens=2000), session_id="s", agent_id="a")
    ws = manager.build("hello")
    assert "<instructions>\nAnswer in French.\n</instructions>" in ws.messages[0]["content"]
