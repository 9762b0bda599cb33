"""Each signal on a hand-built frame: a case where it must move the right candidate up, and where it must not
act. Weights are in z units of the fused score."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lca.retrieval import Frame, QueryFacts, RetrievalConfig, rank_frame
from lca.retrieval.ranker import ordering
from lca.retrieval.signals import (
    anchor_closeness,
    lateness,
    named_speakers,
    only_asks,
    speaker_of,
    without_names,
)

Z = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.0)


def frame(dense, *, lexical=None, session=None, seq=None, entry=None, speaker=None, days=None, asks=None, asked=None):
    n = len(dense)

    def arr(values, default, dtype):
        return np.asarray(values if values is not None else [default] * n, dtype=dtype)

    return Frame(
        dense=np.asarray(dense, dtype=float),
        lexical=arr(lexical, 0.0, float),
        tiebreak=np.arange(n),
        session=arr(session, 0, np.int64),
        seq=arr(seq if seq is not None else list(range(n)), 0, np.int64),
        entry=arr(entry if entry is not None else list(range(n)), 0, np.int64),
        speaker=arr(speaker, -1, np.int64),
        days=arr(days, np.nan, float),
        asks=arr(asks, False, bool),
        asked=arr(asked, False, bool),
    )


def top(f: Frame, config: RetrievalConfig, facts: QueryFacts | None = None, **kw) -> list[int]:
    fused, eligible = rank_frame(f, config, facts or QueryFacts(), **kw)
    return [int(i) for i in ordering(fused, f.tiebreak) if eligible[i]]


def test_context_lifts_a_turn_whose_neighbours_match_and_stops_at_the_session():
    # 0 and 1 discuss the topic; 2 alone scores as high as 1; 3 is noise. 1's neighbour 0 lifts it above 2.
    dense = [0.9, 0.5, 0.52, 0.0, 0.0]
    f = frame(dense, session=[0, 0, 1, 1, 1], seq=[0, 1, 0, 1, 2])
    assert top(f, Z)[:3] == [0, 2, 1]
    assert top(f, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, context_weight=1.0))[
        :3
    ] == [0, 1, 2]
    # the same neighbour in another session must not count (1 and 2 each have one noise neighbour)
    apart = frame(dense, session=[0, 1, 2, 2, 1], seq=[0, 0, 0, 1, 1])
    ranked = top(
        apart, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, context_weight=1.0)
    )
    assert ranked[0] == 0 and ranked.index(2) < ranked.index(1)


def test_reply_inherits_from_the_question_turn_before_it():
    # 0 asks about the topic (scores high), 1 answers it in other words; 2 scores a little above 1 alone
    dense = [0.9, 0.30, 0.35, 0.0]
    asked = [True, False, False, False]
    f = frame(dense, asked=asked, session=[0, 0, 1, 1], seq=[0, 1, 0, 1])
    assert top(f, Z).index(1) > top(f, Z).index(2)
    lifted = top(f, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, reply_weight=0.5))
    assert lifted.index(1) < lifted.index(2)
    # no question before it: nothing to inherit
    plain = frame(dense, asked=[False] * 4, session=[0, 0, 1, 1], seq=[0, 1, 0, 1])
    assert top(
        plain, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, reply_weight=0.5)
    ) == top(plain, Z)
    # parts of one entry never reply to each other
    same_entry = frame(dense, asked=asked, session=[0, 0, 1, 1], seq=[0, 1, 0, 1], entry=[0, 0, 1, 2])
    assert top(
        same_entry, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, reply_weight=0.5)
    ) == top(same_entry, Z)


def test_a_turn_that_only_asks_yields_its_place():
    f = frame([0.9, 0.8, 0.0], asks=[True, False, False])
    assert top(f, Z)[0] == 0
    assert (
        top(f, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, question_weight=2.0))[0]
        == 1
    )
    assert only_asks("Ana: What did you name the cat?") and not only_asks("Ana: Look! [shares a photo: a cat]?")
    assert not only_asks("Ben: I did. Did you?\nSure.")


def test_a_question_asking_when_lifts_the_turns_that_say_when():
    from lca.temporal_anchor import asks_when, tells_time

    told = np.array([False, True, False])
    f = Frame(**{**frame([0.6, 0.5, 0.4]).__dict__, "tells_time": told})
    config = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, when_weight=2.0)
    assert top(f, config, QueryFacts(asks_when=True))[0] == 1
    assert top(f, config, QueryFacts(asks_when=False))[0] == 0  # a question not asking when: no act
    assert top(f, Z, QueryFacts(asks_when=True))[0] == 0  # weight 0: no act
    assert asks_when("When did Ana adopt the cat?") and asks_when("How long has Ben had his turtles?")
    assert not asks_when("What did Ana name the cat?")
    said = ["Ana: We adopted her two years ago!", "Ben: I went there last weekend", "Ana: since March", "in 2022"]
    assert all(tells_time(t) for t in said)
    assert not any(tells_time(t) for t in ["Ana: I may come along", "Ben: Kayaking sounds awesome!", "Ana: Thanks"])


def test_a_question_about_now_lifts_the_later_of_the_turns_about_it():
    from lca.temporal_anchor import asks_now

    # two turns about it a month apart, the older slightly closer; a later turn that is about something else
    f = frame([0.62, 0.6, 0.1, 0.0], days=[19_000.0, 19_030.0, 19_060.0, np.nan])
    config = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, now_weight=1.0, now_depth=2)
    assert top(f, config, QueryFacts(asks_now=True))[:2] == [1, 0]
    assert top(f, config, QueryFacts(asks_now=False))[:2] == [0, 1]  # not asking how things stand: no act
    assert top(f, dataclasses.replace(config, now_weight=0), QueryFacts(asks_now=True))[:2] == [0, 1]  # weight 0
    # only the turns about it move: the latest turn of all, outside the top now_depth, gains nothing
    fused, _ = rank_frame(f, config, QueryFacts(asks_now=True))
    plain, _ = rank_frame(f, config, QueryFacts(asks_now=False))
    assert fused[2] == plain[2] and fused[1] - plain[1] == pytest.approx(1.0) and fused[0] == plain[0]
    assert lateness(np.array([5.0, 7.0, np.nan, 6.0])).tolist() == [0.0, 1.0, 0.0, 0.5]
    assert lateness(np.array([5.0, 5.0])).tolist() == [0.0, 0.0] and lateness(np.array([np.nan])).tolist() == [0.0]
    asked = [
        "What are we using now?",
        "Where do I get them fired these days?",
        "Where was it held in the end?",
        "What is the current price of a mug?",
        "Which version is planned now, and when does it start?",
    ]
    assert all(asks_now(q) for q in asked)
    not_asked = [
        "What will it cost now that texts are added?",
        "Known for now, but what did Ana say?",
        "Where did we first plan to run staging?",
        "Nowhere else?",
    ]
    assert not any(asks_now(q) for q in not_asked)


def test_the_named_speakers_turns_gain_only_when_one_speaker_is_named():
    f = frame([0.5, 0.55, 0.0], speaker=[0, 1, 1])
    config = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, speaker_weight=0.6)
    assert top(f, Z)[0] == 1
    assert top(f, config, QueryFacts(speaker=0))[0] == 0
    assert top(f, config, QueryFacts(speaker=None))[0] == 1  # none or two named: no act
    assert named_speakers("What did Ana's cat eat?", ["Ana", "Ben"]) == ["Ana"]
    assert named_speakers("Did Ana and Ben meet?", ["Ana", "Ben"]) == ["Ana", "Ben"]
    assert named_speakers("Where is Anabel?", ["Ana"]) == []
    assert without_names("What did Ana's cat eat?", ["Ana"]) == "What did cat eat?"
    assert speaker_of("Ana Lee: hello") == "Ana Lee" and speaker_of("note: lowercase is no speaker") is None


def test_a_temporal_anchor_lifts_turns_dated_near_its_day():
    days = [19_000.0, 19_010.2, np.nan]
    f = frame([0.6, 0.5, 0.55], days=days)
    config = RetrievalConfig(fusion="z", feedback_weight=0, bm25_weight=0, anchor_weight=4.0)
    assert top(f, Z)[0] == 0
    assert top(f, config, QueryFacts(anchor_day=19_010.0, anchor_tolerance=1.0))[0] == 1
    assert top(f, config, QueryFacts())[0] == 0  # no time expression: no act
    closeness = anchor_closeness(np.array(days), 19_010.0, 1.0)
    assert closeness[1] == pytest.approx(1.0) and closeness[0] == 0.0 and closeness[2] == 0.0
    # a span (a month): every day in it alike, then the tolerance's fall beyond either edge
    spanned = anchor_closeness(
        np.array([19_009.0, 19_010.0, 19_025.5, 19_040.0, 19_041.0, 19_042.0]), 19_010.0, 1.0, 30
    )
    assert spanned.tolist() == [0.5, 1.0, 1.0, 1.0, 0.5, 0.0]
    late = frame([0.6, 0.5], days=[19_012.0, 19_038.0])
    assert top(late, config, QueryFacts(anchor_day=19_010.0, anchor_span=30.0))[0] == 0  # both in: cosine decides


def test_feedback_scores_the_dense_side_again_for_the_moved_query():
    f = frame([0.9, 0.1, 0.2])
    seen = []

    def refeed(top_candidates):
        seen.append(list(top_candidates))
        return np.array([0.9, 0.95, 0.2]), None  # the moved query finds what resembles the top hit

    config = RetrievalConfig(fusion="z", anchor_weight=0, bm25_weight=0, feedback_weight=0.6, feedback_depth=1)
    assert top(f, config, refeed=refeed)[0] == 1 and seen == [[0]]
    seen.clear()
    assert top(f, Z, refeed=refeed)[0] == 0 and seen == []  # weight 0: never called


def test_lexical_feedback_scores_the_bm25_side_again_and_keeps_the_dense_side():
    f = frame([0.9, 0.3, 0.1], lexical=[1.0, 0.0, 0.0])
    config = RetrievalConfig(
        fusion="z", anchor_weight=0, feedback_weight=0, lexical_feedback_weight=0.5, feedback_depth=1
    )
    seen = []

    def refeed(top_candidates):
        seen.append(list(top_candidates))
        return None, np.array([1.0, 0.0, 6.0])  # the top hit's other terms are in the third chunk

    assert top(f, config, refeed=refeed) == [0, 2, 1] and seen == [[0]]
    seen.clear()
    assert top(f, config.with_overrides(["lexical_feedback_weight=0"]), refeed=refeed) == [0, 1, 2] and seen == []


def test_rrf_takes_only_each_sides_top_pool_and_signals_act_in_z_units():
    f = frame([0.9, 0.8, 0.7, 0.6], lexical=[0.0, 0.0, 0.0, 2.0], speaker=[-1, -1, -1, 0])
    rrf = RetrievalConfig(fusion="rrf", pool=2, anchor_weight=0, feedback_weight=0)
    fused, eligible = rank_frame(f, rrf)
    assert list(eligible) == [True, True, False, True]  # dense top 2 and the one lexical match
    lifted = top(f, dataclasses.replace(rrf, speaker_weight=3.0), QueryFacts(speaker=0))
    assert lifted[0] == 3


def test_the_context_key_reads_a_window_as_one_text_without_storing_its_vector():
    from lca.retrieval.signals import context_key_scores

    # unit vectors: 0 = query direction; 1 and 2 are orthogonal to it; 3 is half aligned
    q = np.array([1.0, 0.0, 0.0])
    vectors = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
    session, seq = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    norms = np.array([np.linalg.norm(vectors[0] + vectors[1])] * 2 + [np.linalg.norm(vectors[2] + vectors[3])] * 2)
    dense = vectors @ q
    scores = context_key_scores(dense, np.zeros(4), session, seq, 1, 0, norms, 0.5)
    # chunk 1's window (0 and 1) holds the query's direction fully; chunk 3's window only partly
    windows = [(vectors[0] + vectors[1]) @ q / norms[1], (vectors[2] + vectors[3]) @ q / norms[3]]
    assert windows[0] > windows[1] and scores[1] > scores[3]
    f = frame(list(dense), session=list(session), seq=list(seq))
    keyed = Frame(**{**f.__dict__, "window_norm": norms, "window_lexical": np.zeros(4)})
    with_key = top(
        keyed, RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0, context_weight=2.0)
    )
    assert with_key.index(1) < with_key.index(2)  # 1 rises on its window's match
    assert top(keyed, Z) == top(f, Z)  # weight 0: the window never acts


def test_window_bm25_reads_a_window_as_one_document_with_saturation():
    from lca.retrieval.signals import window_bm25

    # four chunks of one session and one of another; one query term. Chunk 1 holds it twice, chunk 4 once.
    frequencies = np.array([[0.0], [2.0], [0.0], [0.0], [1.0]])
    lengths = np.array([4.0, 4.0, 4.0, 4.0, 4.0])
    session, seq = np.array([0, 0, 0, 0, 1]), np.array([0, 1, 2, 3, 0])
    alone = window_bm25(frequencies, lengths, session, seq, 0, 0)
    assert alone[1] > alone[4] > 0 and alone[0] == alone[2] == alone[3] == 0
    windowed = window_bm25(frequencies, lengths, session, seq, 1, 0)
    # chunk 2's window (1 and 2) holds the term; chunk 3's (2 and 3) does not; the window stops at the session
    assert windowed[2] > 0 and windowed[3] == 0 and windowed[4] > 0
    # one document: a window's counts saturate (k1), so two occurrences score less than twice one
    one = window_bm25(np.array([[1.0], [0.0]]), np.array([4.0, 4.0]), np.array([0, 1]), np.array([0, 0]), 0, 0)
    two = window_bm25(np.array([[2.0], [0.0]]), np.array([4.0, 4.0]), np.array([0, 1]), np.array([0, 0]), 0, 0)
    assert one[0] < two[0] < 2 * one[0]
    # no query term known: nothing to add
    assert not window_bm25(np.zeros((5, 0)), lengths, session, seq, 1, 1).any()


def test_the_context_signal_ranks_by_the_windows_own_bm25():
    # flat dense and per-turn BM25: only the window's BM25 as one document (from the store) tells them apart
    f = frame([0.5, 0.5, 0.5, 0.5], lexical=[1.0, 1.0, 1.0, 1.0], session=[0, 0, 1, 1], seq=[0, 1, 0, 1])
    config = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, context_weight=1.0)
    for best, window_lexical in ((3, [0.0, 0.0, 0.0, 3.0]), (0, [3.0, 0.0, 0.0, 0.0])):
        keyed = Frame(**{**f.__dict__, "window_norm": np.ones(4), "window_lexical": np.array(window_lexical)})
        assert top(keyed, config)[0] == best
