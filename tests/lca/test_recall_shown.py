"""What of a chosen candidate recall shows: excerpts of long turns, and the turn a reply answers (lca.recall.shown)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lca.recall import RecallConfig, RecallContext
from lca.recall.shown import GAP, excerpt, segments, term_stems, trim
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

LONG = (
    "Good call setting those rules before the first buyer. Here is what to pin down next.\n"
    "1. A trade price list, one price per item.\n"
    "2. A terms sheet with the minimum order and lead times.\n"
    "3. The home-check said the back fence needs to be at least 1.8 metres high.\n"
    "4. Samples and photos for cafés.\n"
    "Where are your retail prices at the moment? That is the easiest place to start."
)


def test_segments_cover_the_text_and_keep_decimals_whole():
    spans = segments(LONG)
    assert "".join(LONG[a:b] for a, b in spans) == LONG  # nothing lost between segments
    ends_line = next(LONG[a:b] for a, b in spans if "pin down next" in LONG[a:b])
    assert ends_line.endswith("next.\n")  # a sentence that ends a line keeps its line break
    assert any("1.8 metres" in LONG[a:b] for a, b in spans)
    assert all(LONG[a:b].strip() for a, b in spans)


def test_excerpt_keeps_the_opening_and_the_sentences_with_the_query_terms():
    shown, cut = excerpt(LONG, 200, term_stems("How high did the home check say fences must be?"))
    assert cut and len(shown) <= 200
    assert shown.startswith("Good call setting those rules")
    assert "back fence needs to be at least 1.8 metres high" in shown
    assert GAP.strip() in shown and "terms sheet" not in shown
    # the same text trimmed from its start never reaches the fence
    assert "fence" not in trim(LONG, 200)[0]


def test_excerpt_falls_back_to_the_opening_without_a_query_term_or_a_reader():
    assert excerpt(LONG, 200, term_stems("zebras")) == trim(LONG, 200)
    assert excerpt(LONG, 200, frozenset()) == trim(LONG, 200)
    assert excerpt("short text", 200, term_stems("short")) == ("short text", False)


def test_term_stems_read_words_as_the_lexical_index_does():
    from lca.index.lexical import Bm25LexicalIndex

    text = "The Fences were HIGH, and a 1.8 m fence; lurchers can clear anything lower."
    assert term_stems(text) >= {"fenc", "high"} and not term_stems(text) & {"the", "and", "a", "m", "1", "8"}
    index = Bm25LexicalIndex()
    index.build([0], [text], "g")
    assert term_stems(text) == set(index.tokenizer_.stem_to_sid) - {""}  # the stems BM25 indexed


def exchange_store(tmp_path, **config) -> Substrate:
    """A reply that says what its short prompt asked for. Exchanges as such: with reply_inheritance the prompt
    scores as its reply and outranks it (the reply's K), and at a quota of one it is picked alone
    (tests/lca/test_recall_pairing.py)."""
    config = {"reply_inheritance": 0.0, **config}
    base = RecallConfig(floor=0.0, transcript_quota=1, memory_quota=0, fit_budget=False, **config)
    s = Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=base)
    assistant = EntryKind.ASSISTANT_TURN
    s.append(
        [
            make_entry("s", 1, "Make those ones twenty instead."),
            make_entry("s", 2, "Updated: pasta bowls trade price twenty pounds, kiln losses covered.", kind=assistant),
            make_entry("s", 3, "unrelated chatter about the weather"),
        ]
    )
    s.ingest()
    return s


def test_a_recalled_reply_brings_the_turn_it_answers_outside_the_quota(tmp_path):
    with exchange_store(tmp_path) as s:
        result = s.recall(RecallContext("pasta bowls trade price kiln"))
        sources = [i.source.split("[")[0] for i in result.items]
        assert sources == ["transcript:s#s:1", "transcript:s#s:2"]  # the prompt first, in conversation order
        prompt = result.items[0]
        assert prompt.prompt_of == result.items[1].chunk_id and prompt.why_not is None
        assert result.tokens == sum(i.tokens for i in result.items)
        off = s.recall(RecallContext("pasta bowls trade price kiln"), config=replace(s.recall_config, exchanges=False))
        assert [i.source.split("[")[0] for i in off.items] == ["transcript:s#s:2"]


def test_a_prompt_the_context_shows_or_that_costs_more_than_the_reply_stays_out(tmp_path):
    with exchange_store(tmp_path) as s:
        shown = s.recall(RecallContext("pasta bowls trade price kiln", shown=("s#s:1",)))
        assert [i.source.split("[")[0] for i in shown.items] == ["transcript:s#s:2"]
        # a budget with no room for the prompt: the reply alone
        both = s.recall(RecallContext("pasta bowls trade price kiln")).items
        tight = replace(s.recall_config, token_budget=both[1].tokens + both[0].tokens - 1)
        reply_only = s.recall("pasta bowls trade price kiln", config=tight)
        assert [i.source.split("[")[0] for i in reply_only.items] == ["transcript:s#s:2"]
    with Substrate(tmp_path / "long", embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0)) as s:
        s.append(  # the prompt is one chunk (a longer turn's last chunk can be short), longer than the reply
            [
                make_entry("t", 1, "a long preamble " + "about many other things " * 8),
                make_entry("t", 2, "pasta bowls twenty", kind=EntryKind.ASSISTANT_TURN),
            ]
        )
        s.ingest()
        result = s.recall(RecallContext("pasta bowls twenty"), config=replace(s.recall_config, fit_budget=False))
        assert any(i.source.startswith("transcript:t#t:2") for i in result.items)  # the reply is recalled ...
        assert all(i.prompt_of is None for i in result.items)  # ... without its page-long prompt


def test_a_reply_to_a_replaced_turn_is_not_brought_as_the_next_turns_prompt(tmp_path):
    """The user's turn about the course follows the agent's reply to the start time a later event corrected; that
    reply restates the old time, so it is not brought with the turn (it still competes on its own score: a reply to
    a corrected detail is penalized, not filtered)."""
    base = RecallConfig(floor=0.0, transcript_quota=1, memory_quota=0, fit_budget=False, reply_inheritance=0.0)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=base) as s:
        assistant = EntryKind.ASSISTANT_TURN
        s.append(
            [
                make_entry("s", 1, "We start the swim at half past eight from the slipway."),
                make_entry("s", 2, "Half past eight on slack water is the right instinct.", kind=assistant),
                make_entry("s", 3, "Course is out to the green buoy off Kettle Rock and back."),
                make_entry(
                    "s",
                    4,
                    "Correction: we start at quarter past eleven on the flood tide, not half past eight.",
                    meta={"event": {"type": "correction", "of": "s#s:1"}},
                ),
            ]
        )
        s.ingest()
        question = RecallContext("the course out to the green buoy off Kettle Rock")
        ledger = s.recall(question)
        assert [i.source.split("[")[0] for i in ledger.items] == ["transcript:s#s:3"]
        plain = s.recall(question, config=replace(base, turn_supersession=False))  # no event read: it is brought
        assert [i.source.split("[")[0] for i in plain.items] == ["transcript:s#s:2", "transcript:s#s:3"]
        assert plain.items[0].prompt_of == plain.items[1].chunk_id


def test_chunks_before_is_the_last_chunk_of_the_entry_before_in_the_same_session(tmp_path):
    def start(hit) -> int:  # where a chunk starts in its turn, from its pointer's span
        return int(hit.pointer.key().rpartition("[")[2].split(":")[0])

    embedder = FakeHashingEmbedder(max_input_tokens=12)  # a long turn splits into several chunks
    with Substrate(tmp_path, embedder=embedder) as s:
        s.append(
            [
                make_entry("s", 1, "please look up the opening hours of the library on Saturday"),
                make_entry(
                    "s",
                    2,
                    "the library opens at nine and closes at five on Saturday and Sunday mornings",
                    kind=EntryKind.ASSISTANT_TURN,
                ),
                make_entry("t", 1, "another session entirely"),
            ]
        )
        s.ingest()
        turns: dict[str, list] = {}
        for hit in s.search("library opens nine closes five saturday hours session", k=50):
            turns.setdefault(hit.pointer.entry_id, []).append(hit)
        question, reply, other = (sorted(turns[e], key=start) for e in ("s:1", "s:2", "t:1"))
        assert len(question) > 1 and len(reply) > 1
        everything = [h.chunk_id for h in question + reply + other] + ["no-such-chunk"]
        before = s.index.chunks_before(everything)
        assert before[reply[0].chunk_id] == question[-1].chunk_id
        # a turn's later chunks, a session's first, and a chunk the store does not hold have none
        assert set(before) == {reply[0].chunk_id}


@pytest.mark.parametrize("cap", [120, 200])
def test_recalled_items_stay_within_the_cap(tmp_path, cap):
    embedder = FakeHashingEmbedder(max_input_tokens=400)  # the whole turn is one chunk
    with Substrate(tmp_path, embedder=embedder, recall_config=RecallConfig(floor=0.0)) as s:
        s.append([make_entry("s", 1, LONG, kind=EntryKind.ASSISTANT_TURN)])
        s.ingest()
        result = s.recall(RecallContext("fence high"), config=replace(s.recall_config, item_char_cap=cap))
        assert result.items and all(len(i.text) <= cap for i in result.items)
        assert result.items[0].trimmed and "fence" in result.items[0].text
