"""``rank_frame``: one hybrid ranking of a frame of candidates under a ``RetrievalConfig``.

The store builds the ``Frame`` (every chunk of a small store, or the candidate pool and its neighbours past
``z_all_limit``) and the ``QueryFacts``; this module only computes. Order of the parts: fusion of dense and
BM25, then the neighbours' context, the window keys, the query's phrases, the temporal anchor, the question
and reply signals, the named speaker; then, when ``feedback_weight`` is set, the dense side is scored again
for a query moved towards the top candidates, and when ``lexical_feedback_weight`` is, the BM25 side for
their most distinctive terms (``refeed``), and everything is fused once more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from lca.retrieval.config import RetrievalConfig
from lca.retrieval.fusion import fuse, standardize
from lca.retrieval.signals import (
    anchor_closeness,
    context_key_scores,
    context_scores,
    inherited,
    lateness,
    reply_sources,
)


@dataclass(frozen=True)
class Frame:
    """Per-candidate arrays of equal length. ``dense`` is the best cosine of the chunk's keys, ``lexical`` its
    BM25 score (0: no query term); ``tiebreak`` orders equal scores (the store: chunk id order); ``session``
    and ``entry`` are integer codes (-1: none), ``seq`` the chunk's place in its session, ``speaker`` a code
    (-1: none), ``days`` its time in days (nan: undated), ``asks`` a turn that only asks, ``asked`` a turn
    with a question in it."""

    dense: np.ndarray
    lexical: np.ndarray
    tiebreak: np.ndarray
    session: np.ndarray
    seq: np.ndarray
    entry: np.ndarray
    speaker: np.ndarray
    days: np.ndarray
    asks: np.ndarray
    asked: np.ndarray
    window_norm: np.ndarray | None = None  # |sum of the vectors| of each chunk's context window (see signals)
    window_lexical: np.ndarray | None = None  # BM25 of each chunk's context window as one document (see signals)
    window_dense: np.ndarray | None = None  # cosine of the query with each chunk's window key (its own: none)
    phrase: np.ndarray | None = None  # how many of the query's adjacent term pairs the chunk holds adjacent
    tells_time: np.ndarray | None = None  # the chunk says when something happened (``lca.temporal_anchor``)

    def __len__(self) -> int:
        return len(self.dense)


@dataclass(frozen=True)
class QueryFacts:
    """What the store read from the query beyond its vector and terms."""

    speaker: int | None = None  # the code of the one speaker the query names
    anchor_day: float | None = None  # the day (in ``Frame.days`` units) a time expression points at
    anchor_tolerance: float = 0.0
    anchor_span: float = 0.0  # days after ``anchor_day`` the expression covers alike (a month: all of it)
    asks_when: bool = False  # the query asks for a time ("When did ...")
    asks_now: bool = False  # the query asks how things stand now ("... now?", "these days", "in the end")


def top_only(scores: np.ndarray, depth: int, *, positive: bool = False) -> np.ndarray:
    """The scores of the top ``depth`` candidates (ties by position), ``nan`` elsewhere (and where not positive)."""
    out = np.full(len(scores), np.nan)
    values = np.where(np.isnan(scores), -np.inf, scores)
    if positive:
        values = np.where(values > 0, values, -np.inf)
    order = np.lexsort((np.arange(len(scores)), -values))[:depth]
    order = order[np.isfinite(values[order])]
    out[order] = scores[order]
    return out


def ordering(fused: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Candidate indices by fused score descending, ties by ``tiebreak``."""
    return np.lexsort((tiebreak, -fused))


def rank_frame(
    frame: Frame,
    config: RetrievalConfig,
    facts: QueryFacts = QueryFacts(),
    *,
    refeed: Callable[[np.ndarray], tuple[np.ndarray | None, np.ndarray | None]] | None = None,
    parts: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(fused score, eligible) per candidate. Under ``rrf`` and ``blend`` only the top ``pool`` of each side
    take part (the eligible ones); under ``z`` every candidate does. ``parts``, when given, receives the last
    round's part of each weight as the score adds it, before its weight multiplies it (by the weight's name:
    ``dense_weight`` and ``bm25_weight`` under ``z``, ``fused`` under the others, then each signal that is on;
    ``question_weight``'s part is negative, as it subtracts): the features ``lca fit`` weighs."""
    weights = {"dense_weight": config.dense_weight, "bm25_weight": config.bm25_weight, "rrf_k": config.rrf_k}
    sources = reply_sources(frame.asked, frame.session, frame.seq, frame.entry) if config.reply_weight else None
    anchor = (
        anchor_closeness(frame.days, facts.anchor_day, facts.anchor_tolerance, facts.anchor_span)
        if config.anchor_weight and facts.anchor_day is not None
        else None
    )

    def score(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kept: dict[str, np.ndarray] = {}
        if config.fusion == "z":
            base = fuse("z", dense, frame.lexical, **weights)
            eligible = np.ones(len(frame), dtype=bool)
            if parts is not None:  # the z fusion's two sides, as ``zscore`` weighs them
                kept |= {"dense_weight": standardize(dense), "bm25_weight": standardize(frame.lexical)}
        else:
            dense_top = top_only(dense, config.pool)
            lexical_top = top_only(frame.lexical, config.pool, positive=True)
            base = fuse(config.fusion, dense_top, lexical_top, **weights)
            eligible = ~np.isnan(dense_top) | ~np.isnan(lexical_top)
            if config.uses_signals:  # signals add in z units: standardize the fused score first
                base = standardize(base)
            kept["fused"] = base
        fused = base.copy()

        def add(name: str, part: np.ndarray) -> None:
            nonlocal fused
            fused = fused + getattr(config, name) * part
            kept[name] = np.asarray(part, dtype=np.float64)

        window_norm, window_lexical = frame.window_norm, frame.window_lexical
        if config.context_weight and window_norm is not None and window_lexical is not None and config.fusion == "z":
            add(
                "context_weight",
                context_key_scores(
                    dense,
                    window_lexical,
                    frame.session,
                    frame.seq,
                    config.context_before,
                    config.context_after,
                    window_norm,
                    config.bm25_weight,
                ),
            )
        elif config.context_weight:  # no window norms and counts: the neighbours' fused scores stand in
            add(
                "context_weight",
                context_scores(base, frame.session, frame.seq, config.context_before, config.context_after),
            )
        if config.window_key_weight and frame.window_dense is not None:
            add("window_key_weight", standardize(frame.window_dense))
        if config.phrase_weight and frame.phrase is not None:
            add("phrase_weight", frame.phrase)
        if anchor is not None:
            add("anchor_weight", anchor)
        if config.question_weight:
            add("question_weight", -frame.asks.astype(np.float64))  # before a reply inherits from its question
        if sources is not None:
            add("reply_weight", inherited(fused, sources))
        if config.when_weight and facts.asks_when and frame.tells_time is not None:
            add("when_weight", frame.tells_time)
        if config.now_weight and facts.asks_now:  # the later of the turns about it: the top now_depth so far
            about = ~np.isnan(top_only(fused, config.now_depth))
            later = np.zeros(len(frame))
            later[about] = lateness(frame.days[about])
            add("now_weight", later)
        if config.speaker_weight and facts.speaker is not None:
            add("speaker_weight", (frame.speaker == facts.speaker).astype(np.float64))
        if parts is not None:
            parts.clear()
            parts.update(kept)
        return fused, eligible

    fused, eligible = score(frame.dense)
    if (config.feedback_weight or config.lexical_feedback_weight) and refeed is not None and len(frame):
        top = [i for i in ordering(fused, frame.tiebreak) if eligible[i]][: config.feedback_depth]
        dense, lexical = refeed(np.asarray(top, dtype=np.int64))
        if lexical is not None:
            frame = replace(frame, lexical=lexical)
        fused, eligible = score(frame.dense if dense is None else dense)
    return fused, eligible
