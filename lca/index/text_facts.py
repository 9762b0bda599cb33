"""What the ranking reads from the chunks' texts beyond the indexes, per catalog generation: every chunk's
term counts (the BM25 of a chunk's window read as one document) and which chunks say when something
happened. Both are derived from the catalog's texts when a signal first asks for them, never stored."""

from __future__ import annotations

import numpy as np

from lca.errors import DerivedStoreDamagedError
from lca.index.catalog import Catalog
from lca.index.frames import StoreStructure
from lca.index.lexical import Bm25LexicalIndex, TermPostings
from lca.retrieval import RetrievalConfig
from lca.retrieval.signals import window_bm25


class TextFacts:
    """Per-generation caches of what the window and when signals read; a new generation starts them over."""

    def __init__(self) -> None:
        self._postings: tuple[str, TermPostings] | None = None
        self._told: tuple[str, dict[int, bool]] = ("", {})

    def window_lexical(
        self,
        catalog: Catalog,
        lexical: Bm25LexicalIndex,
        structure: StoreStructure,
        generation: str,
        query: str,
        config: RetrievalConfig,
    ) -> np.ndarray:
        """Per chunk (structure order), the BM25 of its context window read as one document
        (``lca.retrieval.signals.window_bm25``): one pass of the lexical tokenizer over the texts per
        generation."""
        if self._postings is None or self._postings[0] != generation:
            rows, texts = catalog.lexical_corpus()
            if not np.array_equal(np.asarray(rows, dtype=np.int64), structure.rows):
                raise DerivedStoreDamagedError(catalog.path, "the chunk rows moved while they were read")
            self._postings = (generation, lexical.term_postings(texts))
        postings = self._postings[1]
        return window_bm25(
            postings.term_frequencies(lexical.query_terms(query)),
            postings.lengths,
            structure.session,
            structure.seq,
            config.context_before,
            config.context_after,
            k1=lexical.k1,
            b=lexical.b,
        )

    def tells_time(
        self, catalog: Catalog, structure: StoreStructure, generation: str, positions: np.ndarray
    ) -> np.ndarray:
        """Which chunks at these structure positions say when something happened
        (``lca.temporal_anchor.tells_time``): read from their texts when first asked, kept per generation."""
        from lca.temporal_anchor import tells_time

        if self._told[0] != generation:
            self._told = (generation, {})
        told = self._told[1]
        rows = [int(r) for r in structure.rows[positions]]
        missing = [r for r in rows if r not in told]
        if missing:
            for row, chunk in catalog.chunks_by_rows(missing).items():
                told[row] = tells_time(chunk.text)
        return np.array([told.get(r, False) for r in rows], dtype=bool)
