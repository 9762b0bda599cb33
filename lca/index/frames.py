"""The store's side of the one ranking path: what the catalog knows of every chunk, held per catalog
generation (``StoreStructure``), and the ``Frame`` of candidates one query is ranked over.

A small store is ranked whole: one exhaustive faiss scan scores every chunk, so z statistics and the
neighbours' scores are exact. Past ``RetrievalConfig.z_all_limit`` chunks (or with an approximate index)
the frame is the candidate pool (dense top, BM25 top) and, when a signal reads them, its neighbours, whose
dense scores are computed from their stored vectors. A bounded search (``RetrievalConfig.candidates``) builds
the same kind of frame from bounded candidates (``lca.index.hybrid``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

import numpy as np

from lca.retrieval.config import RetrievalConfig
from lca.retrieval.ranker import Frame, QueryFacts
from lca.retrieval.signals import day_number, moment_days, named_speakers, neighbours, only_asks, speaker_of
from lca.temporal_anchor import asks_now, asks_when, temporal_anchor


@dataclass(frozen=True)
class StoreStructure:
    """Per-chunk arrays in catalog row order, and the links from vector ids (own text and sentence keys)
    to chunk positions, sorted by vector id."""

    rows: np.ndarray
    chunk_ids: list[str]
    tiebreak: np.ndarray  # the chunk's place in chunk-id order
    session: np.ndarray
    seq: np.ndarray
    entry: np.ndarray
    speaker: np.ndarray
    speakers: list[str]
    days: np.ndarray
    asks: np.ndarray
    asked: np.ndarray
    own_vector: np.ndarray
    link_vector: np.ndarray
    link_chunk: np.ndarray
    link_own: np.ndarray  # the link is the chunk's own text (not one of its sentence keys)
    window_vector: np.ndarray  # the vector id of each chunk's window key (``lca.index.window_keys``), -1: none

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def build(
        cls,
        structure_rows: list[tuple],
        key_links: list[tuple[int, int, str]],
        window_links: Sequence[tuple[int, int]] = (),
    ) -> StoreStructure:
        """From ``Catalog.chunk_structure()``, ``Catalog.chunk_keys()`` and ``Catalog.window_key_links()``."""
        n = len(structure_rows)
        rows = np.fromiter((r[0] for r in structure_rows), dtype=np.int64, count=n)
        chunk_ids = [r[1] for r in structure_rows]
        tiebreak = np.empty(n, dtype=np.int64)
        tiebreak[np.argsort(np.asarray(chunk_ids, dtype=object), kind="stable")] = np.arange(n)
        sessions: dict[str, int] = {}
        entries: dict[tuple[str | None, str | None], int] = {}
        names: dict[str, int] = {}
        session = np.full(n, -1, dtype=np.int64)
        seq = np.zeros(n, dtype=np.int64)
        entry = np.full(n, -1, dtype=np.int64)
        speaker = np.full(n, -1, dtype=np.int64)
        counts: dict[int, int] = {}
        speaker_names: list[str | None] = []
        for i, (_, _, session_id, entry_id, _, text, _) in enumerate(structure_rows):
            if session_id is not None:
                code = sessions.setdefault(session_id, len(sessions))
                session[i] = code
                seq[i] = counts.get(code, 0)
                counts[code] = seq[i] + 1
                entry[i] = entries.setdefault((session_id, entry_id), len(entries))
            name = speaker_of(text) if session_id is not None else None
            speaker_names.append(name)
            if name is not None:
                speaker[i] = names.setdefault(name, len(names))
        days = np.array([day_number(r[4]) for r in structure_rows], dtype=np.float64)
        texts = [r[5] for r in structure_rows]
        asks = np.array([only_asks(t) for t in texts], dtype=bool)
        asked = np.array(["?" in t for t in texts], dtype=bool)
        own_vector = np.fromiter((r[6] for r in structure_rows), dtype=np.int64, count=n)
        position = {int(row): i for i, row in enumerate(rows.tolist())}
        links = sorted((vid, position[row]) for vid, row, _ in key_links if row in position)
        link_vector = np.array([v for v, _ in links], dtype=np.int64)
        link_chunk = np.array([c for _, c in links], dtype=np.int64)
        link_own = link_vector == own_vector[link_chunk] if len(links) else np.zeros(0, dtype=bool)
        window_vector = np.full(n, -1, dtype=np.int64)
        for vid, row in window_links:
            if row in position:
                window_vector[position[row]] = vid
        return cls(
            rows,
            chunk_ids,
            tiebreak,
            session,
            seq,
            entry,
            speaker,
            list(names),
            days,
            asks,
            asked,
            own_vector,
            link_vector,
            link_chunk,
            link_own,
            window_vector,
        )

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {chunk_id: n for n, chunk_id in enumerate(self.chunk_ids)}

    @cached_property
    def _previous(self) -> np.ndarray:
        return neighbours(self.session, self.seq, -1)

    def chunks_before(self, chunk_ids: Iterable[str]) -> dict[str, str]:
        """Each chunk's chunk indexed right before it in its session where that is of another entry: the last chunk
        of the turn its turn follows (or answers). A turn's later chunks, a session's first and chunks the store
        does not hold have none."""
        known = [(chunk_id, n) for chunk_id in chunk_ids if (n := self._positions.get(chunk_id)) is not None]
        if not known:
            return {}
        where = np.fromiter((n for _, n in known), dtype=np.int64, count=len(known))
        before = self._previous[where]
        has = before >= 0
        has[has] = self.entry[before[has]] != self.entry[where[has]]
        return {known[n][0]: self.chunk_ids[int(before[n])] for n in np.flatnonzero(has)}

    def frame(
        self,
        positions: np.ndarray,
        dense: np.ndarray,
        lexical: np.ndarray,
        window_norm: np.ndarray | None = None,
        window_lexical: np.ndarray | None = None,
        tells_time: np.ndarray | None = None,
        phrase: np.ndarray | None = None,
        window_dense: np.ndarray | None = None,
    ) -> Frame:
        """The frame over some chunk positions, with their dense and lexical scores (and their windows' vector
        norms and BM25, given per chunk of the store; which of them tell a time, the query's phrases in them and
        the cosines of their window keys, given per position)."""
        return Frame(
            dense=dense,
            lexical=lexical,
            tiebreak=self.tiebreak[positions],
            session=self.session[positions],
            seq=self.seq[positions],
            entry=self.entry[positions],
            speaker=self.speaker[positions],
            days=self.days[positions],
            asks=self.asks[positions],
            asked=self.asked[positions],
            tells_time=tells_time,
            window_norm=window_norm[positions] if window_norm is not None else None,
            window_lexical=window_lexical[positions] if window_lexical is not None else None,
            phrase=phrase,
            window_dense=window_dense,
        )

    def window_norms(self, vectors: np.ndarray, before: int, after: int) -> np.ndarray:
        """|sum of the own-text vectors| over each chunk's window in its session (``vectors``: one per chunk, in
        row order). Computed once per catalog generation and window (the caller caches it)."""
        total = vectors.astype(np.float64).copy()
        span = int(self.seq.max()) + 1 if len(self) else 1
        keys = self.session * span + self.seq
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        for offset in [*range(-before, 0), *range(1, after + 1)]:
            seq = self.seq + offset
            target = self.session * span + seq
            at = np.minimum(np.searchsorted(sorted_keys, target), len(sorted_keys) - 1)
            has = (self.session >= 0) & (seq >= 0) & (seq < span) & (sorted_keys[at] == target)
            total[has] += vectors[order[at[has]]]
        return np.linalg.norm(total, axis=1)

    def best_per_chunk(self, scores: np.ndarray, vector_ids: np.ndarray, *, keys: bool = True) -> np.ndarray:
        """Each chunk's best score over its keys (``keys``: its sentence keys too, else its own text only) among
        ``(scores, vector_ids)`` (a faiss answer); nan if none."""
        out = np.full(len(self), np.nan)
        if not len(vector_ids) or not len(self.link_vector):
            return out
        order = np.argsort(vector_ids)
        sorted_ids, sorted_scores = vector_ids[order], scores[order].astype(np.float64)
        at = np.searchsorted(sorted_ids, self.link_vector)
        found = at < len(sorted_ids)
        found[found] = sorted_ids[at[found]] == self.link_vector[found]
        if not keys:
            found &= self.link_own
        np.fmax.at(out, self.link_chunk[found], sorted_scores[at[found]])
        return out

    def best_of_keys(
        self, scores: np.ndarray, vector_ids: np.ndarray, *, keys: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """``best_per_chunk`` read from the answer's side: (positions, ascending, and best score) of just the
        chunks some of ``vector_ids`` key, so a bounded search costs its answer, not the store."""
        if not len(vector_ids) or not len(self.link_vector):
            return np.zeros(0, np.int64), np.zeros(0)
        lo = np.searchsorted(self.link_vector, vector_ids, "left")
        counts = np.searchsorted(self.link_vector, vector_ids, "right") - lo
        firsts = np.repeat(lo - (np.cumsum(counts) - counts), counts)  # a vector may key several chunks
        links = firsts + np.arange(int(counts.sum()))
        values = np.repeat(np.asarray(scores, dtype=np.float64), counts)
        if not keys:
            own = self.link_own[links]
            links, values = links[own], values[own]
        positions, slot = np.unique(self.link_chunk[links], return_inverse=True)
        best = np.full(len(positions), -np.inf)
        np.maximum.at(best, slot, values)
        return positions, best

    @cached_property
    def _session_order(self) -> tuple[int, np.ndarray, np.ndarray]:
        """(span, order, sorted keys) of the chunks by (session, place in it): sorted once per structure."""
        span = int(self.seq.max()) + 1 if len(self) else 1
        keys = self.session * span + self.seq  # unique per chunk of a session
        order = np.argsort(keys, kind="stable")
        return span, order, keys[order]

    def neighbourhood(self, positions: np.ndarray, before: int, after: int) -> np.ndarray:
        """``positions`` with each one's neighbours in its session (``before`` and ``after`` chunks away)."""
        if not (before or after) or not len(positions):
            return positions
        span, order, sorted_keys = self._session_order
        found = [positions]
        in_session = positions[self.session[positions] >= 0]
        for offset in [*range(-before, 0), *range(1, after + 1)]:
            seq = self.seq[in_session] + offset
            ok = (seq >= 0) & (seq < span)
            target = self.session[in_session][ok] * span + seq[ok]
            at = np.minimum(np.searchsorted(sorted_keys, target), len(sorted_keys) - 1)
            found.append(order[at[sorted_keys[at] == target]])
        return np.unique(np.concatenate(found))

    def query_facts(self, query: str, as_of: datetime | None, *, speakers: bool = True) -> QueryFacts:
        """The one speaker the query names (if exactly one; looked for only when ``speakers``), the day a
        time expression points at, whether it asks when, and whether it asks how things stand now."""

        named = named_speakers(query, self.speakers) if speakers else []
        anchor = temporal_anchor(query, as_of.replace(tzinfo=None) if as_of is not None else None)
        return QueryFacts(
            speaker=self.speakers.index(named[0]) if len(named) == 1 else None,
            anchor_day=moment_days(anchor.target) if anchor is not None else None,
            anchor_tolerance=anchor.tolerance_days if anchor is not None else 0.0,
            anchor_span=anchor.span_days if anchor is not None else 0.0,
            asks_when=asks_when(query),
            asks_now=asks_now(query),
        )


def ranks_among(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each present (non-nan) score, descending, ties by position; 0 where absent."""
    values = np.where(np.isnan(scores), -np.inf, scores)
    order = np.lexsort((np.arange(len(scores)), -values))
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    ranks[np.isnan(scores)] = 0
    return ranks


def whole_store(config: RetrievalConfig, chunks: int, approximate: bool) -> bool:
    """Whether an exact hybrid search ranks every chunk (z statistics over the store) or the candidate pool."""
    if config.fusion != "z" or approximate or config.z_scope == "pool":
        return False
    return config.z_scope == "all" or chunks <= config.z_all_limit


DenseFn = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (query vector, positions) -> best cosine per position


def bounded_search(config: RetrievalConfig, chunks: int, approximate: bool) -> bool:
    """Whether a hybrid search generates bounded candidates (``RetrievalConfig.candidates``). ``auto`` does where an
    exact search would rank the candidate pool rather than the whole store, so it ranks the same list and only
    the cost changes, from ``bounded_from`` chunks."""
    if config.candidates != "auto":
        return config.candidates == "bounded"
    return chunks >= config.bounded_from and not whole_store(config, chunks, approximate)
