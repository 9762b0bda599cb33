"""A recall's token tally: each rendered text counted once, in batches where the counter takes several, and the fit
check stopping at the first overflow."""

from __future__ import annotations

from lca.recall.tokens import FIT_BATCH, TokenTally


class FakeWordCounter:
    """Counts words plus one (a token a word and a header token); records every call."""

    def __init__(self) -> None:
        self.single: list[str] = []
        self.batches: list[list[str]] = []

    def count(self, text: str) -> int:
        self.single.append(text)
        return len(text.split()) + 1

    def count_many(self, texts):
        self.batches.append(list(texts))
        return [len(t.split()) + 1 for t in texts]


def test_a_text_is_counted_once_per_tally_and_batches_agree_with_single_counts():
    counter = FakeWordCounter()
    tally = TokenTally(counter.count, counter.count_many)
    texts = ["one two", "three four five", "one two"]
    assert tally.many(texts) == [3, 4, 3] and counter.batches == [["one two", "three four five"]]
    assert tally("three four five") == 4 and counter.single == []  # known from the batch
    assert tally("six") == 2 and counter.single == ["six"]
    plain = TokenTally(FakeWordCounter().count)  # no batch counter: one call per text, same counts
    assert plain.many(texts) == [3, 4, 3]


def test_fit_settles_on_words_first_then_counts_longest_first_and_stops_at_the_overflow():
    counter = FakeWordCounter()
    tally = TokenTally(counter.count, counter.count_many)
    many_words = ["w " * 30] * 3
    assert not tally.fit(many_words, budget=50) and counter.batches == []  # 90 words > 50: no tokenizer call
    texts = [f"t{n} " + "w " * (n % 5) for n in range(3 * FIT_BATCH)]
    words = sum(len(t.split()) for t in texts)
    assert tally.fit(texts, budget=words + len(texts)) and sum(map(len, counter.batches)) == len(texts)
    counter.batches.clear()
    fresh = TokenTally(counter.count, counter.count_many)
    assert not fresh.fit(texts, budget=words) and len(counter.batches) < 3  # the first batches overflow it
    assert [len(b) for b in counter.batches][0] == FIT_BATCH
    assert max(len(t) for t in counter.batches[0]) == max(len(t) for t in texts)  # longest first
