"""A hybrid search of one store through ``lca.retrieval``: the frame of candidates (the whole store, or the
candidate pool and its neighbours), the query's facts, one ranking, the hits with their evidence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Protocol

import numpy as np

from lca.index.catalog import Catalog
from lca.index.frames import StoreStructure, ranks_among, whole_store
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
        dense_top = dense_top[np.lexsort((structure.tiebreak[dense_top], -top[dense_top]))][:pool]
        lexical_top = _best(lexical_all, np.flatnonzero(lexical_all > 0), structure.tiebreak, pool)
        positions = np.union1d(dense_top, lexical_top)
        if config.context_weight or config.reply_weight:
            before = max(config.context_before if config.context_weight else 0, 1 if config.reply_weight else 0)
            after = config.context_after if config.context_weight else 0
            positions = structure.neighbourhood(positions, before, after)
        positions = positions[np.argsort(structure.tiebreak[positions])]

        own: list[np.ndarray] = []  # the frame's own vectors, read once if a second query vector needs them

        def dense_of(vector: np.ndarray) -> np.ndarray:
            if vector is not qvec and not keyed:  # feedback: the frame's cosines, no second scan of the store
                if not own:
                    own.append(index.vectors.reconstruct(structure.own_vector[positions]))
                return (own[0] @ vector).astype(np.float64)
            scores, ids = first if vector is qvec else index.vectors.search(vector, depth)
            best = structure.best_per_chunk(scores, ids, keys=config.sentences)[positions]
            missing = np.flatnonzero(np.isnan(best))
            if len(missing):
                best[missing] = index.vectors.reconstruct(structure.own_vector[positions[missing]]) @ vector
            return best

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
                added = index.lexical_of_terms(terms, structure)[positions]
                lexical = lexical_all[positions] + config.lexical_feedback_weight * added
        return dense, lexical

    windows = config.context_weight and config.fusion == "z"
    norms = index.window_norms(config) if windows else None
    window_lexical = facts_of_text.window_lexical(text, query, config) if windows and text else None
    told = facts_of_text.tells_time(text, positions) if text and config.when_weight and facts.asks_when else None
    phrase = facts_of_text.phrase_matches(text, query) if text and config.phrase_weight else None
    dense = dense_of(qvec)
    window_dense = None
    if config.window_key_weight:  # a chunk without a window key (alone in its session) scores by its own keys
        window_dense = dense.copy()
        ids = structure.window_vector[positions]
        has = np.flatnonzero(ids >= 0)
        if len(has):
            window_dense[has] = index.vectors.reconstruct(ids[has]) @ qvec
    frame = structure.frame(
        positions, dense, lexical_all[positions].astype(np.float64), norms, window_lexical, told, phrase, window_dense
    )
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


def _best(scores: np.ndarray, candidates: np.ndarray, tiebreak: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` candidates of highest score, ties by ``tiebreak``: a partition first, so a common query term
    matching thousands of chunks sorts only the few at or above the k-th score."""
    if len(candidates) > k:
        values = scores[candidates]
        kth = np.partition(values, len(values) - k)[len(values) - k]
        candidates = candidates[values >= kth]  # every tie at the threshold stays for the ordering below
    return candidates[np.lexsort((tiebreak[candidates], -scores[candidates]))][:k]
