"""Window keys (a turn embedded with its session neighbours), the phrase signal and lexical feedback: what the
store keeps, when it writes a key again, how a failure is counted, and how each moves a ranking only while it
is weighed."""

from __future__ import annotations

import numpy as np
import pytest

from lca.index.lexical import Bm25LexicalIndex, TermPairs
from lca.index.window_keys import fitted_windows
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

KEYED = RetrievalConfig(window_keys=True, window_key_before=1, window_key_after=1)
PLAIN = RetrievalConfig(fusion="z", anchor_weight=0, feedback_weight=0)


def keys_by_entry(s: Substrate) -> dict[str, str]:
    """entry id -> the text of its window key."""
    rows = s.index.catalog_.db.execute(
        "SELECT c.entry_id, t.text FROM window_keys w JOIN chunks c ON w.chunk_id=c.chunk_id "
        "JOIN texts t ON w.text_hash=t.text_hash"
    ).fetchall()
    return dict(rows)


def test_a_window_is_the_turn_with_its_neighbours_narrowed_to_what_the_embedder_reads():
    texts = ["a", "b", "c", "d"]  # the fake counts a word and two special tokens: "a\nb" is 4 tokens
    wide = fitted_windows(texts, [0, 2, 3], 2, 1, FakeHashingEmbedder(max_input_tokens=40))
    assert wide == {0: "a\nb", 2: "a\nb\nc\nd", 3: "b\nc\nd"}
    assert fitted_windows(["alone"], [0], 2, 1, FakeHashingEmbedder()) == {0: None}
    assert fitted_windows(texts, [1], 0, 0, FakeHashingEmbedder()) == {1: None}
    # at 5 tokens the turn after goes first, then the farthest before; at 3 only the turn is left
    assert fitted_windows(texts, [2, 1], 2, 1, FakeHashingEmbedder(max_input_tokens=5)) == {2: "a\nb\nc", 1: "a\nb\nc"}
    assert fitted_windows(texts, [3], 2, 1, FakeHashingEmbedder(max_input_tokens=4)) == {3: "c\nd"}
    assert fitted_windows(texts, [1], 1, 1, FakeHashingEmbedder(max_input_tokens=4)) == {1: "a\nb"}
    assert fitted_windows(texts, [2], 2, 1, FakeHashingEmbedder(max_input_tokens=3)) == {2: None}


def test_a_later_turn_rewrites_the_keys_whose_window_it_enters_and_only_those(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), retrieval=KEYED) as s:
        s.append([make_entry("s1", i, f"turn {i}") for i in (1, 2, 3)])
        s.append([make_entry("solo", 1, "a session of one turn")])
        keys = keys_by_entry(s)
        assert keys == {"s1:1": "turn 1\nturn 2", "s1:2": "turn 1\nturn 2\nturn 3", "s1:3": "turn 2\nturn 3"}
        generation = s.index.catalog_.get_meta("chunks_generation")
        s.append([make_entry("s1", 4, "turn 4")])
        after = keys_by_entry(s)
        assert after["s1:3"] == "turn 2\nturn 3\nturn 4" and after["s1:4"] == "turn 3\nturn 4"
        assert {e: after[e] for e in ("s1:1", "s1:2")} == {e: keys[e] for e in ("s1:1", "s1:2")}
        assert s.index.catalog_.get_meta("chunks_generation") != generation
        assert s.index.catalog_.stats()["window_keys"] == 4
        texts = {t for (t,) in s.index.catalog_.db.execute("SELECT text FROM texts")}
        assert "turn 2\nturn 3" not in texts  # s1:3's old window went with the write's clean-up of unused texts
        assert len(s.index.vectors) == len(texts)
        assert s.health().healthy
        s.reindex()  # derived: rebuilt from the transcript, the same keys come back
        assert keys_by_entry(s) == after


def test_window_keys_are_off_by_default_and_not_a_chunks_own_key(tmp_path):
    with Substrate(tmp_path / "plain", embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s1", i, f"turn {i}") for i in (1, 2)])
        assert s.index.catalog_.stats()["window_keys"] == 0
    with Substrate(tmp_path / "keyed", embedder=FakeHashingEmbedder(), retrieval=KEYED) as s:
        s.append([make_entry("s1", i, f"turn {i}") for i in (1, 2, 3)])
        hits = s.search("turn 2", k=5, mode="dense")
        assert sorted(h.pointer.entry_id for h in hits) == ["s1:1", "s1:2", "s1:3"]  # one hit per turn, no window
        assert hits[0].pointer.entry_id == "s1:2" and "\n" not in hits[0].text


def test_a_window_key_that_cannot_be_embedded_is_counted_and_its_turn_still_indexed(tmp_path):
    class FakeFailsOnWindows(FakeHashingEmbedder):
        def embed(self, texts):
            if any("\n" in t for t in texts):
                raise RuntimeError("fake embedder failure")
            return super().embed(texts)

    with Substrate(tmp_path, embedder=FakeFailsOnWindows(), retrieval=KEYED) as s:
        s.append([make_entry("s1", i, f"turn {i}") for i in (1, 2)])
        assert s.index.catalog_.stats()["chunks"] == 2 and s.index.catalog_.stats()["window_keys"] == 0
        assert s.index.catalog_.counters()["window_key_failures"] == 2
        hits = s.index.search("turn 2", k=2, config=PLAIN.with_overrides(["window_key_weight=1"]))
        assert hits[0].pointer.entry_id == "s1:2"  # without window keys a turn is weighed by its own keys


def test_the_window_key_lifts_the_turn_whose_neighbour_holds_what_the_query_asks(tmp_path):
    turns = [
        make_entry("s1", 1, "Which sport did you take up after moving to Lisbon last spring?"),
        make_entry("s1", 2, "Surfing, mostly at weekends."),
        make_entry("s2", 1, "Tax forms are due soon."),
        make_entry("s2", 2, "Remember to water the plants."),
    ]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(dimension=256, max_input_tokens=200), retrieval=KEYED) as s:
        s.append(turns)
        query = "what sport after moving to Lisbon"
        plain = PLAIN.with_overrides(["bm25_weight=0"])
        weighed = plain.with_overrides(["window_key_weight=2", "question_weight=3"])
        without = plain.with_overrides(["question_weight=3"])
        assert [h.pointer.entry_id for h in s.index.search(query, k=4, config=without)][0] != "s1:2"
        assert [h.pointer.entry_id for h in s.index.search(query, k=4, config=weighed)][0] == "s1:2"


def test_term_pairs_count_each_adjacent_ordered_query_pair_a_text_holds():
    lexical = Bm25LexicalIndex()
    texts = ["the red car parked outside", "a car that is red", "red car red car", "nothing here"]
    lexical.build([1, 2, 3, 4], texts, "g")
    pairs = lexical.term_pairs(texts)
    assert isinstance(pairs, TermPairs)
    query = lexical.query_terms("red car parked")
    assert pairs.matches(query).tolist() == [2.0, 0.0, 1.0, 0.0]  # order matters; a repeated pair counts once
    assert pairs.matches(lexical.query_terms("car")).tolist() == [0.0] * 4  # one term makes no pair
    assert np.array_equal(lexical.term_pairs([]).matches(query), np.zeros(0))


def test_the_phrase_weight_lifts_the_turn_that_says_the_querys_words_in_its_order(tmp_path):
    turns = [
        make_entry("s1", 1, "The garden party was cancelled, so we baked bread instead."),
        make_entry("s1", 2, "We baked a cake for the party in the garden."),
    ]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(dimension=256, max_input_tokens=200)) as s:
        s.append(turns)
        query = "Was the garden party cancelled?"
        scores = {
            weight: {
                h.pointer.entry_id: h.score
                for h in s.index.search(query, k=2, config=PLAIN.with_overrides([f"phrase_weight={weight}"]))
            }
            for weight in (0, 1.5)
        }
        # "garden party" and "party cancelled" are adjacent in s1:1 only: it gains 2 x 1.5, s1:2 nothing
        assert scores[1.5]["s1:1"] - scores[0]["s1:1"] == pytest.approx(3.0)
        assert scores[1.5]["s1:2"] == pytest.approx(scores[0]["s1:2"])


def test_lexical_feedback_adds_the_top_turns_most_distinctive_terms_to_the_bm25_side(tmp_path):
    turns = [
        make_entry("s1", 1, "I joined the surf club in Ericeira, the surf club by the harbour."),
        make_entry("s2", 1, "Ericeira has cold water all year."),
        make_entry("s3", 1, "The chess club meets on Tuesdays."),
    ]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(dimension=256, max_input_tokens=200)) as s:
        s.append(turns)
        index = s.index
        text = index.store_text()
        query = "which surf club did I join"
        first = int(np.flatnonzero(text.structure.rows == text.structure.rows.min())[0])  # s1:1, the top turn
        terms = index.text_facts.feedback_terms(text, query, np.array([first]), 2)
        words = {index.lexical.tokenizer_.word_to_id[w] for w in ("ericeira", "harbour")}
        assert set(terms) == words  # the query's own terms (surf, club, join) are never added
        plain = PLAIN.with_overrides(["feedback_depth=1"])
        fed = plain.with_overrides(["lexical_feedback_weight=1", "feedback_terms=2"])
        scores = {
            name: {h.pointer.entry_id: h.score for h in index.search(query, k=3, config=config)}
            for name, config in (("plain", plain), ("fed", fed))
        }
        lift = {e: scores["fed"][e] - scores["plain"][e] for e in scores["plain"]}
        assert lift["s2:1"] > lift["s3:1"]  # s2 shares "Ericeira" with the top turn, s3 only "club" with the query
