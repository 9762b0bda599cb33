"""Recall's policy terms end to end: role authority and unresolved conflicts in K, the exact-wording override of A.

Each test builds a store through the one write API and compares candidates that differ only in the property
under test, so any difference in score or rank comes from that property's term alone.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from lca.memory import Authority, Conflict, MemoryRecord, MemoryType, Privacy
from lca.recall import RecallConfig, RecallContext, RecallResult, ScoredCandidate, risk_term
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

LOW_FLOOR = RecallConfig(floor=0.05)
AS_OF = datetime(2026, 1, 8)  # a week after every item below was written: T is the same for all of them
RULE = "rotate the staging deploy key every friday"
QUERY = "when do we rotate the staging deploy key"
FILLER = ["lunch was pasta and salad today", "the garden needs watering twice a week"]
OUTSIDE_ROLE = "outside the role's authority"
CONFLICT = "unresolved conflict"


def memory(id_: str, **kw) -> MemoryRecord:
    return MemoryRecord(
        id=id_,
        type=MemoryType.FACT,
        created=datetime(2026, 1, 1),
        authority=kw.pop("authority", Authority.APPROVED),
        privacy=Privacy.PUBLIC,
        **kw,
    )


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=LOW_FLOOR) as s:
        s.append([make_entry("chat", n, text, timestamp="2026-01-01T00:00:00") for n, text in enumerate(FILLER, 1)])
        yield s


def by_id(result: RecallResult) -> dict[str, ScoredCandidate]:
    """Candidates by memory id or transcript entry, without the chunk span."""
    return {c.source.split("[", 1)[0].removeprefix("memory:"): c for c in result.candidates}


def rank(result: RecallResult, key: str) -> int:
    return [c.source.split("[", 1)[0].removeprefix("memory:") for c in result.candidates].index(key)


# ---- role authority: a memory whose roles exclude the active role --------------------------------------------
@pytest.fixture
def roles_store(store):
    store.memory.write(memory("ops-only", roles=("Ops",)), RULE)  # the same text: the same S, T, E, A and Q
    store.memory.write(memory("every-role"), RULE)
    store.ingest()
    return store


def test_a_memory_outside_the_active_role_is_penalized_and_ranks_below_its_equal(roles_store):
    result = roles_store.recall(RecallContext(QUERY, role="reviewer", as_of=AS_OF))
    outside, shared = by_id(result)["ops-only"], by_id(result)["every-role"]
    assert outside.terms["risk"] == 0.5 and outside.risk_reasons == (OUTSIDE_ROLE,)
    assert shared.terms["risk"] == 0.0 and shared.risk_reasons == ()
    assert {k: v for k, v in outside.terms.items() if k != "risk"} == {
        k: v for k, v in shared.terms.items() if k != "risk"
    }
    assert shared.score - outside.score == pytest.approx(LOW_FLOOR.weights.risk * 0.5)
    assert rank(result, "every-role") < rank(result, "ops-only")
    # penalized, not filtered: with room in the budget it is still offered, after its equal
    assert outside.why_not is None and outside.injected


@pytest.mark.parametrize("role", ["ops", "OPS", None])
def test_a_memory_is_not_penalized_for_its_own_role_or_when_no_role_is_given(roles_store, role):
    result = roles_store.recall(RecallContext(QUERY, role=role, as_of=AS_OF))
    inside, shared = by_id(result)["ops-only"], by_id(result)["every-role"]
    assert inside.terms["risk"] == 0.0 and OUTSIDE_ROLE not in inside.risk_reasons
    assert inside.score == pytest.approx(shared.score)


# ---- exact wording: the verbatim transcript's authority ----------------------------------------------------------
def test_asking_for_exact_wording_lifts_the_transcripts_authority_over_a_derived_memory(store):
    store.memory.write(memory("rule", authority=Authority.REVIEWED), RULE)  # A = 0.8
    store.append([make_entry("s", 1, RULE, timestamp="2026-01-01T00:00:00")])  # the turn it was derived from
    store.ingest()
    turn = "transcript:s#s:1"
    plain = store.recall(RecallContext(QUERY, as_of=AS_OF))
    assert by_id(plain)[turn].terms["authority"] == 0.5 and by_id(plain)["rule"].terms["authority"] == 0.8
    assert rank(plain, "rule") < rank(plain, turn)  # the reviewed memory leads on authority alone

    exact = store.recall(RecallContext(QUERY, as_of=AS_OF, exact_wording=True))
    assert all(c.terms["authority"] == 1.0 for c in exact.candidates if c.source_type == "transcript")
    assert by_id(exact)["rule"].terms["authority"] == 0.4  # a derived source keeps half its row
    assert by_id(exact)[turn].score > by_id(exact)["rule"].score
    assert rank(exact, turn) == 0 < rank(exact, "rule")
    assert [c.source.split("[", 1)[0] for c in exact.items][0] == turn


def test_exact_wording_puts_the_transcript_above_an_approved_memory_too(store):
    store.memory.write(memory("rule", authority=Authority.APPROVED), RULE)
    store.append([make_entry("s", 1, RULE, timestamp="2026-01-01T00:00:00")])
    store.ingest()
    exact = store.recall(RecallContext(QUERY, as_of=AS_OF, exact_wording=True))
    assert by_id(exact)["transcript:s#s:1"].score > by_id(exact)["rule"].score


# ---- unresolved conflicts the verifier marked ----------------------------------------------------------------------
def test_an_unresolved_conflict_is_penalized_not_filtered(store):
    marked = (Conflict(id="settled", reason="the runbook says monday"),)
    store.memory.write(memory("disputed", conflicts=marked), RULE)
    store.memory.write(memory("settled"), RULE)
    store.memory.write(memory("disputed-ops", conflicts=marked, roles=("ops",)), RULE)
    store.ingest()
    result = store.recall(RecallContext(QUERY, as_of=AS_OF))
    disputed, settled = by_id(result)["disputed"], by_id(result)["settled"]
    assert disputed.terms["risk"] == 0.5 and disputed.risk_reasons == (CONFLICT,)
    assert settled.terms["risk"] == 0.0 and settled.risk_reasons == ()
    assert settled.score - disputed.score == pytest.approx(LOW_FLOOR.weights.risk * 0.5)
    assert rank(result, "settled") < rank(result, "disputed")
    assert disputed.why_not is None and disputed.injected
    # the two soft risks together stay at K = 0.5 and name both reasons
    both = by_id(store.recall(RecallContext(QUERY, role="reviewer", as_of=AS_OF)))["disputed-ops"]
    assert both.terms["risk"] == 0.5 and both.risk_reasons == (CONFLICT, OUTSIDE_ROLE)


def test_a_hard_risk_on_top_of_a_conflict_makes_k_maximal():
    soft = dict(private_in_public=False, secret=False, superseded=False, expired=False, about_history=False)
    assert risk_term(**soft, conflict=True) == (0.5, [CONFLICT])
    assert risk_term(**{**soft, "secret": True}, conflict=True, outside_role=True) == (
        1.0,
        ["secret or credential", CONFLICT, OUTSIDE_ROLE],
    )
