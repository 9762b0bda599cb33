"""What the ranking reads from the chunks' texts beyond the indexes, per catalog generation: every chunk's
term counts (the BM25 of a chunk's window read as one document), its adjacent term pairs (the phrase
signal), its terms in order (lexical feedback) and which chunks say when something happened. All are
derived from the catalog's texts when a signal first asks for them, never stored."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lca.errors import DerivedStoreDamagedError
from lca.index.catalog import Catalog
from lca.index.frames import StoreStructure
from lca.index.lexical import Bm25LexicalIndex, TermPairs, TermPostings
from lca.retrieval import RetrievalConfig
from lca.retrieval.signals import window_bm25
from lca.temporal_anchor import tells_time


@dataclass(frozen=True)
class StoreText:
    """One store's texts as a search sees them: its catalog, lexical index and structure at one generation."""

    catalog: Catalog
    lexical: Bm25LexicalIndex
    structure: StoreStructure
    generation: str

    def texts(self) -> list[str]:
        """Every chunk's text in structure order (the lexical corpus), checked against the structure's rows."""
        rows, texts = self.catalog.lexical_corpus()
        if not np.array_equal(np.asarray(rows, dtype=np.int64), self.structure.rows):
            raise DerivedStoreDamagedError(self.catalog.path, "the chunk rows moved while they were read")
        return list(texts)


class TextFacts:
    """Per-generation caches of what the text-reading signals need; a new generation starts them over."""

    def __init__(self) -> None:
        self._terms: tuple[str, list[np.ndarray], int] | None = None
        self._postings: tuple[str, TermPostings] | None = None
        self._pairs: tuple[str, TermPairs] | None = None
        self._told: tuple[str, dict[int, bool]] = ("", {})

    def _sequences(self, source: StoreText) -> tuple[list[np.ndarray], int]:
        """Every chunk's indexed terms in order and the vocabulary's size: the one pass of the lexical
        tokenizer over the texts per generation that the postings, the pairs and the feedback terms share."""
        if self._terms is None or self._terms[0] != source.generation:
            self._terms = (source.generation, *source.lexical.term_sequences(source.texts()))
        return self._terms[1], self._terms[2]

    def _term_postings(self, source: StoreText) -> TermPostings:
        if self._postings is None or self._postings[0] != source.generation:
            sequences, vocabulary = self._sequences(source)
            self._postings = (source.generation, TermPostings.from_sequences(sequences, vocabulary, len(sequences)))
        return self._postings[1]

    def window_lexical(self, source: StoreText, query: str, config: RetrievalConfig) -> np.ndarray:
        """Per chunk (structure order), the BM25 of its context window read as one document
        (``lca.retrieval.signals.window_bm25``)."""
        lexical = source.lexical
        postings = self._term_postings(source)
        return window_bm25(
            postings.term_frequencies(lexical.query_terms(query)),
            postings.lengths,
            source.structure.session,
            source.structure.seq,
            config.context_before,
            config.context_after,
            k1=lexical.k1,
            b=lexical.b,
        )

    def phrase_matches(self, source: StoreText, query: str, positions: np.ndarray) -> np.ndarray:
        """Per chunk at these structure positions, how many of the query's adjacent term pairs it holds
        adjacent and in order (``TermPairs``)."""
        if self._pairs is None or self._pairs[0] != source.generation:
            self._pairs = (source.generation, TermPairs.from_sequences(*self._sequences(source)))
        return self._pairs[1].matches(source.lexical.query_terms(query), positions)

    def feedback_terms(self, source: StoreText, query: str, top: np.ndarray, count: int) -> list[int]:
        """The ``count`` terms most distinctive of the chunks at structure positions ``top`` and not in the query:
        by the sum over those chunks of (its count of the term / its length) x the term's idf, ties by term id."""
        sequences, _ = self._sequences(source)
        postings = self._term_postings(source)
        asked = set(source.lexical.query_terms(query))
        weight: dict[int, float] = {}
        for position in top.tolist():
            terms = sequences[position]
            if len(terms):
                unique, counts = np.unique(terms, return_counts=True)
                shares = counts / len(terms) * postings.idf(unique)
                for term, share in zip(unique.tolist(), shares.tolist(), strict=True):
                    if term not in asked:
                        weight[term] = weight.get(term, 0.0) + share
        return sorted(weight, key=lambda term: (-weight[term], term))[:count]

    def tells_time(self, source: StoreText, positions: np.ndarray) -> np.ndarray:
        """Which chunks at these structure positions say when something happened
        (``lca.temporal_anchor.tells_time``): read from their texts when first asked, kept per generation."""

        if self._told[0] != source.generation:
            self._told = (source.generation, {})
        told = self._told[1]
        rows = [int(r) for r in source.structure.rows[positions]]
        missing = [r for r in rows if r not in told]
        if missing:
            for row, chunk in source.catalog.chunks_by_rows(missing).items():
                told[row] = tells_time(chunk.text)
        return np.array([told.get(r, False) for r in rows], dtype=bool)
