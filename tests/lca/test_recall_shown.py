"""What of a chosen candidate recall shows: excerpts of long turns, and the turn a reply answers (lca.recall.shown)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lca.recall import RecallConfig, RecallContext
from lca.recall.shown import GAP, excerpt, segments, trim
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


def words(query_words: set[str]):
    """A term reader over plain lower-case words: a text's terms are the ids of its words in ``query_words``."""
    vocabulary = {w: n for n, w in enumerate(sorted(query_words))}

    def read(texts):
        return [
            np.array([vocabulary[w] for w in t.lower().replace(".", " ").split() if w in vocabulary]) for t in texts
        ]

    return set(vocabulary.values()), read


def test_segments_cover_the_text_and_keep_decimals_whole():
    spans = segments(LONG)
    assert "".join(LONG[a:b] for a, b in spans) == LONG  # nothing lost between segments
    ends_line = next(LONG[a:b] for a, b in spans if "pin down next" in LONG[a:b])
    assert ends_line.endswith("next.\n")  # a sentence that ends a line keeps its line break
    assert any("1.8 metres" in LONG[a:b] for a, b in spans)
    assert all(LONG[a:b].strip() for a, b in spans)


def test_excerpt_keeps_the_opening_and_the_sentences_with_the_query_terms():
    terms, read = words({"fence", "high"})
    shown, cut = excerpt(LONG, 200, terms, read)
    assert cut and len(shown) <= 200
    assert shown.startswith("Good call setting those rules")
    assert "back fence needs to be at least 1.8 metres high" in shown
    assert GAP.strip() in shown and "terms sheet" not in shown
    # the same text trimmed from its start never reaches the fence
    assert "fence" not in trim(LONG, 200)[0]


def test_excerpt_falls_back_to_the_opening_without_a_query_term_or_a_reader():
    terms, read = words({"zebra"})
    assert excerpt(LONG, 200, terms, read) == trim(LONG, 200)
    assert excerpt(LONG, 200, {1}, None) == trim(LONG, 200)
    assert excerpt("short text", 200, terms, read) == ("short text", False)


def exchange_store(tmp_path, **config) -> Substrate:
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
        s.append(
            [
                make_entry("t", 1, "a long preamble " + "about many other things " * 20),
                make_entry("t", 2, "pasta bowls twenty", kind=EntryKind.ASSISTANT_TURN),
            ]
        )
        s.ingest()
        result = s.recall(RecallContext("pasta bowls twenty"), config=replace(s.recall_config, fit_budget=False))
        assert all(i.prompt_of is None for i in result.items)


def test_turn_before_skips_entries_that_are_not_turns(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("s", 1, "please look it up"),
                make_entry("s", 2, "lookup(...)", kind=EntryKind.TOOL_CALL),
                make_entry("s", 3, "here is what I found", kind=EntryKind.ASSISTANT_TURN),
            ]
        )
        assert s.transcript.turn_before("s", "s:3") == "s:1"
        assert s.transcript.turn_before("s", "s:1") is None
        assert s.transcript.turn_before("nope", "s:1") is None


@pytest.mark.parametrize("cap", [120, 200])
def test_recalled_items_stay_within_the_cap(tmp_path, cap):
    embedder = FakeHashingEmbedder(max_input_tokens=400)  # the whole turn is one chunk
    with Substrate(tmp_path, embedder=embedder, recall_config=RecallConfig(floor=0.0)) as s:
        s.append([make_entry("s", 1, LONG, kind=EntryKind.ASSISTANT_TURN)])
        s.ingest()
        result = s.recall(RecallContext("fence high"), config=replace(s.recall_config, item_char_cap=cap))
        assert result.items and all(len(i.text) <= cap for i in result.items)
        assert result.items[0].trimmed and "fence" in result.items[0].text
