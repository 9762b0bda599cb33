"""Counting a recall's rendered items against its budget: each text once per recall, in batches where the counter
takes them (the tokenizer's fixed cost is paid per call, and a batch runs on every core)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

FIT_BATCH = 8  # texts per tokenizer call when checking whether candidates fit: about the number a budget holds


class TokenTally:
    """Tokens of rendered items within one recall; ``count_many`` (optional) counts several texts in one call and
    must agree with ``count`` text by text."""

    def __init__(self, count: Callable[[str], int], count_many: Callable[[Sequence[str]], list[int]] | None = None):
        self.count = count
        self.count_many = count_many
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if text not in self._known:
            self._known[text] = self.count(text)
        return self._known[text]

    def many(self, texts: Sequence[str]) -> list[int]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._known))
        if todo:
            counted = self.count_many(todo) if self.count_many is not None else [self.count(t) for t in todo]
            self._known.update(zip(todo, (int(n) for n in counted), strict=True))
        return [self._known[t] for t in texts]

    def fit(self, texts: Sequence[str], budget: int) -> bool:
        """Whether ``texts`` fit ``budget`` together. A text has at least a token per word for the tokenizers
        budgets are counted with (WordPiece, byte-level BPE, SentencePiece), so more words than the budget settle
        it without the tokenizer (most recalls over a large store); else they are counted longest first, in
        batches, which shows an overflow sooner and sums the same."""
        if sum(len(text.split()) for text in texts) > budget:
            return False
        ordered = sorted(texts, key=len, reverse=True)
        tokens = 0
        for start in range(0, len(ordered), FIT_BATCH):
            for n in self.many(ordered[start : start + FIT_BATCH]):
                tokens += n
                if tokens > budget:
                    return False
        return True
