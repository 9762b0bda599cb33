"""The lexical index in segments: its scores are bm25s's bit for bit, and an index grown by appends, removals and
merges, saved and loaded between them, scores every query exactly as one rebuilt over the same chunks."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from lca.importers import import_locomo, import_longmemeval
from lca.index.lexical import Bm25LexicalIndex, _tokenizer
from lca.index.segments import MAIN_SHARE, merge_due
from tests.lca.index.stores import FIXTURE, REPO

WORDS = (
    "the a of and to in is was cat cats dog dogs running runs ran visa Lisbon Clara pottery class teacher sprained "
    "wrist custard tarts bakery sourdough Friday kilometres goal sister garden deploy staging approvals rota "
    "harbour Ericeira surf board lessons budget rent flat moving boxes piano scales recital"
).split()


def corpus(count: int, seed: int = 7) -> list[str]:
    """Texts over a skewed vocabulary (some words in most texts, most in few), with an empty text and one of
    stopwords only among them: what bm25s gives the empty token."""
    rng = random.Random(seed)
    rare = [f"term{i}" for i in range(400)]
    texts = []
    for _ in range(count):
        words = [rng.choice(WORDS) if rng.random() < 0.6 else rare[int(rng.paretovariate(1.2)) % 400]]
        words += [
            rng.choice(WORDS) if rng.random() < 0.6 else rare[int(rng.paretovariate(1.2)) % 400]
            for _ in range(rng.randint(0, 30))
        ]
        texts.append(" ".join(words))
    texts[3], texts[11] = "", "the and of a"
    return texts


def fixture_texts() -> list[str]:
    sessions, _ = import_locomo(FIXTURE)
    more, _ = import_longmemeval(REPO / "data" / "fixtures" / "longmemeval_fixture.json", share_sessions=True)
    return [e.content for s in (*sessions, *more) for e in s.entries if e.content.strip()]


def queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS + [f"term{i}" for i in range(60)]) for _ in range(rng.randint(1, 7)))
        for _ in range(count)
    ]


def rebuilt(rows, texts) -> Bm25LexicalIndex:
    index = Bm25LexicalIndex()
    index.build(rows, texts, "rebuilt")
    return index


def assert_scores_as_rebuilt(index: Bm25LexicalIndex, rebuild: Bm25LexicalIndex, asked: list[str]) -> None:
    assert index.rows_.tolist() == rebuild.rows_.tolist()
    for query in asked:
        assert np.array_equal(index.all_scores(query), rebuild.all_scores(query)), query
        found, again = index.search(query, 20), rebuild.search(query, 20)
        assert found[1].tolist() == again[1].tolist() and found[0].tolist() == again[0].tolist()


@pytest.mark.parametrize("source", ["random", "fixtures"])
def test_the_scores_are_bm25s_own_bit_for_bit(source):
    texts = corpus(600) if source == "random" else fixture_texts()
    index = rebuilt(range(1, len(texts) + 1), texts)
    tokenizer = _tokenizer()
    reference = bm25s.BM25(k1=1.5, b=0.75)
    reference.index(
        tokenizer.tokenize(texts, update_vocab=True, return_as="tuple", show_progress=False), show_progress=False
    )
    asked = queries(200) + [t[:60] for t in texts[:40]]
    scored = 0
    for query in asked:
        terms = index.query_terms(query)
        assert terms == [t for t in tokenizer.tokenize([query], update_vocab=False, show_progress=False)[0] if t]
        if terms:
            assert np.array_equal(index.all_scores(query), reference.get_scores_from_ids(terms)), query
            scored += 1
    assert scored > len(asked) // 2


def test_appends_removals_merges_and_reloads_score_as_a_rebuild(tmp_path):
    texts = corpus(1500)
    rows = list(range(10, 10 + 3 * len(texts), 3))  # rows with gaps, as deletions leave them
    asked = queries(150)
    index = rebuilt(rows[:400], texts[:400])
    live = dict(zip(rows[:400], texts[:400]))
    rng = random.Random(5)
    at, turn, most = 400, 0, 0
    while at < len(texts):
        step = rng.choice([1, 7, 20, 33, 90])
        index.append(rows[at : at + step], texts[at : at + step])
        live.update(zip(rows[at : at + step], texts[at : at + step]))
        at, turn = at + step, turn + 1
        if turn % 4 == 1:  # a memory file rewritten: its old chunks go
            gone = rng.sample(sorted(live), 12)
            index.remove(gone)
            for row in gone:
                del live[row]
        if turn % 3 == 0:  # a flush: merges where due, then saved and read back as a reader would
            index.save(tmp_path / "lexical")
            index = Bm25LexicalIndex.load(tmp_path / "lexical")
            most = max(most, len(index.segments_.segments))
        if turn % 5 == 0:
            kept = sorted(live)
            assert_scores_as_rebuilt(index, rebuilt(kept, [live[r] for r in kept]), asked[:30])
    assert turn > 20 and most > 2  # saved and loaded in segments, many times
    kept = sorted(live)
    assert_scores_as_rebuilt(index, rebuilt(kept, [live[r] for r in kept]), asked)


def test_appends_alone_give_the_rebuilds_term_ids(tmp_path):
    """Without removals the vocabulary is the rebuild's too: the text signals' term ids (phrases, feedback terms
    ordered by id on ties) read the same."""
    texts = corpus(300)
    index = rebuilt(range(100), texts[:100])
    for start in range(100, 300, 20):
        index.append(range(start, start + 20), texts[start : start + 20])
        index.save(tmp_path / "lexical")
        index = Bm25LexicalIndex.load(tmp_path / "lexical")
    rebuild = rebuilt(range(300), texts)
    assert index.tokenizer_.stem_to_sid == rebuild.tokenizer_.stem_to_sid
    assert [s.tolist() for s in index.term_sequences(texts)[0]] == [
        s.tolist() for s in rebuild.term_sequences(texts)[0]
    ]


def test_an_append_refuses_rows_that_are_not_past_the_index():
    index = rebuilt([5, 6], ["cat", "dog"])
    with pytest.raises(ValueError, match="not past the indexed rows"):
        index.append([6], ["bird"])


def test_merges_keep_the_small_segments_few_and_fold_them_in_at_a_share_of_the_first():
    texts = corpus(2400)
    index = rebuilt(range(1600), texts[:1600])
    most = 0
    for start in range(1600, 1780, 20):  # 9 appends of 20: below an eighth of the first segment
        index.append(range(start, start + 20), texts[start : start + 20])
        index.segments_ = merge_due(index.segments_)
        most = max(most, len(index.segments_.segments))
        assert len(index.segments_.segments[0]) == 1600  # the first is untouched
    assert 2 < most <= 1 + 4  # about log2(9) small segments, never one per append
    index.append(range(1780, 1800 + int(MAIN_SHARE * 1600)), texts[1780 : 1800 + int(MAIN_SHARE * 1600)])
    index.remove(range(0, 1600, 2))  # half the first segment dead
    index.segments_ = merge_due(index.segments_)
    assert len(index.segments_.segments) == 1 and len(index.segments_.segments[0]) == len(index)  # dead dropped
    kept = [r for r in range(2000) if r >= 1600 or r % 2]
    assert_scores_as_rebuilt(index, rebuilt(kept, [texts[r] for r in kept]), queries(60))
