"""The gate from candidate to trial: an insight's differential against its cycle's null threshold, its last review's
outcome and its trajectory across cycles, each read off the ledger; and a real cycle whose insight passes only once
a second cycle has seen it."""

from __future__ import annotations

import pytest

from lca.errors import ApprovalRequired, LCAError, RecordFormatError
from lca.insight.schemas import measure_trial, propose_schema, start_trial
from lca.insight.trial_gate import TrialGateConfig, trial_gates
from lca.ledger import EvidenceRequired, Hypothesis, Ledger
from tests.lca.insight.corpus import CORPUS
from tests.lca.insight.test_review import write_cited
from tests.lca.insight.test_schema_gates import cycle


def insight(*events: dict, status: str = "proposed") -> Hypothesis:
    """An insight entry whose history is ``events`` (sightings carry a score, reviews an outcome)."""
    return Hypothesis("hyp-1", "a rhyme", "insight", frozenset({"record:a", "record:b"}), status, [], list(events))


def seen(cycle: str, score: float, threshold: float | None = 4.0) -> dict:
    kind = "hypothesis_proposed" if cycle == "c1" else "hypothesis_observed"
    return {"kind": kind, "at": 1.0, "cycle": cycle, "score": score, **({"threshold": threshold} if threshold else {})}


def reviewed(outcome: str) -> dict:
    return {"kind": "hypothesis_reviewed", "at": 2.0, "cycle": "c1", "outcome": outcome, "rule": "veto"}


def failed(h: Hypothesis, config: TrialGateConfig | None = None) -> list[str]:
    return [line.split(":")[0] for line in trial_gates("s", h, config).failed]


def test_an_insight_seen_twice_above_its_threshold_that_survived_review_passes():
    report = trial_gates("s", insight(seen("c1", 5.0), reviewed("survived"), seen("c2", 4.8)))
    assert report.passed and report.failed == ()
    counts = {g.gate: g.counts for g in report.gates}
    assert counts["differential"]["margin"] == pytest.approx(0.8) and counts["trajectory"]["cycles"] == 2
    assert report.to_dict()["kind"] == "trial" and [g["gate"] for g in report.to_dict()["gates"]] == [
        "differential",
        "review_survival",
        "trajectory",
    ]


def test_each_gate_fails_on_its_own_reading():
    assert failed(insight(seen("c1", 5.0), reviewed("survived"))) == ["trajectory"]  # one cycle may be an accident
    fading = insight(seen("c1", 6.0), reviewed("survived"), seen("c2", 4.5))
    assert failed(fading) == ["trajectory"]  # 0.75 of its best
    assert failed(fading, TrialGateConfig(min_retained=0.7)) == []
    below = insight(seen("c1", 5.0), reviewed("survived"), seen("c2", 3.9))
    assert "differential" in failed(below)  # its last score under its cycle's threshold
    assert failed(insight(seen("c1", 5.0), reviewed("survived"), seen("c2", 4.8)), TrialGateConfig(min_margin=1.0)) == [
        "differential"
    ]
    unrecorded = trial_gates("s", insight(seen("c1", 5.0), reviewed("survived"), seen("c2", 5.0, threshold=None)))
    assert "no null threshold" in unrecorded.failed[0]
    assert failed(insight(seen("c1", 5.0), reviewed("contested"), seen("c2", 5.0))) == ["review_survival"]
    assert failed(insight(seen("c1", 5.0), seen("c2", 5.0))) == ["review_survival"]  # never reviewed
    dormant = insight(seen("c1", 5.0), reviewed("survived"), seen("c2", 5.0), status="dormant")
    assert failed(dormant) == ["review_survival"]


def test_the_trial_gate_config_is_checked():
    with pytest.raises(RecordFormatError) as caught:
        TrialGateConfig(min_cycles=0)
    assert caught.value.field == "min_cycles"
    with pytest.raises(RecordFormatError) as caught:
        TrialGateConfig(min_retained=1.5)
    assert caught.value.field == "min_retained"
    with pytest.raises(RecordFormatError, match="unknown trial gate setting"):
        TrialGateConfig.from_mapping({"min_lift": 2})


def test_a_schema_from_a_surfaced_insight_goes_on_trial_once_a_second_cycle_sees_it(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (rec,) = cycle(tmp_path, CORPUS).reconciliations
    propose_schema(tmp_path, "boom-bust", "a population feeds on a stock it drains", insight=rec.hypothesis)
    first = measure_trial(tmp_path, "boom-bust")
    assert first.failed == ("trajectory: surfaced in 1 cycle(s), 2 needed",)  # differential and review pass
    with pytest.raises(EvidenceRequired, match="stays a candidate: trial gates failed: trajectory"):
        start_trial(tmp_path, "boom-bust")
    assert Ledger(tmp_path).state().schemas["boom-bust"].state == "candidate"
    cycle(tmp_path, CORPUS)  # seen again, with the cycle's threshold beside its score
    schema, report = start_trial(tmp_path, "boom-bust")
    assert schema.state == "trial" and report is not None and report.passed
    recorded = schema.history[-1]["evidence"]
    assert recorded["kind"] == "trial" and recorded["insight"] == rec.hypothesis and recorded["passed"]
    margin = next(g for g in recorded["gates"] if g["gate"] == "differential")["counts"]["margin"]
    assert margin > 0


def test_a_schema_from_named_records_needs_a_person_to_go_on_trial(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    cycle(tmp_path, CORPUS)
    propose_schema(tmp_path, "s", "a stock and its flow", records=["eco-wolves", "kit-sourdough"])
    with pytest.raises(LCAError, match="proposed from no insight"):
        measure_trial(tmp_path, "s")
    with pytest.raises(ApprovalRequired, match="needs a named approver"):
        start_trial(tmp_path, "s")
    schema, report = start_trial(tmp_path, "s", approver="dana")
    assert schema.state == "trial" and report is None


def test_the_shell_shows_a_candidates_trial_gates_and_takes_their_thresholds(tmp_path, monkeypatch, capsys):
    import protocols.cli as cli
    import protocols.cli.common as cli_common
    from lca.substrate import Substrate
    from tests.fakes import FakeHashingEmbedder

    write_cited(tmp_path, CORPUS, {})
    (rec,) = cycle(tmp_path, CORPUS).reconciliations
    propose_schema(tmp_path, "boom-bust", "a population feeds on a stock it drains", insight=rec.hypothesis)
    monkeypatch.setattr(
        cli_common, "open_store", lambda args, progress=False: Substrate(tmp_path, embedder=FakeHashingEmbedder())
    )
    assert cli.main(["schema", "evidence", "boom-bust"]) == 0
    shown = capsys.readouterr().out
    assert "(candidate -> trial): not yet" in shown and "trajectory: FAIL: surfaced in 1 cycle(s)" in shown
    assert cli.main(["schema", "trial", "boom-bust"]) == 2
    assert "trial gates failed: trajectory" in capsys.readouterr().err
    assert cli.main(["schema", "trial", "boom-bust", "--gate", "min_cycles=1"]) == 0  # a declared threshold
    assert "boom-bust: trial" in capsys.readouterr().out
