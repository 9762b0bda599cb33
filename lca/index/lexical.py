"""Lexical BM25 over the same chunks: bm25s's tokenizer and scoring (Lucene variant, k1=1.5, b=0.75) over
segments (``lca.index.segments``), so an ingest adds its chunks as a small segment instead of rebuilding the index.

``generation`` records which catalog state the index reflects; ``synced`` brings a stale one to the catalog by
adding the chunks past its last row and marking dead the ones the catalog no longer holds, which gives the scores
of an index rebuilt over the same chunks. On disk: ``lca.index.lexical_files``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from lca.index.catalog import Catalog
from lca.index.lexical_files import NPY_READS, read_state, write_state
from lca.index.segments import Segment, SegmentSet, merge_due, segment_name, text_crc

__all__ = ["NPY_READS", "Bm25LexicalIndex", "TermPairs", "TermPostings"]


def _tokenizer() -> Tokenizer:
    return Tokenizer(lower=True, stopwords="en", stemmer=Stemmer.Stemmer("english"))


@dataclass(frozen=True)
class TermPostings:
    """Which documents hold each term and how often, and each document's length in terms: what BM25 over a
    group of documents read as one (a chunk's window in its session) needs. Rebuilt from the texts, never
    stored. ``term_frequencies`` gives the counts of some terms as a (documents x terms) array."""

    indptr: np.ndarray  # postings of term t: docs[indptr[t]:indptr[t + 1]]
    docs: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def from_sequences(cls, sequences: Sequence[np.ndarray], vocabulary: int, documents: int) -> TermPostings:
        docs: list[np.ndarray] = []
        terms: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        lengths = np.zeros(documents, dtype=np.float64)
        for doc, kept in enumerate(sequences):
            lengths[doc] = len(kept)
            if len(kept):
                unique, count = np.unique(kept, return_counts=True)
                docs.append(np.full(len(unique), doc, dtype=np.int64))
                terms.append(unique)
                counts.append(count)
        if not docs:
            return cls(np.zeros(vocabulary + 1, dtype=np.int64), np.zeros(0, np.int64), np.zeros(0), lengths)
        doc_of, term_of, count_of = np.concatenate(docs), np.concatenate(terms), np.concatenate(counts)
        order = np.argsort(term_of, kind="stable")
        indptr = np.zeros(vocabulary + 1, dtype=np.int64)
        np.add.at(indptr, term_of + 1, 1)
        return cls(np.cumsum(indptr), doc_of[order], count_of[order].astype(np.float64), lengths)

    def idf(self, terms: np.ndarray) -> np.ndarray:
        """The inverse document frequency of each of ``terms`` (indexed term ids), as BM25 (Lucene) weighs it."""
        df = (self.indptr[terms + 1] - self.indptr[terms]).astype(np.float64)
        return np.log(1.0 + (len(self.lengths) - df + 0.5) / (df + 0.5))

    def term_frequencies(self, terms: Sequence[int]) -> np.ndarray:
        out = np.zeros((len(self.lengths), len(terms)), dtype=np.float64)
        for column, term in enumerate(terms):
            if 0 <= term < len(self.indptr) - 1:
                span = slice(self.indptr[term], self.indptr[term + 1])
                out[self.docs[span], column] = self.counts[span]
        return out


@dataclass(frozen=True)
class TermPairs:
    """Which documents hold each pair of adjacent indexed terms (in order, stopwords already gone), what the
    phrase signal asks of a query's own adjacent terms. Rebuilt from the texts, never stored."""

    codes: np.ndarray  # sorted pair codes (first term x vocabulary + second term), one per document holding it
    docs: np.ndarray
    vocabulary: int
    documents: int

    @classmethod
    def from_sequences(cls, sequences: Sequence[np.ndarray], vocabulary: int) -> TermPairs:
        codes: list[np.ndarray] = []
        docs: list[np.ndarray] = []
        for doc, terms in enumerate(sequences):
            if len(terms) > 1:
                unique = np.unique(terms[:-1] * vocabulary + terms[1:])
                codes.append(unique)
                docs.append(np.full(len(unique), doc, dtype=np.int64))
        if not codes:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), vocabulary, len(sequences))
        code_of, doc_of = np.concatenate(codes), np.concatenate(docs)
        order = np.argsort(code_of, kind="stable")
        return cls(code_of[order], doc_of[order], vocabulary, len(sequences))

    def matches(self, terms: Sequence[int], documents: np.ndarray | None = None) -> np.ndarray:
        """Per document (of ``documents``, distinct, when given), how many distinct adjacent pairs of ``terms`` (a
        query's, in order) it holds adjacent."""
        out = np.zeros(self.documents if documents is None else len(documents), dtype=np.float64)
        pairs = {a * self.vocabulary + b for a, b in zip(terms, terms[1:])}
        order = np.argsort(documents) if documents is not None else None
        for code in pairs:
            lo, hi = np.searchsorted(self.codes, [code, code + 1])
            docs = self.docs[lo:hi]
            if documents is not None and order is not None and len(out):
                at = order[np.minimum(np.searchsorted(documents, docs, sorter=order), len(out) - 1)]
                docs = at[documents[at] == docs]
            out[docs] += 1.0
        return out


class Bm25LexicalIndex:
    """BM25 over chunk rows, in segments; ``rows_[i]`` is the catalog row of live document ``i`` (ascending)."""

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self.tokenizer_ = _tokenizer()
        self.segments_ = SegmentSet()
        self.generation_: str = ""
        self.on_disk_: frozenset[str] = frozenset()  # segments already written where this index was loaded or saved

    @property
    def rows_(self) -> np.ndarray:
        return self.segments_.rows

    def __len__(self) -> int:
        return int(len(self.rows_))

    # ---- writing ---------------------------------------------------------------------------------------------
    def build(self, rows: Sequence[int], texts: Sequence[str], generation: str) -> None:
        """An index of these documents alone, with a vocabulary of its own: what a rebuild makes."""
        self.tokenizer_ = _tokenizer()
        self.segments_ = SegmentSet()
        self.generation_ = generation
        self.append(rows, texts)

    def append(self, rows: Sequence[int], texts: Sequence[str]) -> None:
        """Index documents past every indexed row as one new segment; their new words extend the vocabulary (the
        ids a rebuild over the same documents, in row order, would give them)."""
        if not len(texts):
            return
        if int(rows[0]) <= self.segments_.last_row():
            raise ValueError(f"row {rows[0]} is not past the indexed rows (up to {self.segments_.last_row()})")
        tokenizer = self.tokenizer_
        stems, words = len(tokenizer.stem_to_sid), len(tokenizer.word_to_id)
        ids = tokenizer.tokenize(list(texts), update_vocab=True, return_as="ids", show_progress=False)
        segment = Segment.from_sequences(
            segment_name(),
            rows,
            texts,
            ids,
            first_stem=stems,
            stems=list(islice(tokenizer.stem_to_sid, stems, None)),  # a dict keeps insertion order: id order
            words=dict(islice(tokenizer.word_to_id.items(), words, None)),
        )
        self.segments_ = self.segments_.appended(segment)

    def remove(self, rows: Sequence[int] | np.ndarray) -> None:
        """Mark the documents at ``rows`` dead: left out of every score and statistic, dropped at a merge."""
        self.segments_ = self.segments_.without_rows(np.asarray(rows, dtype=np.int64))

    def synced(self, catalog: Catalog) -> Bm25LexicalIndex:
        """This index if it reflects the catalog's generation, else a new one that does: the chunks past its last
        row appended and the ones the catalog no longer holds marked dead (the generation is read first, so a
        write racing this read leaves the index stale, never stamped newer than it is). Rebuilt whole when its
        last live document is not the catalog's chunk at that row (another catalog) or it holds none."""
        generation = catalog.get_meta("chunks_generation") or ""
        if generation == self.generation_:
            return self
        out = copy.copy(self)
        anchor = self.segments_.anchor()
        if anchor is None or not _holds(catalog, *anchor):
            out.build(*catalog.lexical_corpus(), generation)
            return out
        out.append(*catalog.lexical_corpus(after=self.segments_.last_row()))
        if catalog.chunk_count() != len(out):  # rows are never reused: equal counts, equal sets
            out.remove(np.setdiff1d(out.rows_, np.asarray(catalog.chunk_rows(), dtype=np.int64)))
        out.generation_ = generation
        return out

    # ---- reading ---------------------------------------------------------------------------------------------
    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, rows) with a positive score."""
        if not len(self) or k <= 0:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        known = self.query_terms(query)
        if not known:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        scores = self.term_scores(known)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        # stable order: score descending, then document position
        top = top[np.lexsort((top, -scores[top]))]
        top = top[scores[top] > 0]
        return scores[top].astype(np.float32), self.rows_[top]

    def query_terms(self, query: str) -> list[int]:
        """The query's indexed term ids, as BM25 scores them (a repeated term counts each time)."""
        if not len(self):
            return []
        ids = self.tokenizer_.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        return [int(t) for t in ids if t in self._valid_ids]

    def term_sequences(self, texts: Sequence[str]) -> tuple[list[np.ndarray], int]:
        """Each text's indexed term ids in order under this index's tokenizer and vocabulary (a word it never
        indexed is left out, as a query's would be), and the vocabulary's size."""
        vocabulary = len(self.tokenizer_.stem_to_sid) if len(self) else 0
        if not (texts and vocabulary):
            return [np.zeros(0, np.int64) for _ in texts], vocabulary
        tokenized = self.tokenizer_.tokenize(list(texts), update_vocab=False, return_as="ids", show_progress=False)
        valid = self._valid_ids
        return [np.asarray([t for t in ids if t in valid], dtype=np.int64) for ids in tokenized], vocabulary

    def term_postings(self, texts: Sequence[str]) -> TermPostings:
        """Term counts of ``texts`` (``term_sequences``)."""
        sequences, vocabulary = self.term_sequences(texts)
        return TermPostings.from_sequences(sequences, vocabulary, len(texts))

    def term_pairs(self, texts: Sequence[str]) -> TermPairs:
        """The adjacent term pairs of ``texts`` (``term_sequences``)."""
        return TermPairs.from_sequences(*self.term_sequences(texts))

    def all_scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document, in ``rows_`` order (0 where no query term occurs)."""
        return self.term_scores(self.query_terms(query))

    def term_scores(self, terms: Sequence[int]) -> np.ndarray:
        """The BM25 score of every document for a query of these indexed term ids, in ``rows_`` order."""
        if not len(self) or not terms:
            return np.zeros(len(self.rows_), dtype=np.float32)
        return self.segments_.scores(terms, self.k1, self.b)

    def top_scores(self, terms: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, ascending, and BM25) of the documents scoring at least the ``n``-th best positive score for these
        term ids, ties included, without scoring the rest (``SegmentSet.top_scores``): a bounded search's BM25 side."""
        if not len(self) or not terms or n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        live, scores = self.segments_.top_scores(terms, self.k1, self.b, n)
        return self.rows_[live], scores

    def scores_of_rows(self, terms: Sequence[int], rows: np.ndarray) -> np.ndarray:
        """``term_scores`` of the documents at some rows (0 for a row it does not hold), from the postings alone."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float32)
        if not len(self) or not terms or not len(rows):
            return out
        at = np.minimum(np.searchsorted(self.rows_, rows), len(self) - 1)
        held = self.rows_[at] == rows
        out[held] = self.segments_.scores_at(terms, self.k1, self.b, at[held])
        return out

    @property
    def _valid_ids(self) -> set[int]:
        """Every stem id but the empty token's (what bm25s gives a document with no term)."""
        stems = self.tokenizer_.stem_to_sid
        cached = getattr(self, "_valid_cache", None)
        if cached is None or cached[0] != len(stems):
            valid = set(stems.values())
            valid.discard(stems.get("", -1))
            cached = self._valid_cache = (len(stems), valid)
        return cached[1]

    # ---- on disk ---------------------------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Merge the segments where due (``lca.index.segments.merge_due``), then write what is not on disk yet and
        the manifest that commits it (``lca.index.lexical_files.write_state``)."""
        self.segments_ = merge_due(self.segments_)
        self.on_disk_ = write_state(directory, self.segments_, self.generation_, self.k1, self.b, self.on_disk_)

    @classmethod
    def load(cls, directory: Path) -> Bm25LexicalIndex:
        """The saved index; an empty, stale one where no manifest was committed (rebuilt from the catalog). A file
        the manifest names that cannot be read is a damaged derived store, named: ``lca reindex`` rebuilds it."""
        state = read_state(directory)
        if state is None:
            return cls()
        obj = cls(k1=state.k1, b=state.b)
        obj.segments_, obj.generation_ = state.segments, state.generation
        obj.on_disk_ = frozenset(s.name for s in state.segments.segments)
        obj.tokenizer_.stem_to_sid, obj.tokenizer_.word_to_id = state.stem_ids, state.word_ids
        return obj


def _holds(catalog: Catalog, row: int, digest: int) -> bool:
    """Whether the catalog holds at ``row`` the text whose check value is ``digest``."""
    chunk = catalog.chunks_by_rows([row]).get(row)
    return chunk is not None and text_crc(chunk.text) == digest
