"""The adversarial review: each lens's graded verdict on evidence built by hand, the declared combination rules, the
review step of the integration cycle (recorded per lens in the ledger; refuted means dormant, never deleted), a
lens of one's own behind the protocol, and the recovery-rate gauge read off the ledger."""

from __future__ import annotations

from datetime import datetime

import pytest

from lca.errors import RecordFormatError
from lca.insight import (
    EvidenceIndependenceLens,
    IntegrationConfig,
    LensVerdict,
    MemberEvidence,
    ReviewConfig,
    ReviewEvidence,
    StructuralSoundnessLens,
    SummarizerSigner,
    VocabularyCoincidenceLens,
    integrate,
    recovery_gauge,
    refute,
    review,
    review_queue,
    review_store,
)
from lca.insight.signatures import signature_from_json
from lca.ledger import Ledger
from lca.memory import Authority, MemoryRecord, MemoryStore, MemoryType, Privacy, TranscriptSpan
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import BORROWED, CORPUS, ECOLOGY, PLANTED, SKELETONS, fake_signer_generator

WOLVES = ECOLOGY[0]


def member(row, *, sessions=(), skeleton=None) -> MemberEvidence:
    rid, domain, text, own = row
    return MemberEvidence(rid, domain, text, signature_from_json(SKELETONS[skeleton or own]), tuple(sessions))


def evidence(*members: MemberEvidence) -> ReviewEvidence:
    return ReviewEvidence("hyp-test", "a claim", tuple(members))


def test_structural_soundness_supports_one_skeleton_and_refutes_two_naming_what_differs():
    same = StructuralSoundnessLens().review(evidence(member(WOLVES), member(PLANTED)))
    assert (same.verdict, same.score) == ("supports", 1.0) and "one skeleton" in same.reason
    other = StructuralSoundnessLens().review(evidence(member(WOLVES), member(PLANTED, skeleton="reservoir")))
    assert other.verdict == "refutes" and other.score < 0.3
    assert "variables 0.00" in other.reason and "feedback signs 0.00" in other.reason
    unsigned = MemberEvidence(PLANTED[0], PLANTED[1], PLANTED[2], None, ())
    assert StructuralSoundnessLens().review(evidence(member(WOLVES), unsigned)).verdict == "weak"


def test_evidence_independence_refutes_one_source_restated_and_supports_independent_ones():
    lens = EvidenceIndependenceLens()
    restated = lens.review(evidence(member(WOLVES, sessions=["s1"]), member(PLANTED, sessions=["s1", "s2"])))
    assert (restated.verdict, restated.score) == ("refutes", 0.0) and "one source behind" in restated.reason
    apart = lens.review(evidence(member(WOLVES, sessions=["s1"]), member(PLANTED, sessions=["s2"])))
    assert (apart.verdict, apart.score) == ("supports", 1.0)
    unknown = lens.review(evidence(member(WOLVES), member(PLANTED)))
    assert (unknown.verdict, unknown.score) == ("weak", 0.5) and "cite no transcript source" in unknown.reason
    # two of three restate one session (joined through a shared one): half independent
    third = ("fin-x", "finance", "text", "oscillator")
    partial = lens.review(
        evidence(member(WOLVES, sessions=["s1"]), member(PLANTED, sessions=["s1"]), member(third, sessions=["s3"]))
    )
    assert (partial.verdict, partial.score) == ("weak", 0.5)


def test_vocabulary_coincidence_refutes_a_match_carried_by_shared_words():
    lens = VocabularyCoincidenceLens()
    borrowed = lens.review(evidence(member(WOLVES), member(BORROWED)))
    assert borrowed.verdict == "refutes" and "deer" in borrowed.reason and "valley" in borrowed.reason
    planted = lens.review(evidence(member(WOLVES), member(PLANTED)))
    assert (planted.verdict, planted.score) == ("supports", 1.0)
    with pytest.raises(RecordFormatError) as caught:
        VocabularyCoincidenceLens(refute_overlap=0.0)
    assert caught.value.field == "refute_overlap"


def test_the_declared_rules_combine_the_verdicts():
    both = evidence(member(WOLVES, sessions=["s1"]), member(PLANTED, sessions=["s2"]))
    lenses = (StructuralSoundnessLens(), EvidenceIndependenceLens(), VocabularyCoincidenceLens())
    assert review(both, lenses).outcome == "survived"
    unknown = evidence(member(WOLVES), member(PLANTED))
    contested = review(unknown, lenses)
    assert (contested.outcome, contested.score) == ("contested", 0.5)  # the veto's score is the lowest
    worded = evidence(member(WOLVES, sessions=["s1"]), member(BORROWED, sessions=["s2"], skeleton="oscillator"))
    assert review(worded, lenses, "veto").outcome == "refuted"  # one lens refutes
    assert review(worded, lenses, "mean").outcome == "survived"  # (1 + 1 + 0) / 3: no single lens decides
    with pytest.raises(RecordFormatError) as caught:
        ReviewConfig(rule="majority")
    assert caught.value.field == "rule"
    with pytest.raises(RecordFormatError) as caught:
        ReviewConfig(lenses=("structural-soundness", "gut-feeling"))
    assert caught.value.field == "lenses"


# ---- the review step of the cycle -------------------------------------------------------------------------------
def write_cited(home, rows, sessions):
    """The corpus's records, each citing the transcript session ``sessions`` names for it (its own by default)."""
    store = MemoryStore(home)
    for rid, domain, text, _ in rows:
        store.write(
            MemoryRecord(
                id=rid,
                type=MemoryType.LESSON,
                projects=(domain,),
                created=datetime(2026, 1, 1),
                authority=Authority.REVIEWED,
                privacy=Privacy.PRIVATE,
                sources=(TranscriptSpan(session=sessions.get(rid, f"s-{rid}"), entries=("e1",)),),
            ),
            text + "\n",
        )


def run(home, rows=CORPUS, config=None):
    embedder = FakeHashingEmbedder(dimension=512, max_input_tokens=512)
    return integrate(home, SummarizerSigner(fake_signer_generator(rows)), embedder, config)


def reviews(home, hypothesis):
    return [e for e in Ledger(home).state().hypotheses[hypothesis].history if e["kind"] == "hypothesis_reviewed"]


def test_the_cycle_reviews_what_it_surfaced_once_per_membership_and_records_every_lens(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    result = run(tmp_path)
    (outcome,) = result.reviews
    assert outcome.outcome == "survived" and outcome.members == ("eco-wolves", "kit-sourdough")
    (event,) = reviews(tmp_path, outcome.hypothesis)
    assert event["cycle"] == result.cycle_id and event["rule"] == "veto" and event["outcome"] == "survived"
    assert [v["lens"] for v in event["verdicts"]] == [
        "structural-soundness",
        "evidence-independence",
        "vocabulary-coincidence",
    ]
    assert all(v["verdict"] == "supports" and v["reason"] for v in event["verdicts"])
    (item,) = review_queue(tmp_path)
    assert item.review is not None and item.review["outcome"] == "survived"
    assert len(item.trajectory) == 1  # the review's score is not a cycle's
    # seen again on the same records: not reviewed again
    assert run(tmp_path).reviews == () and len(reviews(tmp_path, outcome.hypothesis)) == 1
    # without lenses, no review (the ablation)
    assert run(tmp_path, config=IntegrationConfig(review=ReviewConfig(lenses=()))).reviews == ()


def test_a_candidate_the_review_refutes_goes_dormant_and_stays_in_the_ledger(tmp_path):
    write_cited(tmp_path, CORPUS, {"eco-wolves": "one-session", "kit-sourdough": "one-session"})
    (outcome,) = run(tmp_path).reviews
    assert outcome.outcome == "refuted"
    h = Ledger(tmp_path).state().hypotheses[outcome.hypothesis]
    assert h.status == "dormant" and review_queue(tmp_path) == []
    assert h.refutations[-1]["reason"].startswith("evidence-independence refutes: 1 independent source group")
    assert h.history[-1]["by"] == "review:veto"
    # kept, not reviewed, and recorded without refuting when the config says a person decides
    tmp = tmp_path / "kept"
    write_cited(tmp, CORPUS, {"eco-wolves": "one-session", "kit-sourdough": "one-session"})
    (kept,) = run(tmp, config=IntegrationConfig(review=ReviewConfig(refuted_goes_dormant=False))).reviews
    assert kept.outcome == "refuted" and Ledger(tmp).state().hypotheses[kept.hypothesis].status == "proposed"


class DoubtingLens:
    """A lens of one's own behind the protocol: what a model-based lens would be, scripted."""

    name = "doubt"

    def review(self, evidence: ReviewEvidence) -> LensVerdict:
        return LensVerdict(self.name, "weak", 0.4, f"doubts {len(evidence.members)} records; {evidence.questions}")


def test_review_on_demand_with_a_lens_of_ones_own(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (first,) = run(tmp_path).reviews
    assert review_store(tmp_path, ReviewConfig()) == ()  # nothing due
    (again,) = review_store(tmp_path, ReviewConfig(), first.hypothesis, lenses=[DoubtingLens()])
    assert again.outcome == "contested" and again.verdicts[0].reason.startswith("doubts 2 records")
    assert reviews(tmp_path, first.hypothesis)[-1]["verdicts"][0]["lens"] == "doubt"


def test_the_recovery_rate_counts_refuted_entries_that_resurfaced_on_new_evidence_and_were_confirmed(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (outcome,) = run(tmp_path).reviews
    assert recovery_gauge(Ledger(tmp_path).state()).rate is None  # nothing refuted yet
    refute(tmp_path, outcome.hypothesis, reason="both just run out of supply", by="dana")
    gauge = recovery_gauge(Ledger(tmp_path).state())
    assert (gauge.refuted, gauge.resurfaced, gauge.confirmed, gauge.rate) == (1, 0, 0, 0.0)
    newcomer = (
        "fin-boom",
        "finance",
        "Speculators pile into tulip futures; futures prices climb, speculators exhaust cash, prices slump.",
        "oscillator",
    )
    write_cited(tmp_path, [newcomer], {})
    result = run(tmp_path, rows=[*CORPUS, newcomer])
    assert [r.action for r in result.reconciliations] == ["resurfaced"]
    (again,) = result.reviews
    assert again.outcome == "survived" and "fin-boom" in again.members
    assert result.recovery is not None and result.recovery.recovered == (outcome.hypothesis,)
    assert result.recovery.rate == 1.0 and result.to_dict()["recovery"]["rate"] == 1.0
    # a worldview before the resurfacing has its own gauge
    before = Ledger(tmp_path).state(as_of=result.started - 1e-3)
    assert recovery_gauge(before).confirmed == 0
