"""A user's turn scoring with the agent's reply to it (``RecallConfig.reply_inheritance``, ``lca.recall.pairing``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lca.errors import RecordFormatError
from lca.recall import RecallConfig
from lca.recall.pairing import FLOOR_REASON, inherit_from_replies
from lca.recall.records import ScoredCandidate
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def candidate(chunk_id: str, similarity: float, *, why_not: str | None = None) -> ScoredCandidate:
    terms = {"similarity": similarity, "risk": 0.0}
    return ScoredCandidate(chunk_id, f"transcript:s#{chunk_id}", "transcript", "transcript", chunk_id, None, similarity,
                           terms, similarity, why_not=why_not)  # fmt: skip


def test_a_prompt_scores_with_the_best_reply_to_it_and_clears_the_floor_with_it():
    below = f"{FLOOR_REASON} (cosine 0.100 < 0.300)"
    out = [candidate("u1", 0.2, why_not=below), candidate("a2", 0.8), candidate("a2b", 0.6), candidate("u3", 0.9)]
    before = {"a2": "u1", "a2b": "u1", "u3": "a2b"}  # a2 and a2b: two chunks of one reply; u3 answers the reply
    lifted = {c.chunk_id: c for c in inherit_from_replies(list(out), before, {"a2", "a2b"}, 1.0, 1.0)}
    assert lifted["u1"].score == pytest.approx(0.8) and lifted["u1"].why_not is None  # the best chunk, lent once
    assert lifted["u3"] == out[3]  # only the turn a reply answers inherits, not the turn after it
    assert lifted["a2"] == out[1] and lifted["a2b"] == out[2]  # the agent's turns keep their own scores
    half = {c.chunk_id: c for c in inherit_from_replies(list(out), before, {"a2", "a2b"}, 0.5, 1.0)}
    assert half["u1"].score == pytest.approx(0.4)
    assert inherit_from_replies(list(out), before, {"a2"}, 0.5, 0.0)[0] == out[0]  # an ablated S lends nothing
    assert inherit_from_replies(list(out), before, {"a2"}, 0.0, 1.0)[0] == out[0]
    higher = [candidate("u1", 0.9), candidate("a2", 0.8)]
    assert inherit_from_replies(list(higher), {"a2": "u1"}, {"a2"}, 1.0, 1.0) == higher  # never lowers a turn
    agents = [candidate("a1", 0.2), candidate("a2", 0.8)]
    assert inherit_from_replies(list(agents), {"a2": "a1"}, {"a1", "a2"}, 1.0, 1.0) == agents  # the agent's own
    refused = [candidate("u1", 0.2, why_not=below), candidate("a2", 0.25, why_not=below)]
    assert inherit_from_replies(list(refused), {"a2": "u1"}, {"a2"}, 1.0, 1.0)[0].why_not == below


def test_a_users_turn_in_other_words_than_the_question_is_found_through_the_reply_to_it(tmp_path):
    """The user's plan ("one gel every 40 minutes") shares no word with a question about fuelling; the agent's reply,
    which restates it, does. With ``reply_inheritance`` the user's turn, the source, scores with the reply and ranks
    above it (the reply holds K for being the agent's own words); off, it ranks far below."""
    config = RecallConfig(floor=0.05)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=config) as store:
        store.append(
            [
                make_entry("s", 1, "my plan is one gel every 40 minutes with a few sips of water"),
                make_entry("s", 2, "that race fuelling plan is solid", kind=EntryKind.ASSISTANT_TURN),
                make_entry("s", 3, "the calf feels fine after the long run"),
            ]
        )
        store.ingest()

        def by_turn(reply_inheritance: float) -> dict[str, ScoredCandidate]:
            result = store.recall("race fuelling plan", config=replace(config, reply_inheritance=reply_inheritance))
            return {c.source.split("#")[1].split("[")[0]: c for c in result.candidates}

        off, on = by_turn(0.0), by_turn(1.0)
    assert off["s:1"].score < off["s:2"].score
    assert on["s:1"].score == pytest.approx(
        off["s:1"].score + on["s:2"].terms["similarity"] - off["s:1"].terms["similarity"]
    )
    assert (
        on["s:1"].score > on["s:2"].score and on["s:1"].terms["similarity"] == off["s:1"].terms["similarity"]
    )  # S stays its own
    assert on["s:3"].score == pytest.approx(off["s:3"].score)  # a turn no reply answers keeps its score


def test_reply_inheritance_is_a_share_and_a_parameter_of_both_recall_conditions():
    from conditions import build_condition

    with pytest.raises(RecordFormatError) as info:
        RecallConfig(reply_inheritance=1.5)
    assert info.value.field == "reply_inheritance"
    for name in ("transcript-recall", "full-lca"):
        assert build_condition(name).recall_config().reply_inheritance == RecallConfig().reply_inheritance == 0.0
        assert build_condition(name, reply_inheritance=1).recall_config().reply_inheritance == 1.0
        assert build_condition(name, reply_inheritance=0.75).recall_config().reply_inheritance == 0.75
