"""Rankers over one list of unit texts: BM25, dense (a unit scores as its best piece), reciprocal-rank fusion and
the hybrid's z fusion with the dataset's signals and Rocchio feedback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from protocols.bench.retrieval.legacy_config import HybridConfig

RRF_K = 60
DEFAULT_CONFIG = HybridConfig()


def znorm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    spread = scores.std()
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)


class UnitIndex:
    """One corpus of units, embedded and BM25-indexed once, scored for many queries."""

    def __init__(self, texts: Sequence[str], embedder, chunker, *, dense: bool = True, sentences: bool = False) -> None:
        from lca.index.chunker import sentence_keys
        from lca.index.lexical import Bm25LexicalIndex

        self.n = len(texts)
        self.embedder = embedder
        self.lexical = Bm25LexicalIndex()
        self.lexical.build(list(range(self.n)), texts, "bench")
        self.vectors = self.owner = self.whole = None
        if dense:
            pieces: list[str] = []
            owner: list[int] = []
            whole: list[bool] = []  # a piece of the unit's own text, not one of its sentence keys
            for i, text in enumerate(texts):
                keys = [(piece.text, True) for piece in chunker.split(text or " ")]
                if sentences:
                    keys += [
                        (piece.text, False)
                        for sentence in sentence_keys(text or "")
                        for piece in chunker.split(sentence)
                    ]
                for key, is_whole in keys:
                    pieces.append(key)
                    owner.append(i)
                    whole.append(is_whole)
            self.vectors = embedder.embed(pieces)
            self.owner = np.asarray(owner)
            self.whole = np.asarray(whole)

    def bm25(self, query: str) -> np.ndarray:
        scores = np.zeros(self.n, dtype=np.float32)
        found, rows = self.lexical.search(query, self.n)
        scores[rows] = found
        return scores

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_query(query), dtype=np.float32)

    def dense(self, query: str | np.ndarray) -> np.ndarray:
        """Cosine to the query (text or unit vector); a unit scores as its best piece (a unit longer than
        the embedder's input has several, and with ``sentences`` each sentence is a piece too)."""
        qvec = self.query_vector(query) if isinstance(query, str) else query
        sims = self.vectors @ qvec
        scores = np.full(self.n, -1.0, dtype=np.float32)
        np.maximum.at(scores, self.owner, sims.astype(np.float32))
        return scores

    def centroid(self, units: Sequence[int]) -> np.ndarray:
        """The mean vector of some units (each the mean of its own text's pieces), for relevance feedback."""
        return np.mean([self.vectors[(self.owner == i) & self.whole].mean(axis=0) for i in units], axis=0)


def ranking_of(scores: np.ndarray) -> list[int]:
    """Descending score, ties by position (stable)."""
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))]


def rrf(*rankings: Sequence[int], n: int) -> list[int]:
    fused = np.zeros(n, dtype=np.float64)
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] += 1.0 / (RRF_K + rank)
    return ranking_of(fused)


@dataclass(frozen=True)
class QuerySignals:
    """What a dataset knows about a query beyond its text, each an array over the units (or None)."""

    anchor: np.ndarray | None = None  # temporal-anchor closeness in [0, 1]
    replies_to: np.ndarray | None = None  # index of the question turn a unit answers, or -1
    asks: np.ndarray | None = None  # 1 for a turn that only asks a question
    speaker: np.ndarray | None = None  # 1 for the turns of the speaker the question names


def hybrid_scores(
    units: UnitIndex,
    query: str,
    config: HybridConfig,
    *,
    context: UnitIndex | None = None,
    signals: QuerySignals = QuerySignals(),
    dense_query: str | None = None,
) -> np.ndarray:
    """z fusion of dense and BM25 (and the context key), then the query's signals, then one round of
    Rocchio feedback on the dense side when ``config.feedback_weight`` is set. ``dense_query`` is the
    text embedded for the dense side when it differs from the BM25 query (default: ``query``)."""
    bm25 = znorm(units.bm25(query))
    context_bm25 = znorm(context.bm25(query)) if context is not None else None

    def fuse(qvec: np.ndarray) -> np.ndarray:
        fused = znorm(units.dense(qvec)) + config.bm25_weight * bm25
        if context is not None:
            fused += config.context_weight * (znorm(context.dense(qvec)) + config.bm25_weight * context_bm25)
        if signals.anchor is not None:
            fused += config.anchor_weight * signals.anchor
        if signals.asks is not None and config.question_weight:
            fused -= config.question_weight * signals.asks  # before the reply inherits from its question
        if signals.replies_to is not None and config.reply_weight:
            asked = signals.replies_to >= 0
            fused[asked] += config.reply_weight * np.maximum(fused[signals.replies_to[asked]], 0.0)
        if signals.speaker is not None and config.speaker_weight:
            fused += config.speaker_weight * signals.speaker
        return fused

    qvec = units.query_vector(query if dense_query is None else dense_query)
    fused = fuse(qvec)
    if config.feedback_weight:
        top = ranking_of(fused.astype(np.float32))[: config.feedback_depth]
        moved = qvec + config.feedback_weight * units.centroid(top)
        fused = fuse((moved / np.linalg.norm(moved)).astype(np.float32))
    return fused


def rank_units(
    units: UnitIndex,
    query: str,
    retriever: str,
    resonance: Callable[[], list[int]] | None = None,
    *,
    config: HybridConfig = DEFAULT_CONFIG,
    context: UnitIndex | None = None,
    signals: QuerySignals = QuerySignals(),
    dense_query: str | None = None,
) -> list[int]:
    if retriever == "bm25":
        return ranking_of(units.bm25(query))
    if retriever == "dense":
        return ranking_of(units.dense(query))
    if config.fusion == "rrf":
        hybrid = rrf(ranking_of(units.dense(query)), ranking_of(units.bm25(query)), n=units.n)
    else:
        hybrid = ranking_of(
            hybrid_scores(units, query, config, context=context, signals=signals, dense_query=dense_query).astype(
                np.float32
            )
        )
    if retriever == "hybrid":
        return hybrid
    head = resonance() if resonance is not None else []
    seen = set(head)
    return head + [i for i in hybrid if i not in seen]
