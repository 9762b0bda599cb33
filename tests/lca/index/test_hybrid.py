"""The store's hybrid search ranks through lca.retrieval: its RetrievalConfig (defaults or retrieval.yaml), the configured fusion and
signals read from the catalog's transcript structure, the whole store or the candidate pool."""

from __future__ import annotations

from datetime import datetime

import pytest

from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.index.stores import fixture_store

Z = RetrievalConfig(fusion="z", bm25_weight=0.5, anchor_weight=0, feedback_weight=0)
RRF = RetrievalConfig(fusion="rrf", bm25_weight=1.0, anchor_weight=0, feedback_weight=0, now_weight=0)


def store_of(tmp_path, sessions, **kw) -> Substrate:
    substrate = Substrate(tmp_path, embedder=FakeHashingEmbedder(dimension=256, max_input_tokens=200), **kw)
    for entries in sessions:
        substrate.append(entries)
    return substrate


def entries_of(hits) -> list[str]:
    return [h.pointer.entry_id for h in hits]


def test_rrf_fusion_is_reciprocal_rank_fusion_of_the_plain_rankings(tmp_path):
    with fixture_store(tmp_path, retrieval=RRF) as s:
        for query in ("Which climbing gym does Ben go to?", "adopted a grey cat", "tax forms due"):
            dense = {h.chunk_id: i + 1 for i, h in enumerate(s.search(query, k=50, mode="dense"))}
            lexical = {h.chunk_id: i + 1 for i, h in enumerate(s.search(query, k=50, mode="lexical"))}
            hybrid = s.search(query, k=50)
            for hit in hybrid:
                expected = sum(1 / (60 + r[hit.chunk_id]) for r in (dense, lexical) if hit.chunk_id in r)
                assert hit.score == pytest.approx(expected)
            assert {h.chunk_id for h in hybrid} == set(dense) | set(lexical)


def test_a_config_given_to_one_search_overrides_the_stores(tmp_path):
    with fixture_store(tmp_path, retrieval=Z) as s:
        z = s.index.search("Which climbing gym does Ben go to?", k=5)
        rrf = s.index.search("Which climbing gym does Ben go to?", k=5, config=RRF)
        assert z[0].chunk_id == rrf[0].chunk_id and z[0].score != rrf[0].score
        assert s.index.retrieval == Z


def test_an_attachments_caption_is_indexed_as_part_of_its_turn(tmp_path):
    turn = make_entry("s1", 1, "Look what I found!", author="Ana", meta={"blip_caption": "a red kayak on a lake"})
    other = make_entry("s1", 2, "Nice weather today.", author="Ben")
    with store_of(tmp_path, [[turn, other]]) as s:
        hit = s.search("kayak", k=1, mode="lexical")[0]
        assert hit.pointer.entry_id == "s1:1" and "[shares a photo: a red kayak on a lake]" in hit.text
        assert (hit.pointer.char_start, hit.pointer.char_end) == (0, len("Look what I found!"))


def dialog():
    return [
        [
            make_entry("s1", 1, "How was the concert at the harbour last night?", author="Ana"),
            make_entry("s1", 2, "Loud and wonderful, we danced until midnight.", author="Ben"),
            make_entry("s1", 3, "I bought new running shoes for the marathon.", author="Ana"),
        ],
        [
            make_entry("s2", 1, "My sister visited the harbour museum.", author="Ben", timestamp="2026-03-10T10:00:00"),
            make_entry("s2", 2, "The museum has old ships and maps.", author="Ana", timestamp="2026-03-10T10:01:00"),
        ],
    ]


def test_a_reply_inherits_from_the_question_it_answers(tmp_path):
    query = "How was the concert at the harbour?"
    with store_of(tmp_path, dialog()) as s:
        plain = entries_of(s.index.search(query, k=5, config=Z))
        replies = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, reply_weight=1.0)
        reply = entries_of(s.index.search(query, k=5, config=replies))
        assert reply.index("s1:2") < plain.index("s1:2")
        ask = RetrievalConfig(
            fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, reply_weight=1.0, question_weight=3.0
        )
        assert plain[0] == "s1:1" and entries_of(s.index.search(query, k=5, config=ask))[0] != "s1:1"  # it only asks


def test_the_speaker_a_query_names_gains_and_leaves_the_embedded_query(tmp_path):
    query = "What did Ana buy?"
    with store_of(tmp_path, dialog()) as s:
        named = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, speaker_weight=2.0)
        ranked = entries_of(s.index.search(query, k=5, config=named))
        assert s.index.structure().speakers == ["Ana", "Ben"]
        assert all(e in ("s1:1", "s1:3", "s2:2") for e in ranked[:3])  # Ana's turns first
        both = entries_of(s.index.search("Did Ana or Ben buy shoes?", k=5, config=named))
        assert both == entries_of(s.index.search("Did Ana or Ben buy shoes?", k=5, config=Z))  # two named: no act
        out = RetrievalConfig(
            fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, names_in_dense_query=False
        )
        calls = s.embedder.calls
        s.index.search(query, k=5, config=out)
        assert s.embedder.calls == calls + 2  # the query, then the query without "Ana"


def test_a_time_expression_is_read_against_as_of(tmp_path):
    query = "what did we talk about three days ago?"
    with store_of(tmp_path, dialog()) as s:
        config = RetrievalConfig(fusion="z", feedback_weight=0, bm25_weight=0.5, anchor_weight=4.0)
        anchored = entries_of(s.index.search(query, k=2, config=config, as_of=datetime(2026, 3, 13, 9, 0)))
        assert set(anchored) == {"s2:1", "s2:2"}  # the session of 10 March
        unanchored = s.index.search(query, k=5, config=config)  # no as_of: a relative time reads nothing
        assert entries_of(unanchored) == entries_of(s.index.search(query, k=5, config=Z))


def test_a_question_asking_when_lifts_the_turns_of_the_store_that_say_when(tmp_path):
    # "last night" in s1:1 says when; the museum turns do not
    when = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, when_weight=3.0)
    with store_of(tmp_path, dialog()) as s:
        asked = entries_of(s.index.search("When did Ben visit the harbour?", k=5, config=when))
        plain = entries_of(s.index.search("When did Ben visit the harbour?", k=5, config=Z))
        assert asked[0] == "s1:1" and plain[0] != "s1:1"
        # not asking when: the weight does not act
        query = "Did Ben visit the harbour?"
        assert entries_of(s.index.search(query, k=5, config=when)) == entries_of(s.index.search(query, k=5, config=Z))


def test_a_question_about_now_ranks_the_later_of_two_turns_about_it_first(tmp_path):
    # the store reads "now" off the query and each turn's time off the catalog: the later decision comes first
    sessions = [
        [make_entry("s1", 1, "We log loans on a shared spreadsheet.", timestamp="2026-01-05T10:00:00")],
        [make_entry("s2", 1, "Lunch was a sandwich.", timestamp="2026-02-01T10:00:00")],
        [make_entry("s3", 1, "We log loans in Lend Engine from today.", timestamp="2026-03-05T10:00:00")],
    ]
    now = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.5, now_weight=3.0)
    with store_of(tmp_path, sessions) as s:
        asked = entries_of(s.index.search("How do we log loans now?", k=3, config=now))
        plain = entries_of(s.index.search("How do we log loans now?", k=3, config=Z))
        assert asked[0] == "s3:1" and asked.index("s3:1") < plain.index("s3:1") or plain[0] == "s3:1"
        assert asked.index("s1:1") < asked.index("s2:1")  # the turns about it only: the later chatter stays last
        query = "How do we log loans?"  # not asking how things stand now: the weight does not act
        assert entries_of(s.index.search(query, k=3, config=now)) == entries_of(s.index.search(query, k=3, config=Z))


def test_the_window_signal_reads_the_stores_term_counts(tmp_path):
    # the window of s1:2 (s1:1 and s1:2) holds "concert" and "midnight" as one text; with BM25 alone and the
    # window signal, s1:2 outranks the museum turns that match neither
    config = RetrievalConfig(
        fusion="z",
        anchor_weight=0,
        feedback_weight=0,
        dense_weight=0.0,
        bm25_weight=1.0,
        context_weight=1.0,
        context_before=1,
        context_after=0,
    )
    with store_of(tmp_path, dialog()) as s:
        ranked = entries_of(s.index.search("concert midnight", k=5, config=config))
        assert ranked[:2] == ["s1:2", "s1:1"]
        window = s.index.text_facts.window_lexical(s.index.store_text(), "concert midnight", config)
        assert window.argmax() == 1 and window[3] == window[4] == 0.0  # s2's turns hold neither word


def test_the_candidate_pool_with_neighbours_stands_in_for_the_whole_store(tmp_path):
    query = "harbour concert"
    unrelated = [make_entry("s3", n, text) for n, text in enumerate(["Tax forms.", "Garden peas.", "Chess club."], 1)]
    with store_of(tmp_path, [*dialog(), unrelated]) as s:
        whole = RetrievalConfig(fusion="z", anchor_weight=0, bm25_weight=0.5, context_weight=0.5, feedback_weight=0.5)
        pool = RetrievalConfig(
            fusion="z", bm25_weight=0.5, context_weight=0.5, feedback_weight=0.5, z_scope="pool", pool=2
        )
        by_whole = entries_of(s.index.search(query, k=2, config=whole))
        by_pool = entries_of(s.index.search(query, k=10, pool=2, config=pool))
        assert by_pool[0] == by_whole[0] == "s1:1"
        assert "s1:2" in by_pool  # a neighbour of a pooled turn joins the frame
        assert not any(e.startswith("s3:") for e in by_pool)  # the rest of the store is not ranked
        assert len(entries_of(s.index.search(query, k=10, config=whole))) == 8  # the whole store is


def test_sentence_keys_score_a_chunk_only_while_the_config_reads_them(tmp_path):
    remark = (
        "I want recipe ideas for a quick weeknight dinner with rice, beans, greens, tofu, peppers, onions and "
        "garlic that my whole family would enjoy. By the way, I replaced my kitchen faucet last Sunday."
    )
    turns = [make_entry("s1", 1, remark), make_entry("s1", 2, "Which kitchen faucet should I buy for my sink?")]
    with store_of(tmp_path, [turns], retrieval=RetrievalConfig(sentence_keys=True)) as s:
        query = "I replaced my kitchen faucet"
        keyed = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.0)
        assert entries_of(s.index.search(query, k=2, config=keyed))[0] == "s1:1"
        own_text = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0, bm25_weight=0.0, sentences=False)
        assert entries_of(s.index.search(query, k=2, config=own_text))[0] == "s1:2"


def test_a_store_ranks_by_its_own_retrieval_yaml_unless_a_config_is_given(tmp_path):
    """``retrieval=None`` is the store's own file (what a condition without a benchmark's ranking passes);
    a given config wins over the file; a store without a file ranks by the defaults."""
    from lca.layout import StoreLayout

    StoreLayout(tmp_path / "own").retrieval_settings.parent.mkdir(parents=True, exist_ok=True)
    StoreLayout(tmp_path / "own").retrieval_settings.write_text("context_weight: 0.5\nsentence_keys: on\n")
    own = RetrievalConfig(context_weight=0.5, sentence_keys=True)
    given = RetrievalConfig(bm25_weight=0.25)
    for root, retrieval, expected in (
        ("own", None, own),
        ("own", given, given),
        ("bare", None, RetrievalConfig()),
    ):
        with Substrate(tmp_path / root, embedder=FakeHashingEmbedder(), retrieval=retrieval) as s:
            assert s.index.retrieval == expected, (root, retrieval)
