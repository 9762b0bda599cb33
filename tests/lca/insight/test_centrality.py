"""Step (v) of the integration cycle: link-graph centrality over the records' provenance and ledger links, written
as derived data each cycle rewrites the same way, and read by the review queue to rank what waits."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from lca.errors import LCAError, RecordFormatError
from lca.insight import review_queue
from lca.insight.centrality import (
    CentralityConfig,
    pagerank,
    record_centrality,
    record_links,
    refresh_centrality,
)
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import Authority, Conflict, MemoryRecord, MemoryStore, MemoryType, Privacy, TranscriptSpan
from tests.lca.insight.corpus import CORPUS, write_memories
from tests.lca.insight.test_integration_cycle import PLANTED_PAIR, run


def remember(home, memory_id, *, sessions=(), conflicts=(), privacy=Privacy.PRIVATE):
    record = MemoryRecord(
        id=memory_id,
        type=MemoryType.FACT,
        projects=("ops",),
        created=datetime(2026, 1, 1),
        authority=Authority.REVIEWED,
        privacy=privacy,
        sources=tuple(TranscriptSpan(session=s, entries=("e1",)) for s in sessions),
        conflicts=tuple(Conflict(id=c, reason="they disagree") for c in conflicts),
    )
    MemoryStore(home).write(record, f"{memory_id} says something.\n")


def propose(home, claim, members, score, *, kind="insight"):
    """An insight hypothesis in the ledger, as the cycle's reconciliation writes one."""
    subject = f"hyp-{claim}"
    data = {"claim": claim, "type": kind, "members": [f"record:{m}" for m in members], "score": score}
    Ledger(home).append("hypothesis_proposed", subject, data)
    return subject


def test_pagerank_on_a_star_is_the_closed_form_and_an_unlinked_graph_is_uniform():
    d = 0.85
    ranks, iterations, converged = pagerank(5, np.zeros(4, dtype=np.int64), np.arange(1, 5), CentralityConfig(d))
    assert converged and iterations > 1 and ranks.sum() == pytest.approx(1.0)
    centre = (1 + 4 * d) / (5 * (1 + d))  # c = (1-d)/5 + 4dl, l = (1-d)/5 + dc/4
    assert ranks[0] == pytest.approx(centre) and ranks[1:] == pytest.approx([(1 - centre) / 4] * 4)
    alone, _, converged = pagerank(3, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), CentralityConfig())
    assert converged and alone == pytest.approx([1 / 3] * 3)
    _, ran, converged = pagerank(5, np.zeros(4, dtype=np.int64), np.arange(1, 5), CentralityConfig(max_iterations=1))
    assert (ran, converged) == (1, False)


def test_links_are_typed_and_only_between_current_records_and_live_insights(tmp_path):
    remember(tmp_path, "a", sessions=("s1",), conflicts=("b", "gone"))
    remember(tmp_path, "b", sessions=("s1", "s2"))
    remember(tmp_path, "c")
    remember(tmp_path, "hidden", sessions=("s1",), privacy=Privacy.SECRET)
    live = propose(tmp_path, "live", ["a", "c", "gone"], 1.0)
    dead = propose(tmp_path, "dead", ["b", "c"], 1.0)
    Ledger(tmp_path).append("hypothesis_refuted", dead, {"reason": "no", "by": "dana"})
    propose(tmp_path, "fact", ["b", "c"], 1.0, kind="fact")
    memories = [m for m in MemoryStore(tmp_path).load().files if m.record.id != "hidden"]
    links = {
        (link.kind, link.first, link.second)
        for link in record_links(memories, Ledger(tmp_path).state().hypotheses.values())
    }
    assert links == {
        ("evidence", "record:a", "session:s1"),
        ("evidence", "record:b", "session:s1"),
        ("evidence", "record:b", "session:s2"),
        ("lateral", "record:a", "record:b"),
        ("member", f"hypothesis:{live}", "record:a"),
        ("member", f"hypothesis:{live}", "record:c"),
    }


def test_a_refresh_ranks_the_linked_records_and_writes_the_same_bytes_again(tmp_path):
    for name in ("a", "b", "c"):
        remember(tmp_path, name, sessions=("s1",))
    remember(tmp_path, "lonely")
    remember(tmp_path, "secret", sessions=("s1",), privacy=Privacy.SECRET)
    result = refresh_centrality(tmp_path)
    assert result.nodes == {"record": 4, "session": 1, "hypothesis": 0} and result.links["evidence"] == 3
    assert set(result.records) == {"a", "b", "c", "lonely"}  # a secret memory is no node
    assert result.records["a"] == result.records["b"] == result.records["c"] > result.records["lonely"]
    path = StoreLayout(tmp_path).insight_centrality
    written = path.read_bytes()
    assert record_centrality(tmp_path) == result.records
    path.unlink()
    refresh_centrality(tmp_path)  # derived: rebuilt from the memory files and the ledger alone
    assert path.read_bytes() == written


def test_the_review_queue_ranks_by_centrality_among_equal_scores_and_on_request(tmp_path):
    for name in ("hub", "x", "y"):
        remember(tmp_path, name, sessions=("s1",))
    for name in ("p", "q", "r", "s", "t"):
        remember(tmp_path, name)
    central = propose(tmp_path, "central", ["hub", "p"], 1.0)
    peripheral = propose(tmp_path, "peripheral", ["q", "r"], 1.0)
    stronger = propose(tmp_path, "stronger", ["s", "t"], 2.0)
    assert [i.centrality for i in review_queue(tmp_path)] == [None, None, None]  # no refresh yet
    refresh_centrality(tmp_path)
    by_score = review_queue(tmp_path)
    assert [i.id for i in by_score] == [stronger, central, peripheral]  # equal scores: the more central first
    assert by_score[1].centrality > by_score[2].centrality == by_score[0].centrality
    # by centrality: the hub's insight first, then equal centralities by score
    assert [i.id for i in review_queue(tmp_path, order="centrality")] == [central, stronger, peripheral]
    with pytest.raises(LCAError, match="order"):
        review_queue(tmp_path, order="newest")


def test_every_integration_cycle_refreshes_it_after_the_ledger_took_its_candidates(tmp_path):
    write_memories(tmp_path, CORPUS)
    result = run(tmp_path)
    assert result.centrality is not None and result.centrality.links["member"] == 2
    scores = record_centrality(tmp_path)
    assert scores is not None and set(scores) == {row[0] for row in CORPUS}
    assert all(scores[m] > 1.0 for m in PLANTED_PAIR) and all(scores[r] < 1.0 for r in scores if r not in PLANTED_PAIR)
    (item,) = review_queue(tmp_path)
    assert item.centrality == pytest.approx(sum(scores[m] for m in PLANTED_PAIR) / 2, abs=1e-6)
    (rec,) = result.reconciliations
    Ledger(tmp_path).append("hypothesis_refuted", rec.hypothesis, {"reason": "coincidence", "by": "dana"})
    again = run(tmp_path)  # refuted: its links lend no weight any more
    assert again.centrality is not None and again.centrality.links["member"] == 0
    assert set(record_centrality(tmp_path).values()) == {1.0}


def test_a_bad_config_or_file_is_refused_naming_it(tmp_path):
    with pytest.raises(RecordFormatError) as caught:
        CentralityConfig(damping=1.0)
    assert caught.value.field == "damping"
    path = StoreLayout(tmp_path).insight_centrality
    path.parent.mkdir(parents=True)
    path.write_text("[]")
    with pytest.raises(RecordFormatError, match="lca integrate"):
        record_centrality(tmp_path)
