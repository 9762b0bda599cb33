"""The learned-state ledger: transitions checked against the replay, past worldviews, nothing deleted."""

from __future__ import annotations

import pytest

from lca.errors import ApprovalRequired, RecordFormatError
from lca.ledger import (
    EvidenceRequired,
    Ledger,
    TransitionRefused,
    diff_states,
    hypothesis_id,
    key_terms,
    membership_overlap,
)


class Evidence:
    """A schema's measured evidence as the state machine reads it (lca.insight.schema_gates measures the real one)."""

    def __init__(self, *failed: str) -> None:
        self.failed = failed
        self.passed = not failed

    def to_dict(self):
        return {"passed": self.passed, "failed": list(self.failed)}


def test_the_schema_lifecycle_refuses_what_the_replayed_state_does_not_allow(tmp_path):
    ledger = Ledger(tmp_path)
    with pytest.raises(TransitionRefused, match="schema 'triage' is absent: schema_trial is not allowed"):
        ledger.schema_event("schema_trial", "triage")
    with pytest.raises(RecordFormatError, match="needs a description"):
        ledger.schema_event("schema_proposed", "triage", description="  ")
    assert ledger.schema_event("schema_proposed", "triage", description="symptom -> cause").state == "candidate"
    with pytest.raises(TransitionRefused, match="allowed: schema_deprecated, schema_revised, schema_trial"):
        ledger.schema_event("schema_established", "triage", approver="ana")
    # proposed from no insight, nothing measured gates it: a named person puts it on trial
    with pytest.raises(ApprovalRequired, match="candidate -> trial needs a named approver"):
        ledger.schema_event("schema_trial", "triage")
    assert ledger.state().schemas["triage"].state == "candidate"
    ledger.schema_event("schema_trial", "triage", approver="ana")
    with pytest.raises(ApprovalRequired, match="needs a named approver"):
        ledger.schema_event("schema_established", "triage")
    with pytest.raises(EvidenceRequired, match="needs its measured evidence"):
        ledger.schema_event("schema_established", "triage", approver="ana")
    with pytest.raises(EvidenceRequired, match="evidence gates failed: compression: saves 0.02"):
        ledger.schema_event(
            "schema_established", "triage", approver="ana", evidence=Evidence("compression: saves 0.02")
        )
    assert ledger.state().schemas["triage"].state == "trial"
    established = ledger.schema_event("schema_established", "triage", approver="ana", evidence=Evidence())
    assert (established.state, established.approver) == ("established", "ana")
    assert established.history[-1]["evidence"] == {"passed": True, "failed": []}
    with pytest.raises(RecordFormatError, match="needs a reason"):
        ledger.schema_event("schema_deprecated", "triage")
    ledger.schema_event("schema_deprecated", "triage", reason="replaced")
    revised = ledger.schema_event("schema_revised", "triage", description="symptom -> cause -> fix")
    assert (revised.state, revised.version, revised.approver) == ("trial", 2, None)
    assert [s.id for s in ledger.state().active_schemas()] == ["triage"]


def test_a_schema_from_an_insight_goes_on_trial_only_with_its_trial_gates_passed(tmp_path):
    ledger = Ledger(tmp_path)
    details = {"members": ["a", "b"], "features": ["relation:feeds"], "insight": "hyp-1"}
    ledger.schema_event("schema_proposed", "rhyme", description="a stock feeds a flow", details=details)
    with pytest.raises(EvidenceRequired, match="needs its insight's trial gates"):
        ledger.schema_event("schema_trial", "rhyme", approver="ana")  # a person does not stand in for the gates
    with pytest.raises(EvidenceRequired, match="stays a candidate: trial gates failed: trajectory: 1 cycle"):
        ledger.schema_event("schema_trial", "rhyme", evidence=Evidence("trajectory: 1 cycle"))
    assert ledger.state().schemas["rhyme"].state == "candidate"
    moved = ledger.schema_event("schema_trial", "rhyme", evidence=Evidence())
    assert moved.state == "trial" and moved.history[-1]["evidence"] == {"passed": True, "failed": []}


def test_a_refuted_hypothesis_goes_dormant_and_resurfaces_with_new_evidence(tmp_path):
    ledger = Ledger(tmp_path)
    claim = "The nightly backup fails because the disk quota is full"
    hid = ledger.propose(claim, type="fact", sources=["s#s:1"], cycle="c1").subject
    assert hid == hypothesis_id("the NIGHTLY backup fails, because the disk quota is full")
    ledger.append("hypothesis_refuted", hid, {"reason": "quota was fine", "cycle": "c2"})
    state = ledger.state()
    assert state.hypotheses[hid].status == "dormant" and state.hypotheses[hid].once_refuted
    assert [h.id for h in ledger.dormant_neighbours(key_terms("nightly backup fails again: disk quota"))] == [hid]
    assert ledger.dormant_neighbours({"tea", "coffee"}) == []
    ledger.propose(claim, type="fact", sources=["s#s:9"], cycle="c3")
    ledger.append("hypothesis_promoted", hid, {"memory_id": "m-backup"})
    h = ledger.state().hypotheses[hid]
    assert h.status == "promoted" and h.memory_id == "m-backup"
    assert [e["kind"] for e in h.history] == [
        "hypothesis_proposed",
        "hypothesis_refuted",
        "hypothesis_proposed",
        "hypothesis_promoted",
    ]
    assert ledger.state().recovery_rate() == (1.0, 1, 1)


def test_a_past_worldview_is_the_replay_of_a_prefix(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append("memory_written", "m1", {"content_hash": "h1", "action": "created"}, at=100.0)
    ledger.append("memory_written", "m1", {"content_hash": "h2", "action": "updated"}, at=200.0)
    ledger.append("memory_written", "m2", {"content_hash": "h3", "action": "created"}, at=300.0)
    then, now = ledger.state(as_of=150.0), ledger.state()
    assert then.events == 1 and now.events == 3 and then.summary()["memories"] == 1
    assert diff_states(then, now)["memories"] == [
        {"id": "m1", "from": "h1", "to": "h2", "action": "updated"},
        {"id": "m2", "from": None, "to": "h3", "action": "created"},
    ]


def test_unknown_and_unreadable_events_are_refused(tmp_path):
    ledger = Ledger(tmp_path)
    with pytest.raises(RecordFormatError, match="unknown ledger event 'memory_forgotten'"):
        ledger.append("memory_forgotten", "m1")
    ledger.append("hypothesis_refuted", "hyp-nothing")  # appended, but no replay can place it
    with pytest.raises(RecordFormatError, match="unknown hypothesis hyp-nothing"):
        ledger.state()
    ledger.path.write_text('{"kind": "cycle_completed", "subject": "c1", "at": 1}\nnot json\n')
    with pytest.raises(RecordFormatError) as info:
        ledger.events()
    assert info.value.line == 2 and info.value.path == str(ledger.path)


def test_key_terms_drop_stopwords_and_fold_plurals():
    assert key_terms("The deploys are failing on the staging servers") == {"deploy", "failing", "staging", "server"}
    assert membership_overlap({"a", "b"}, {"b", "c", "d"}) == 0.5 and membership_overlap(set(), {"a"}) == 0.0
