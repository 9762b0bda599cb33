"""The lexical index's segments: immutable runs of documents whose BM25 is scored at query time from statistics
summed over every segment, so an ingest adds a small segment instead of rebuilding the index.

BM25 (Lucene's idf, k1, b) reads three numbers of the whole corpus: how many documents there are, their mean
length in terms, and how many hold each query term. A segment stores what they are summed from (its documents'
rows and lengths, and each term's postings: which of its documents hold the term, how often), never a score, so
the scores over any set of segments equal those of one index built over the same documents. A removed document
is marked dead in its segment (left out of every statistic) until a merge drops it. The arithmetic is bm25s's,
step for step (a term's weight in a document in float64, rounded to float32, summed in float32 in the query's
order), so the scores are bit-equal to a bm25s index over the same tokens (``tests/lca/index/test_segments.py``).
"""

from __future__ import annotations

import io
import math
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

# each array's type on disk and in memory: a posting costs 6 bytes (its document and its count), a document 16
DTYPES = {
    "rows": np.int64,
    "digests": np.uint32,
    "lengths": np.int32,
    "terms": np.int32,
    "indptr": np.int64,
    "docs": np.int32,
    "counts": np.uint16,  # a term's count in one document (bm25s holds it as a float32: the same integer)
}
ARRAYS = tuple(DTYPES)
COUNT_MAX = int(np.iinfo(np.uint16).max)
EMPTY_POSTINGS = (np.zeros(0, np.int32), np.zeros(0, np.uint16))
MAIN_SHARE = 0.125  # the small segments are merged into the first once they hold this share of its documents
WEIGHTS_KEPT = 1_000_000  # term weights kept per index state across queries, in postings (12 bytes each)
DENSE_SHARE = 4  # ``top_scores`` scores every document once the postings it read pass 1 / this of them


def segment_name() -> str:
    """A name no other segment has had: a save writes new files before the manifest that names them."""
    return f"seg-{uuid.uuid4().hex[:16]}"


def text_crc(text: str) -> int:
    """A document's check value: the store's last document is compared with the catalog's before an append."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Segment:
    """Documents in catalog-row order, their postings by term (ids of the store's one vocabulary), and the stems
    and words this segment added to that vocabulary (stem ids ``first_stem`` on)."""

    name: str
    rows: np.ndarray  # int64, ascending
    digests: np.ndarray  # each document's ``text_crc``
    lengths: np.ndarray  # terms per document ("" once for a document with none, as bm25s counts it)
    terms: np.ndarray  # ascending: the terms some document here holds
    indptr: np.ndarray  # term ``terms[i]``'s postings are docs[indptr[i]:indptr[i + 1]]
    docs: np.ndarray  # positions of documents in this segment, ascending per term
    counts: np.ndarray  # how often the term occurs in that document
    first_stem: int
    stems: tuple[str, ...] = ()
    words: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def from_sequences(
        cls,
        name: str,
        rows: Sequence[int],
        texts: Sequence[str],
        sequences: Sequence[Sequence[int]],
        *,
        first_stem: int,
        stems: Sequence[str],
        words: dict[str, int],
    ) -> Segment:
        """A segment of documents given as term-id sequences (the tokenizer's, "" token included)."""
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        flat = np.fromiter((t for s in sequences for t in s), dtype=np.int64, count=int(lengths.sum()))
        doc_of = np.repeat(np.arange(len(sequences), dtype=np.int64), lengths)
        # one key per (term, document), term-major: sorted, each key's count is the term's frequency there
        keys, counts = np.unique(flat * max(len(sequences), 1) + doc_of, return_counts=True)
        term_of, docs = np.divmod(keys, max(len(sequences), 1))
        terms, starts = np.unique(term_of, return_index=True)
        indptr = np.append(starts, len(keys)).astype(np.int64)
        digests = np.fromiter((text_crc(t) for t in texts), dtype=np.uint32, count=len(texts))
        if len(counts) and int(counts.max()) > COUNT_MAX:
            raise ValueError(f"a term occurs {int(counts.max())} times in one document: more than a count holds")
        return cls(
            name,
            np.asarray(rows, dtype=DTYPES["rows"]),
            digests,
            lengths.astype(DTYPES["lengths"]),
            terms.astype(DTYPES["terms"]),
            indptr.astype(DTYPES["indptr"]),
            docs.astype(DTYPES["docs"]),
            counts.astype(DTYPES["counts"]),
            first_stem,
            tuple(stems),
            dict(words),
        )

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """(documents, counts) of one term here."""
        at = int(self.terms.searchsorted(term))
        if at < len(self.terms) and self.terms[at] == term:
            lo, hi = self.indptr[at], self.indptr[at + 1]
            return self.docs[lo:hi], self.counts[lo:hi]
        return EMPTY_POSTINGS

    def check(self) -> None:
        """Raise ValueError unless the arrays hold together (a search would otherwise index out of bounds)."""
        n = len(self.rows)
        if not (len(self.digests) == len(self.lengths) == n):
            raise ValueError(f"{n} rows but {len(self.digests)} digests and {len(self.lengths)} lengths")
        if len(self.indptr) != len(self.terms) + 1 or int(self.indptr[0]) != 0:
            raise ValueError("the term pointers do not match the terms")
        if int(self.indptr[-1]) != len(self.docs) or len(self.docs) != len(self.counts):
            raise ValueError("the postings disagree in length")
        if np.any(np.diff(self.indptr) <= 0) or np.any(np.diff(self.terms) <= 0) or np.any(np.diff(self.rows) <= 0):
            raise ValueError("terms, rows or term pointers are out of order")
        if len(self.docs) and (int(self.docs.min()) < 0 or int(self.docs.max()) >= n):
            raise ValueError("a posting points past the segment's documents")
        if len(self.terms) and (int(self.terms[0]) < 0 or int(self.terms[-1]) >= self.first_stem + len(self.stems)):
            raise ValueError("a posting names a term past the vocabulary")

    def to_bytes(self) -> bytes:
        out = io.BytesIO()
        np.savez(out, **{name: getattr(self, name) for name in ARRAYS})
        return out.getvalue()

    @classmethod
    def from_bytes(
        cls, name: str, data: bytes, first_stem: int, stems: Sequence[str], words: dict[str, int]
    ) -> Segment:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:  # zip CRCs: a flipped byte fails here
            loaded = {key: np.asarray(arrays[key]) for key in ARRAYS}
        for key, array in loaded.items():
            if array.dtype != DTYPES[key]:
                raise ValueError(f"{key} holds {array.dtype}, not {np.dtype(DTYPES[key])}")
        return cls(
            name,
            **{key: array.reshape(-1) for key, array in loaded.items()},
            first_stem=first_stem,
            stems=tuple(stems),
            words=dict(words),
        )


def merge_segments(name: str, parts: Sequence[Segment], alive: Sequence[np.ndarray | None]) -> Segment:
    """One segment of the live documents of consecutive segments, in order: postings are placed by counting,
    no sort, so a merge costs a pass over the postings. Their vocabulary additions are consecutive too."""
    keep = [np.ones(len(p), dtype=bool) if a is None else a for p, a in zip(parts, alive)]
    new_id = [np.cumsum(k) - 1 for k in keep]
    bases = np.cumsum([0] + [int(k.sum()) for k in keep])
    terms = np.unique(np.concatenate([p.terms for p in parts])) if parts else np.zeros(0, np.int64)
    kept_postings, per_term = [], []
    total = np.zeros(len(terms), dtype=np.int64)
    for part, k in zip(parts, keep):
        live = k[part.docs]
        term_of = np.repeat(np.arange(len(part.terms)), np.diff(part.indptr))[live]
        counts = np.bincount(term_of, minlength=len(part.terms))
        at = np.searchsorted(terms, part.terms)
        total[at] += counts  # a term occurs once per segment: no repeated index
        kept_postings.append(live)
        per_term.append((at, counts))
    indptr = np.concatenate([[0], np.cumsum(total)]).astype(np.int64)
    docs = np.zeros(int(indptr[-1]), dtype=DTYPES["docs"])
    counts_out = np.zeros(int(indptr[-1]), dtype=DTYPES["counts"])
    cursor = indptr[:-1].copy()
    for part, live, (at, counts), ids, base in zip(parts, kept_postings, per_term, new_id, bases):
        starts = np.cumsum(counts) - counts
        rank = np.arange(int(counts.sum())) - np.repeat(starts, counts)
        dest = np.repeat(cursor[at], counts) + rank
        docs[dest] = base + ids[part.docs[live]]
        counts_out[dest] = part.counts[live]
        cursor[at] += counts
    present = np.flatnonzero(total)
    words: dict[str, int] = {}
    for part in parts:
        words.update(part.words)
    return Segment(
        name,
        np.concatenate([p.rows[k] for p, k in zip(parts, keep)]).astype(DTYPES["rows"]),
        np.concatenate([p.digests[k] for p, k in zip(parts, keep)]).astype(DTYPES["digests"]),
        np.concatenate([p.lengths[k] for p, k in zip(parts, keep)]).astype(DTYPES["lengths"]),
        terms[present].astype(DTYPES["terms"]),
        np.append(indptr[:-1][present], indptr[-1]).astype(DTYPES["indptr"]),
        docs,
        counts_out,
        parts[0].first_stem,
        tuple(s for p in parts for s in p.stems),
        words,
    )


@dataclass(frozen=True)
class SegmentSet:
    """The segments of one index state and which of their documents are alive (``None``: all of them), with the
    corpus-wide statistics BM25 reads, summed over the live documents of every segment."""

    segments: tuple[Segment, ...] = ()
    alive: tuple[np.ndarray | None, ...] = ()
    _memo: dict = field(default_factory=dict, repr=False, compare=False)  # length norms and term weights

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.cumsum([0] + [len(s) for s in self.segments]).astype(np.int64)

    @cached_property
    def live_slots(self) -> np.ndarray | None:
        """Positions of the live documents among all (segment after segment), or None when none is dead."""
        if all(a is None for a in self.alive):
            return None
        return np.flatnonzero(np.concatenate([np.ones(len(s), bool) if a is None else a for s, a in self.pairs]))

    @property
    def pairs(self) -> list[tuple[Segment, np.ndarray | None]]:
        return list(zip(self.segments, self.alive))

    @cached_property
    def rows(self) -> np.ndarray:
        """The live documents' catalog rows, ascending (segments hold ascending rows, each past the one before)."""
        every = np.concatenate([s.rows for s in self.segments]) if self.segments else np.zeros(0, np.int64)
        return every if self.live_slots is None else every[self.live_slots]

    @cached_property
    def total_length(self) -> int:
        return int(sum(int(s.lengths.sum() if a is None else s.lengths[a].sum()) for s, a in self.pairs))

    def live_count(self, at: int) -> int:
        alive = self.alive[at]
        return len(self.segments[at]) if alive is None else int(alive.sum())

    def last_row(self) -> int:
        """The highest row ever indexed here, live or dead: the catalog's rows past it are new."""
        return max((int(s.rows[-1]) for s in self.segments if len(s)), default=-1)

    def anchor(self) -> tuple[int, int] | None:
        """(row, text check value) of the highest live document: the catalog must hold that text at that row."""
        for segment, alive in reversed(self.pairs):
            live = np.flatnonzero(alive) if alive is not None else np.arange(len(segment))
            if len(live):
                return int(segment.rows[live[-1]]), int(segment.digests[live[-1]])
        return None

    def appended(self, segment: Segment) -> SegmentSet:
        return SegmentSet((*self.segments, segment), (*self.alive, None))

    def without_rows(self, rows: np.ndarray) -> SegmentSet:
        """This set with the documents at ``rows`` dead."""
        alive = []
        for segment, was in self.pairs:
            gone = np.isin(segment.rows, rows)
            alive.append(was if not gone.any() else (~gone if was is None else was & ~gone))
        return SegmentSet(self.segments, tuple(alive))

    def merged(self, start: int, name: str) -> SegmentSet:
        """The segments from ``start`` on as one, their dead documents dropped."""
        merged = merge_segments(name, self.segments[start:], self.alive[start:])
        return SegmentSet((*self.segments[:start], merged), (*self.alive[:start], None))

    def scores(self, terms: Sequence[int], k1: float, b: float) -> np.ndarray:
        """BM25 of every live document (``rows`` order) for a query of these term ids, a repeated term counted
        each time: bm25s's arithmetic over the corpus-wide statistics."""
        out = np.zeros(int(self.offsets[-1]), dtype=np.float32)
        for term in terms:
            slots, weights = self._weights_of(term, k1, b)
            out[slots] += weights  # one posting per document and term: no repeated slot
        self._forget_weights()
        return out if self.live_slots is None else out[self.live_slots]

    def scores_at(self, terms: Sequence[int], k1: float, b: float, positions: np.ndarray) -> np.ndarray:
        """``scores`` at some live positions, bit-equal (the same float32 sums in the query's order), each
        term's weight found in its postings by binary search: the cost follows the positions, not the store."""
        slots = self._slots_of(np.asarray(positions, dtype=np.int64))
        out = np.zeros(len(slots), dtype=np.float32)
        for term in terms:
            held, weights = self._weights_of(term, k1, b)
            if len(held) and len(slots):
                at = np.minimum(np.searchsorted(held, slots), len(held) - 1)
                hit = held[at] == slots
                out[hit] += weights[at[hit]]
        self._forget_weights()
        return out

    def top_scores(self, terms: Sequence[int], k1: float, b: float, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(live positions, ascending, and BM25) of every document scoring at least the ``n``-th best positive score
        (ties at it included), as ``scores`` ranks them, without scoring the rest (MaxScore; Turtle and Flood 1995).
        The rarest terms' postings are read first; a document in none of them scores at most the other terms'
        largest weights summed, so once ``n`` documents read score above that, no document unread can enter the top
        ``n``, and only the documents read that still could are scored in full. A query whose rare terms alone
        hold more postings than a ``DENSE_SHARE``-th of the store's documents is scored whole (``scores``): sorting
        that many postings costs more than adding them into an array over the store."""
        counts: dict[int, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        postings = {term: self._weights_of(term, k1, b) for term in counts}
        bound = {t: counts[t] * float(w.max()) if len(w) else 0.0 for t, (_, w) in postings.items()}
        order = sorted(counts, key=lambda t: (len(postings[t][0]), t))  # rarest first
        documents = len(self.rows)
        read: list[int] = []
        held = 0  # postings read
        for i, term in enumerate(order):
            read.append(term)
            held += len(postings[term][0])
            rest = sum(bound[t] for t in order[i + 1 :]) * (1 + 1e-5)  # float32 sums round: a margin
            if held * DENSE_SHARE > documents:
                return _at_least_nth(np.arange(documents), self.scores(terms, k1, b), n)
            if rest > 0 and (held < n or sum(bound[t] for t in read) <= rest):
                continue  # fewer than n documents read, or none of them can score above an unread one yet
            slots, partial = _summed([postings[t] for t in read], [counts[t] for t in read])
            if len(slots) < n and rest > 0:
                continue
            floor = np.partition(partial, len(partial) - n)[len(partial) - n] if len(partial) >= n else 0.0
            floor *= 1 - 1e-5  # the read terms' float64 sums bound the float32 scores from below, up to rounding
            if rest > 0 and rest >= floor:
                continue  # a document no read term holds could still reach the top n
            can = slots[partial + rest >= floor] if rest > 0 else slots
            positions = can if self.live_slots is None else np.searchsorted(self.live_slots, can)
            return _at_least_nth(positions, self.scores_at(terms, k1, b, positions), n)
        return np.zeros(0, np.int64), np.zeros(0, np.float32)

    def _slots_of(self, positions: np.ndarray) -> np.ndarray:
        return positions if self.live_slots is None else self.live_slots[positions]

    def _weights_of(self, term: int, k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """One term's (slots, ascending, and weights), kept across queries (``WEIGHTS_KEPT`` postings at most)."""
        weighed = self._memo.setdefault("weights", {})
        key = (term, k1, b)
        found = weighed.get(key)
        if found is None:
            found = weighed[key] = self._term_weights(term, k1, b)
            self._memo["postings"] = self._memo.get("postings", 0) + len(found[0])
        return found

    def _forget_weights(self) -> None:
        if self._memo.get("postings", 0) > WEIGHTS_KEPT:
            self._memo.setdefault("weights", {}).clear()
            self._memo["postings"] = 0

    def _norms(self, k1: float, b: float) -> list[tuple[int, Segment, np.ndarray | None, np.ndarray]]:
        """Per segment: its first slot, itself, its live documents and each document's length norm in BM25's
        denominator, ``k1 x (1 - b + b x length / mean length)`` (bm25s's order of operations), once per state."""
        key = (k1, b)
        if key not in self._memo:
            mean_length = self.total_length / len(self.rows) if len(self.rows) else 1.0
            self._memo[key] = [
                (offset, segment, alive, k1 * ((1 - b) + b * segment.lengths / mean_length))
                for offset, (segment, alive) in zip(self.offsets.tolist(), self.pairs)
            ]
        return self._memo[key]

    def _term_weights(self, term: int, k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """(slots, ascending, and float32 weights) of one term in the live documents holding it."""
        found = []
        for offset, segment, alive, norm in self._norms(k1, b):
            docs, tf = segment.postings(term)
            if alive is not None and len(docs):
                live = alive[docs]
                docs, tf = docs[live], tf[live]
            if len(docs):
                found.append((docs + np.int64(offset), tf, norm[docs]))
        df = sum(len(docs) for docs, _, _ in found)
        if not df:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        idf = float(np.float32(math.log(1 + (len(self.rows) - df + 0.5) / (df + 0.5))))  # bm25s keeps it in float32
        out = []
        for _, tf, norm in found:
            tf64 = tf.astype(np.float64)
            weights = tf64 / (norm + tf64)  # bm25s's _score_tfc_robertson
            weights *= idf
            out.append(weights.astype(np.float32))
        return np.concatenate([slots for slots, _, _ in found]), np.concatenate(out)


def _summed(postings: Sequence[tuple[np.ndarray, np.ndarray]], counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct slots, ascending, and the sum of their weights, each term ``count`` times, in float64) over some
    terms' postings: a lower bound of each document's score, for ``top_scores`` to prune with."""
    slots = np.concatenate([s for s, _ in postings])
    weights = np.concatenate([w.astype(np.float64) * c for (_, w), c in zip(postings, counts)])
    order = np.argsort(slots, kind="stable")
    slots, weights = slots[order], weights[order]
    starts = np.flatnonzero(np.r_[True, slots[1:] != slots[:-1]]) if len(slots) else np.zeros(0, np.int64)
    return slots[starts], np.add.reduceat(weights, starts) if len(starts) else np.zeros(0)


def _at_least_nth(positions: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions whose score is positive and at least the ``n``-th best (every tie at it kept)."""
    keep = scores > 0
    positions, scores = positions[keep], scores[keep]
    if len(scores) > n:
        nth = np.partition(scores, len(scores) - n)[len(scores) - n]
        keep = scores >= nth
        positions, scores = positions[keep], scores[keep]
    return positions, scores


def merge_due(state: SegmentSet) -> SegmentSet:
    """The segments with the merges that are due: the last two while the newer holds at least half as many live
    documents as the older (so the small segments stay few, about log2 of their documents, and each document is
    merged about that often), then all into one once the small ones hold ``MAIN_SHARE`` of the first's live
    documents or the first has that share dead (so the whole index is rewritten after it grew by that share:
    a constant cost per document added)."""
    while len(state.segments) > 2 and state.live_count(-1) * 2 >= state.live_count(-2):
        state = state.merged(len(state.segments) - 2, segment_name())
    if not state.segments:
        return state
    main = state.live_count(0)
    added = sum(state.live_count(i) for i in range(1, len(state.segments)))
    dead = len(state.segments[0]) - main
    if (len(state.segments) > 1 and added >= MAIN_SHARE * main) or dead > MAIN_SHARE * len(state.segments[0]):
        state = state.merged(0, segment_name())
    return state
