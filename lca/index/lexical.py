"""Lexical BM25 over the same chunks, with bm25s (lucene variant, k1=1.5, b=0.75).

bm25s builds a static index, so the whole index is rebuilt when chunks change;
``generation`` records which catalog state it reflects so a stale index is noticed.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from lca.errors import DerivedStoreDamagedError
from lca.fileio import fsync_dir

# numpy parses a .npy header with ``ast.literal_eval``, which CPython 3.11 does not make safe across threads
# (two loads at once can raise "SystemError: AST constructor recursion depth mismatch"): one load at a time
NPY_READS = threading.Lock()


def _tokenizer() -> Tokenizer:
    return Tokenizer(lower=True, stopwords="en", stemmer=Stemmer.Stemmer("english"))


def _check_arrays(scores: dict) -> None:
    """bm25s's sparse score matrix must hold together, or a search would index out of bounds later."""
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    if len(indptr) == 0 or int(indptr[-1]) != len(indices) or len(data) != len(indices):
        raise ValueError("the score arrays disagree in length")
    if len(indices) and (int(indices.max()) >= int(scores["num_docs"]) or int(indices.min()) < 0):
        raise ValueError("a score points past the indexed documents")


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

    def matches(self, terms: Sequence[int]) -> np.ndarray:
        """Per document, how many distinct adjacent pairs of ``terms`` (a query's, in order) it holds adjacent."""
        out = np.zeros(self.documents, dtype=np.float64)
        pairs = {a * self.vocabulary + b for a, b in zip(terms, terms[1:])}
        for code in pairs:
            lo, hi = np.searchsorted(self.codes, [code, code + 1])
            out[self.docs[lo:hi]] += 1.0
        return out


class Bm25LexicalIndex:
    """BM25 over chunk rows; ``rows_[i]`` is the catalog row of document ``i``."""

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self.retriever_ = None
        self.tokenizer_ = _tokenizer()
        self.rows_ = np.empty(0, dtype=np.int64)
        self.generation_: str = ""

    def __len__(self) -> int:
        return int(len(self.rows_))

    def build(self, rows: Sequence[int], texts: Sequence[str], generation: str) -> None:
        self.tokenizer_ = _tokenizer()
        self.rows_ = np.asarray(rows, dtype=np.int64)
        self.generation_ = generation
        if not len(texts):
            self.retriever_ = None
            return
        tokens = self.tokenizer_.tokenize(list(texts), update_vocab=True, return_as="tuple", show_progress=False)
        retriever = bm25s.BM25(k1=self.k1, b=self.b)
        retriever.index(tokens, show_progress=False)
        self.retriever_ = retriever

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, rows) with a positive score."""
        if self.retriever_ is None or k <= 0:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        known = self.query_terms(query)
        if not known:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        scores = self.retriever_.get_scores_from_ids(known)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        # stable order: score descending, then document position
        top = top[np.lexsort((top, -scores[top]))]
        top = top[scores[top] > 0]
        return scores[top].astype(np.float32), self.rows_[top]

    def query_terms(self, query: str) -> list[int]:
        """The query's indexed term ids, as BM25 scores them (a repeated term counts each time)."""
        if self.retriever_ is None:
            return []
        ids = self.tokenizer_.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        return [int(t) for t in ids if t in self._valid_ids]

    def term_sequences(self, texts: Sequence[str]) -> tuple[list[np.ndarray], int]:
        """Each text's indexed term ids in order under this index's tokenizer and vocabulary (a word it never
        indexed is left out, as a query's would be), and the vocabulary's size."""
        word_ids = self.tokenizer_.word_to_id.values() if self.retriever_ is not None else ()
        vocabulary = max(word_ids, default=-1) + 1
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
        if self.retriever_ is None or not terms:
            return np.zeros(len(self.rows_), dtype=np.float32)
        return np.asarray(self.retriever_.get_scores_from_ids(list(terms)), dtype=np.float32)

    @property
    def _valid_ids(self) -> set[int]:
        cached = getattr(self, "_valid_cache", None)
        if cached is None or cached[0] is not self.retriever_:
            words = set(self.tokenizer_.word_to_id.values())
            words.discard(self.tokenizer_.word_to_id.get("", -1))
            cached = (self.retriever_, words)
            self._valid_cache = cached
        return cached[1]

    def save(self, directory: Path) -> None:
        tmp = directory.with_name(directory.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        np.save(tmp / "rows.npy", self.rows_)
        (tmp / "generation.json").write_text(json.dumps({"generation": self.generation_, "k1": self.k1, "b": self.b}))
        if self.retriever_ is not None:
            self.retriever_.save(str(tmp / "bm25"))
            self.tokenizer_.save_vocab(str(tmp / "bm25"))
        old = directory.with_name(directory.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        if directory.exists():
            directory.rename(old)
        tmp.rename(directory)
        fsync_dir(directory.parent)
        if old.exists():
            shutil.rmtree(old)

    @classmethod
    def load(cls, directory: Path) -> Bm25LexicalIndex:
        """The saved index. Any file here that cannot be read, or rows that do not match the documents,
        is a damaged derived store (named), never a traceback: ``lca reindex`` rebuilds it."""
        at = directory / "generation.json"
        try:
            meta = json.loads(at.read_text(encoding="utf-8"))
            obj = cls(k1=float(meta["k1"]), b=float(meta["b"]))
            obj.generation_ = str(meta["generation"])
            with NPY_READS:
                at = directory / "rows.npy"
                obj.rows_ = np.asarray(np.load(at, allow_pickle=False), dtype=np.int64).reshape(-1)
                at = directory / "bm25"
                retriever = obj.retriever_ = bm25s.BM25.load(str(at)) if at.exists() else None
                if retriever is not None:
                    obj.tokenizer_.load_vocab(str(at))
            if retriever is not None:
                _check_arrays(retriever.scores)
                documents = int(retriever.scores["num_docs"])
                if documents != len(obj.rows_):
                    at = directory / "rows.npy"
                    raise ValueError(f"{len(obj.rows_)} rows for {documents} indexed documents")
        except Exception as exc:  # every reader below (json, numpy, bm25s, scipy) has its own error types
            raise DerivedStoreDamagedError(at, f"{type(exc).__name__}: {exc}") from exc
        return obj
