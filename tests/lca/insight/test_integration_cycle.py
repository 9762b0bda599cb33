"""The integration cycle end to end on the planted corpus, with a scripted fake summarizer and a fake embedder: the
planted cross-domain rhyme beats the null model while a pure vocabulary match does not, and the ledger keeps one
entry per candidate across cycles (observed again, refuted to dormant, resurfaced on new independent evidence)."""

from __future__ import annotations

import json

import pytest

from lca.errors import RecordFormatError
from lca.insight import (
    DifferentialConfig,
    IntegrationConfig,
    SummarizerSigner,
    insight_detail,
    integrate,
    refute,
    review_queue,
)
from lca.layout import StoreLayout
from lca.ledger import Ledger
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import BORROWED, CORPUS, ECOLOGY, PLANTED, fake_signer_generator, write_memories

PLANTED_PAIR = ("eco-wolves", "kit-sourdough")
VOCABULARY_PAIRS = {tuple(sorted((BORROWED[0], eco[0]))) for eco in ECOLOGY}


def embedder() -> FakeHashingEmbedder:
    return FakeHashingEmbedder(dimension=512, max_input_tokens=512)


def run(home, config=None, rows=CORPUS, **kwargs):
    return integrate(home, SummarizerSigner(fake_signer_generator(rows)), embedder(), config, **kwargs)


@pytest.fixture
def home(tmp_path):
    write_memories(tmp_path, CORPUS)
    return tmp_path


def test_the_planted_rhyme_beats_the_null_and_the_vocabulary_match_does_not(home):
    result = run(home, IntegrationConfig(report_pairs=100))
    assert result.null is not None and result.null.threshold is not None
    threshold = result.null.threshold
    assert [c.members for c in result.candidates] == [PLANTED_PAIR]
    (candidate,) = result.candidates
    assert candidate.domains == ("ecology", "kitchen") and candidate.score > threshold
    scores = {(p.first, p.second): p for p in result.best_pairs}
    vocabulary = [scores[pair] for pair in VOCABULARY_PAIRS]
    assert all(p.score < threshold for p in vocabulary)
    # the vocabulary pairs are the content-alike ones: the baseline detector would rank one above the rhyme
    assert max(p.content for p in vocabulary) > scores[PLANTED_PAIR].content
    content_only = run(home, IntegrationConfig(differential=DifferentialConfig("content-only"), report_pairs=100))
    ranked = [(p.first, p.second) for p in content_only.best_pairs]
    assert min(ranked.index(pair) for pair in VOCABULARY_PAIRS) < ranked.index(PLANTED_PAIR)
    # the report is written, with its provenance
    report = json.loads(StoreLayout(home).integration_report(result.cycle_id).read_text())
    assert report["provenance"]["embedder"] == "fake-hashing-512"
    assert report["provenance"]["signer"] == "fake-signer" and report["provenance"]["code_version"]
    assert report["null"]["threshold"] == threshold and report["distill"]["valid_share"] == 1.0


def test_without_the_planted_record_nothing_surfaces(tmp_path):
    rows = [row for row in CORPUS if row != PLANTED]
    write_memories(tmp_path, rows)
    result = run(tmp_path, rows=rows)
    assert result.null is not None and result.null.threshold is not None
    assert result.candidates == () and Ledger(tmp_path).state().hypotheses == {}


def test_a_candidate_seen_again_extends_its_trajectory_instead_of_starting_a_new_entry(home):
    first = run(home)
    (rec,) = first.reconciliations
    assert rec.action == "proposed"
    second = run(home)
    assert [(r.hypothesis, r.action) for r in second.reconciliations] == [(rec.hypothesis, "observed")]
    state = Ledger(home).state()
    assert list(state.hypotheses) == [rec.hypothesis]
    h = state.hypotheses[rec.hypothesis]
    assert [t["cycle"] for t in h.trajectory] == [first.cycle_id, second.cycle_id]
    assert h.status == "proposed" and h.type == "insight"
    (item,) = review_queue(home)
    assert item.id == rec.hypothesis and item.records == PLANTED_PAIR and len(item.trajectory) == 2


def test_a_refuted_candidate_stays_dormant_until_new_independent_evidence_resurfaces_it(home):
    (rec,) = run(home).reconciliations
    refute(home, rec.hypothesis, reason="both are just supply running out", by="dana")
    assert review_queue(home) == []  # dormant: out of the queue, still in the ledger
    (dormant,) = review_queue(home, everything=True)
    assert dormant.status == "dormant" and dormant.questions == ("both are just supply running out",)
    # the same records again: observed, still dormant
    (again,) = run(home).reconciliations
    assert (again.hypothesis, again.action) == (rec.hypothesis, "observed_dormant")
    assert Ledger(home).state().hypotheses[rec.hypothesis].status == "dormant"
    # a third domain tells the same skeleton: new evidence, the entry resurfaces carrying its refutation
    newcomer = (
        "fin-boom",
        "finance",
        "Speculators pile into tulip futures; futures prices climb, speculators exhaust cash, prices slump.",
        "oscillator",
    )
    write_memories(home, [newcomer])
    (back,) = run(home, rows=[*CORPUS, newcomer]).reconciliations
    assert (back.hypothesis, back.action) == (rec.hypothesis, "resurfaced")
    assert back.new_members == ("record:fin-boom",)
    assert back.questions == ("both are just supply running out",)
    state = Ledger(home).state()
    assert list(state.hypotheses) == [rec.hypothesis]  # never a second entry, never deleted
    h = state.hypotheses[rec.hypothesis]
    assert h.status == "resurfaced" and "record:fin-boom" in h.members
    (item,) = review_queue(home)
    assert item.questions == ("both are just supply running out",)
    detail = insight_detail(home, rec.hypothesis)
    assert {m["id"] for m in detail["members"]} == {*PLANTED_PAIR, "fin-boom"}
    assert all(m["signature"] for m in detail["members"])


def test_surfacing_is_rate_limited_and_the_rest_are_counted_as_deferred(home):
    result = run(home, IntegrationConfig(max_surfaced=0))
    assert result.candidates == () and [c.members for c in result.deferred] == [PLANTED_PAIR]
    assert Ledger(home).state().hypotheses == {}


def test_a_store_with_too_little_to_compare_says_so(tmp_path):
    write_memories(tmp_path, ECOLOGY)
    result = run(tmp_path, rows=ECOLOGY)
    assert result.note is not None and "2 domains" in result.note
    assert result.candidates == () and StoreLayout(tmp_path).integration_report(result.cycle_id).exists()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"null_shuffles": 0}, "null_shuffles"),
        ({"null_quantile": 1.0}, "null_quantile"),
        ({"null_statistic": "mean"}, "null_statistic"),
        ({"null_tail": 0.0}, "null_tail"),
        ({"max_surfaced": -1}, "max_surfaced"),
        ({"structural_cluster_distance": "near"}, "structural_cluster_distance"),
        ({"probe_hot": -1}, "probe_hot"),
        ({"probe_max_surfaced": 1.5}, "probe_max_surfaced"),
    ],
)
def test_a_bad_cycle_config_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(RecordFormatError) as caught:
        IntegrationConfig(**kwargs)
    assert caught.value.field == field
