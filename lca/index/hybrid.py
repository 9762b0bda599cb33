"""A hybrid search of one store through ``lca.retrieval``: the frame of candidates, the query's facts, one ranking,
the hits with their evidence.

Two ways to the frame (``RetrievalConfig.candidates``). An exact search scores every chunk by BM25 and, up to
``z_all_limit`` chunks, ranks them all (z statistics over the store); past it, each side's top ``pool``. A bounded
search never reads past its candidates: faiss's top ``pool`` chunks (HNSW past ``approximate_threshold``),
the top ``pool`` by BM25 read from the query terms' postings (rarest first, pruned: ``SegmentSet.top_scores``), their
union, and its neighbours when a signal reads them. Fusion and signals then run on that frame alone, so z-score
fusion standardizes each side over the frame's chunks: every candidate's cosine (from its stored vector where
faiss did not return it) and every candidate's BM25 (0 outside the postings). When ``pool`` covers the
store the frame is the whole store and the ranking is the exact one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

import numpy as np

from lca.index.catalog import Catalog
from lca.index.frames import StoreStructure, bounded_search, ranks_among, whole_store
from lca.index.lexical import Bm25LexicalIndex
from lca.index.text_facts import StoreText, TextFacts
from lca.index.vectors import FaissVectorIndex
from lca.retrieval.config import RetrievalConfig
from lca.retrieval.ranker import QueryFacts, ordering, rank_frame
from lca.retrieval.signals import named_speakers, without_names
from lca.types import SearchHit


class SearchedStore(Protocol):
    """What a hybrid search reads of an ``IndexStore``, all of it public and read-only (named here so this module
    need not import it)."""

    catalog_: Catalog
    text_facts: TextFacts

    @property
    def vectors(self) -> FaissVectorIndex: ...

    def structure(self) -> StoreStructure: ...

    def lexical_scores(self, query: str, structure: StoreStructure) -> np.ndarray: ...

    def has_keys(self) -> bool: ...

    def window_norms(self, config: RetrievalConfig) -> np.ndarray: ...

    def store_text(self) -> StoreText: ...

    def lexical_of_terms(self, terms: list[int], structure: StoreStructure) -> np.ndarray: ...

    @property
    def lexical(self) -> Bm25LexicalIndex: ...


def hybrid_search(
    index: SearchedStore,
    embed: Callable[[str], np.ndarray],
    query: str,
    k: int,
    pool: int | None,
    query_vector: np.ndarray | None,
    as_of: datetime | None,
    config: RetrievalConfig,
    parts: dict[str, np.ndarray] | None = None,
) -> list[SearchHit]:
    """The top ``k`` hits of ``index`` for ``query`` under ``config``; ``embed``: the store's query embedder (a
    query that cannot be embedded fails the search). ``parts``, when given, receives each weight's part of the
    hits' scores (``rank_frame``'s ``parts``), one value per hit in hit order."""
    structure = index.structure()
    if not len(structure) or k <= 0:
        return []
    pool = pool or max(config.pool, k)
    config = replace(config, pool=pool) if pool != config.pool else config
    facts = (
        structure.query_facts(query, as_of, speakers=bool(config.speaker_weight))
        if config.speaker_weight or config.anchor_weight or config.when_weight or config.now_weight
        else QueryFacts()
    )
    qvec = embed(query) if query_vector is None else query_vector
    if not config.names_in_dense_query:
        named = named_speakers(query, structure.speakers)
        if named:
            qvec = embed(without_names(query, named) or query)
    if bounded_search(config, len(structure), index.vectors.approximate):
        found = bounded_candidates(index, structure, config, query, qvec)
        positions, dense_of, lexical_frame, lexical_at = _bounded_scores(index, structure, config, qvec, found)
    else:
        positions, dense_of, lexical_frame, lexical_at = _exact_scores(index, structure, config, query, qvec, pool)
    facts_of_text = index.text_facts
    text = index.store_text() if config.reads_text else None

    def refeed(top_candidates: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The feedback round's dense scores (the query moved towards the top candidates) and BM25 scores (the
        top candidates' most distinctive terms added); ``None`` for a side the config leaves as it was."""
        top = positions[top_candidates]
        dense = lexical = None
        if config.feedback_weight:
            moved = qvec + config.feedback_weight * index.vectors.reconstruct(structure.own_vector[top]).mean(axis=0)
            dense = dense_of((moved / (np.linalg.norm(moved) or 1.0)).astype(np.float32))
        if config.lexical_feedback_weight and text is not None:
            terms = facts_of_text.feedback_terms(text, query, top, config.feedback_terms)
            if terms:
                lexical = lexical_frame + config.lexical_feedback_weight * lexical_at(terms)
        return dense, lexical

    windows = config.context_weight and config.fusion == "z"
    norms = index.window_norms(config) if windows else None
    window_lexical = facts_of_text.window_lexical(text, query, config) if windows and text else None
    told = facts_of_text.tells_time(text, positions) if text and config.when_weight and facts.asks_when else None
    phrase = facts_of_text.phrase_matches(text, query, positions) if text and config.phrase_weight else None
    dense = dense_of(qvec)
    window_dense = None
    if config.window_key_weight:  # a chunk without a window key (alone in its session) scores by its own keys
        window_dense = dense.copy()
        ids = structure.window_vector[positions]
        has = np.flatnonzero(ids >= 0)
        if len(has):
            window_dense[has] = index.vectors.reconstruct(ids[has]) @ qvec
    frame = structure.frame(positions, dense, lexical_frame, norms, window_lexical, told, phrase, window_dense)
    scored: dict[str, np.ndarray] | None = {} if parts is not None else None
    fused, eligible = rank_frame(frame, config, facts, refeed=refeed, parts=scored)
    order = [int(i) for i in ordering(fused, frame.tiebreak) if eligible[i]][:k]
    if parts is not None and scored is not None:
        parts.update({name: values[order] for name, values in scored.items()})
    dense_ranks = ranks_among(frame.dense)
    lexical_ranks = ranks_among(np.where(frame.lexical > 0, frame.lexical, np.nan))
    chunks = index.catalog_.chunks_by_rows([int(structure.rows[positions[i]]) for i in order])
    hits = []
    for i in order:
        chunk = chunks[int(structure.rows[positions[i]])]
        dense = frame.dense[i]
        lexical = frame.lexical[i]
        hits.append(
            SearchHit(
                chunk.chunk_id,
                chunk.text,
                chunk.pointer,
                float(fused[i]),
                None if np.isnan(dense) else float(dense),
                None if np.isnan(dense) else int(dense_ranks[i]),
                float(lexical) if lexical > 0 else None,
                int(lexical_ranks[i]) if lexical > 0 else None,
                chunk.timestamp,
                chunk.channel,
            )
        )
    return hits


DenseOf = Callable[[np.ndarray], np.ndarray]  # a query vector -> the best cosine of each frame position
LexicalAt = Callable[[list[int]], np.ndarray]  # term ids -> the BM25 of each frame position for them
Scores = tuple[np.ndarray, DenseOf, np.ndarray, LexicalAt]  # positions, dense_of, their BM25, lexical_at


def _exact_scores(
    index: SearchedStore, structure: StoreStructure, config: RetrievalConfig, query: str, qvec: np.ndarray, pool: int
) -> Scores:
    """The frame of an exact search: every chunk is scored by BM25, and ranked whole (``whole_store``) or cut to
    the pool of each side (and its neighbours)."""
    lexical_all = index.lexical_scores(query, structure)
    keyed = index.has_keys() and config.sentences
    if whole_store(config, len(structure), index.vectors.approximate):
        positions = np.argsort(structure.tiebreak)  # chunk-id order: ties fall by chunk id

        def dense_of(vector: np.ndarray) -> np.ndarray:
            scores, ids = index.vectors.search(vector, len(index.vectors))
            return structure.best_per_chunk(scores, ids, keys=config.sentences)[positions]

    else:
        depth = pool * 3 if keyed else pool
        first = index.vectors.search(qvec, depth)  # the query's own dense search, reused when the frame is scored
        top = structure.best_per_chunk(*first, keys=config.sentences)
        dense_top = np.flatnonzero(~np.isnan(top))
        dense_top = dense_top[_best(top[dense_top], structure.tiebreak[dense_top], pool)]
        lexical_top = np.flatnonzero(lexical_all > 0)
        lexical_top = lexical_top[_best(lexical_all[lexical_top], structure.tiebreak[lexical_top], pool)]
        positions = _framed(structure, config, np.union1d(dense_top, lexical_top))
        own: list[np.ndarray] = []  # the frame's own vectors, read once if a second query vector needs them

        def dense_of(vector: np.ndarray) -> np.ndarray:
            if vector is not qvec and not keyed:  # feedback: the frame's cosines, no second scan of the store
                if not own:
                    own.append(index.vectors.reconstruct(structure.own_vector[positions]))
                return (own[0] @ vector).astype(np.float64)
            scores, ids = first if vector is qvec else index.vectors.search(vector, depth)
            best = structure.best_per_chunk(scores, ids, keys=config.sentences)[positions]
            return _filled(index, structure, positions, best, vector)

    def lexical_at(terms: list[int]) -> np.ndarray:
        return index.lexical_of_terms(terms, structure)[positions]

    return positions, dense_of, lexical_all[positions].astype(np.float64), lexical_at


@dataclass(frozen=True)
class Candidates:
    """What a bounded search generates for one query: each side's answer, read from its own index (faiss's top
    ``depth`` vectors; the top of the query terms' postings, ``Bm25LexicalIndex.top_scores``), the union of each
    side's top ``pool`` chunks, and the frame it ranks (the union, and its neighbours when a signal reads them)."""

    dense_positions: np.ndarray  # chunks faiss's answer keys, ascending, with their best cosine
    dense_scores: np.ndarray
    lexical_positions: np.ndarray  # chunks at or above the ``pool``-th BM25 (ties kept), ascending, with their BM25
    lexical_scores: np.ndarray
    terms: tuple[int, ...]  # the query's indexed terms
    union: np.ndarray  # each side's top ``pool``: at most twice that many chunks
    frame: np.ndarray  # in chunk-id order
    depth: int  # vectors asked of faiss (three per chunk where chunks own sentence keys)


def bounded_candidates(
    index: SearchedStore, structure: StoreStructure, config: RetrievalConfig, query: str, qvec: np.ndarray
) -> Candidates:
    """A bounded search's candidates: the cost follows ``pool`` and the query terms' postings, not the
    store's size (faiss is exhaustive below its HNSW switch, ``lca.index.vectors``)."""
    keep = config.pool
    depth = keep * 3 if index.has_keys() and config.sentences else keep
    dense_at, dense_best = structure.best_of_keys(*index.vectors.search(qvec, depth), keys=config.sentences)
    terms = index.lexical.query_terms(query)
    rows, scores = index.lexical.top_scores(terms, keep)
    at = np.minimum(np.searchsorted(structure.rows, rows), max(len(structure) - 1, 0))
    held = (structure.rows[at] == rows) & (scores > 0) if len(structure) else np.zeros(0, bool)
    lexical_at, lexical_scores = at[held], scores[held].astype(np.float64)
    union = np.union1d(
        dense_at[_best(dense_best, structure.tiebreak[dense_at], keep)],
        lexical_at[_best(lexical_scores, structure.tiebreak[lexical_at], keep)],
    )
    frame = _framed(structure, config, union)
    return Candidates(dense_at, dense_best, lexical_at, lexical_scores, tuple(terms), union, frame, depth)


def _bounded_scores(
    index: SearchedStore, structure: StoreStructure, config: RetrievalConfig, qvec: np.ndarray, found: Candidates
) -> Scores:
    """The frame of a bounded search and its scores, none read beyond it: a candidate faiss did not return is
    scored from its stored vector, a candidate's BM25 is read from the query terms' postings by binary search (0
    in none), and a feedback round scores the frame's own vectors (a second faiss search where chunks own sentence
    keys) and looks up the added terms' postings."""
    positions = found.frame
    keyed = index.has_keys() and config.sentences
    own: list[np.ndarray] = []

    def dense_of(vector: np.ndarray) -> np.ndarray:
        if vector is qvec:
            at, best = found.dense_positions, found.dense_scores
        elif keyed:
            at, best = structure.best_of_keys(*index.vectors.search(vector, found.depth), keys=config.sentences)
        else:
            if not own:
                own.append(index.vectors.reconstruct(structure.own_vector[positions]))
            return (own[0] @ vector).astype(np.float64)
        return _filled(index, structure, positions, _gather(at, best, positions, np.nan), vector)

    def lexical_at(terms: list[int]) -> np.ndarray:
        return index.lexical.scores_of_rows(terms, structure.rows[positions]).astype(np.float64)

    return positions, dense_of, lexical_at(list(found.terms)), lexical_at


def _framed(structure: StoreStructure, config: RetrievalConfig, chosen: np.ndarray) -> np.ndarray:
    """The frame over the chosen chunks: with their neighbours when a signal reads them, in chunk-id order."""
    if config.context_weight or config.reply_weight:
        before = max(config.context_before if config.context_weight else 0, 1 if config.reply_weight else 0)
        after = config.context_after if config.context_weight else 0
        chosen = structure.neighbourhood(chosen, before, after)
    return chosen[np.argsort(structure.tiebreak[chosen])]


def _filled(
    index: SearchedStore, structure: StoreStructure, positions: np.ndarray, best: np.ndarray, vector: np.ndarray
) -> np.ndarray:
    """``best`` with the frame's chunks a dense answer did not reach scored from their stored vectors."""
    missing = np.flatnonzero(np.isnan(best))
    if len(missing):
        best[missing] = index.vectors.reconstruct(structure.own_vector[positions[missing]]) @ vector
    return best


def _gather(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, absent: float) -> np.ndarray:
    """``values`` at ``wanted`` by ``keys`` (ascending), ``absent`` where a wanted key is not among them."""
    out = np.full(len(wanted), absent, dtype=np.float64)
    if len(keys) and len(wanted):
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        hit = keys[at] == wanted
        out[hit] = values[at[hit]]
    return out


def _best(values: np.ndarray, tiebreak: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest ``values``, ties by ``tiebreak``: a partition first, so a common query term
    matching thousands of chunks sorts only the few at or above the k-th score."""
    candidates = np.arange(len(values))
    if len(values) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        candidates = candidates[values >= kth]  # every tie at the threshold stays for the ordering below
    return candidates[np.lexsort((tiebreak[candidates], -values[candidates]))][:k]
