"""The hot cycle (step iv of the integration cycle): the most active records are paired with dormant records of
other domains, scored by the cycle's differential, and only a pair that beats the null model surfaces, rate-limited
in slots of its own and recorded in the ledger as a probe's. Scripted fake summarizer, fake embedder."""

from __future__ import annotations

import time

import pytest

from lca.activation import Access, RetrievalLog
from lca.insight import PROBE_TYPE, IntegrationConfig, review_queue
from lca.ledger import Ledger
from tests.lca.insight.corpus import CORPUS, PLANTED, write_memories
from tests.lca.insight.test_integration_cycle import PLANTED_PAIR, run

# the neighbour search in the content space, two neighbours a record: the planted rhyme (no word shared) is out of
# its sight, so only a probe can find it
NEAR_SIGHTED = IntegrationConfig(neighbour_space="content", neighbours=2)


def recalled(home, *memory_ids, ago=30.0):
    """Recall reached these memories ``ago`` seconds ago, one chunk each (what makes a record active)."""
    now = time.time()
    RetrievalLog(home).record(Access(f"memory:{m}[0:40]", now - ago, shape=k) for k, m in enumerate(memory_ids))


@pytest.fixture
def home(tmp_path):
    write_memories(tmp_path, CORPUS)
    return tmp_path


def test_without_recall_nothing_is_active_and_no_probe_runs(home):
    probes = run(home).probes
    assert probes is not None and probes.hot == () and probes.pairs_scored == 0
    assert probes.note is not None and "no record is active" in probes.note


def test_a_probe_finds_the_rhyme_the_neighbour_search_missed_and_the_ledger_says_it_came_from_a_probe(home):
    recalled(home, "eco-wolves")
    result = run(home, NEAR_SIGHTED)
    assert result.candidates == () and result.deferred == ()  # the neighbour search did not see it
    probes = result.probes
    assert probes is not None and [h.id for h in probes.hot] == ["eco-wolves"] and probes.hot[0].activation > 0.5
    assert probes.dormant == len(CORPUS) - 1
    assert probes.pairs_scored == sum(1 for row in CORPUS if row[1] != "ecology")  # across domains only
    (candidate,) = probes.candidates
    assert candidate.members == PLANTED_PAIR and candidate.score > result.null.threshold
    (rec,) = probes.reconciliations
    h = Ledger(home).state().hypotheses[rec.hypothesis]
    assert rec.action == "proposed" and h.type == PROBE_TYPE
    assert [e["origin"] for e in h.history if e["kind"] != "hypothesis_reviewed"] == ["probe"]
    (item,) = review_queue(home)
    assert item.id == rec.hypothesis and item.type == PROBE_TYPE and item.records == PLANTED_PAIR


def test_a_probe_scores_a_pair_as_the_cycle_does(home):
    recalled(home, "eco-wolves")
    result = run(home, IntegrationConfig(max_surfaced=0, report_pairs=100))
    neighbour = {(p.first, p.second): p for p in result.best_pairs}[PLANTED_PAIR]
    assert result.probes is not None
    (candidate,) = result.probes.candidates  # deferred by the main surfacing's rate limit, surfaced by the probe
    assert result.deferred[0].members == PLANTED_PAIR
    (pair,) = candidate.pairs
    assert (pair.first, pair.second) == PLANTED_PAIR
    assert (pair.structural, pair.content, pair.score) == pytest.approx(
        (neighbour.structural, neighbour.content, neighbour.score)
    )


def test_a_rhyme_already_surfaced_is_not_surfaced_again_by_a_probe(home):
    recalled(home, "eco-wolves")
    result = run(home)
    assert [c.members for c in result.candidates] == [PLANTED_PAIR]
    assert result.probes is not None and result.probes.pairs_scored > 0 and result.probes.candidates == ()
    (h,) = Ledger(home).state().hypotheses.values()
    assert h.type == "insight" and [e["origin"] for e in h.history if e["kind"] != "hypothesis_reviewed"] == [
        "neighbours"
    ]


def test_active_records_are_never_paired_with_each_other_nor_within_their_domain(home):
    recalled(home, "eco-wolves", "kit-sourdough")
    probes = run(home, NEAR_SIGHTED).probes
    assert probes is not None and {h.id for h in probes.hot} == set(PLANTED_PAIR)
    # eco-wolves with the dormant non-ecology records, kit-sourdough with the dormant non-kitchen ones
    dormant = [row for row in CORPUS if row[0] not in PLANTED_PAIR]
    assert probes.pairs_scored == sum(r[1] != "ecology" for r in dormant) + sum(r[1] != "kitchen" for r in dormant)
    assert probes.candidates == ()  # the rhyme's two records are both active: no probe pairs them


def test_only_the_most_active_records_are_hot(home):
    recalled(home, "fin-rally", ago=3000.0)
    recalled(home, "eco-wolves", ago=10.0)
    probes = run(home, IntegrationConfig(probe_hot=1)).probes  # fin-rally is active too, but less
    assert probes is not None and [h.id for h in probes.hot] == ["eco-wolves"]


def test_without_the_planted_record_a_probe_surfaces_nothing(tmp_path):
    rows = [row for row in CORPUS if row != PLANTED]
    write_memories(tmp_path, rows)
    recalled(tmp_path, "eco-wolves", "fin-rally", "kit-dough")
    result = run(tmp_path, NEAR_SIGHTED, rows=rows)
    assert result.probes is not None and result.probes.pairs_scored > 0
    assert result.probes.candidates == () and Ledger(tmp_path).state().hypotheses == {}


def test_probe_surfacing_is_rate_limited_and_can_be_switched_off(home):
    recalled(home, "eco-wolves")
    limited = run(home, IntegrationConfig(neighbour_space="content", neighbours=2, probe_max_surfaced=0)).probes
    assert limited is not None and limited.candidates == () and [c.members for c in limited.deferred] == [PLANTED_PAIR]
    assert Ledger(home).state().hypotheses == {}
    off = run(home, IntegrationConfig(neighbour_space="content", neighbours=2, probe_hot=0)).probes
    assert off is not None and off.hot == () and off.pairs_scored == 0 and "off" in (off.note or "")
