"""The signals: general mechanisms over transcript structure, each an array over the candidates.

They read only what the catalog knows of a chunk: its session, its place in the session (chunk order),
its speaker (the ``Name: `` prefix the chunker indexes for a named author), its time, and its text's
form (a turn that only asks). None of them knows a dataset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

import numpy as np

from lca.retrieval.fusion import standardize

SPEAKER_PREFIX = re.compile(r"^([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}): ")
ATTACHMENT_MARK = "[shares "  # how the chunker indexes an attachment's caption within its turn


def speaker_of(text: str) -> str | None:
    """The named speaker of a chunk (the chunker's ``Name: `` prefix), or None."""
    match = SPEAKER_PREFIX.match(text)
    return match.group(1) if match else None


def only_asks(text: str) -> bool:
    """A turn that only asks: it ends in "?" and carries no attachment (a shared photo is content)."""
    body = text.rstrip()
    return body.endswith("?") and ATTACHMENT_MARK not in body


def name_pattern(name: str) -> str:
    """A speaker named by first name, with or without a possessive ("Caroline", "Caroline's")."""
    return rf"\b{re.escape(name.split()[0])}(?:'s)?\b"


def named_speakers(query: str, speakers: Iterable[str]) -> list[str]:
    """The speakers a query names (by first name), in the order given."""
    return [name for name in speakers if re.search(name_pattern(name), query, re.IGNORECASE)]


def without_names(query: str, names: Iterable[str]) -> str:
    """The query with some speakers' first names taken out (for the embedded query)."""
    for name in names:
        query = re.sub(name_pattern(name), "", query, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", query).strip()


def day_number(timestamp: str | None) -> float:
    """An ISO timestamp as days since the epoch (naive, the day's start counts), ``nan`` when unreadable."""
    if not timestamp:
        return float("nan")
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return float("nan")
    return moment_days(moment)


EPOCH = datetime(1970, 1, 1)


def moment_days(moment: datetime) -> float:
    """A moment as days since 1970-01-01, read on its own clock (any time zone is dropped, not converted)."""
    return (moment.replace(tzinfo=None) - EPOCH).total_seconds() / 86400.0


def neighbours(session: np.ndarray, seq: np.ndarray, offset: int) -> np.ndarray:
    """For each candidate, the index of the candidate ``offset`` chunks away in its session, or -1."""
    n = len(session)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    session = np.asarray(session, dtype=np.int64)
    seq = np.asarray(seq, dtype=np.int64)
    span = int(seq.max()) + abs(offset) + 1  # keys of different sessions never meet
    keys = session * span + seq
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    target = keys + offset
    at = np.minimum(np.searchsorted(sorted_keys, target), n - 1)
    found = (session >= 0) & (seq + offset >= 0) & (sorted_keys[at] == target)
    out[found] = order[at[found]]
    return out


def context_scores(base: np.ndarray, session: np.ndarray, seq: np.ndarray, before: int, after: int) -> np.ndarray:
    """The mean base score of each candidate's neighbours in its session (``before`` turns before it,
    ``after`` after); 0 for a candidate with none. An answer often continues the exchange that leads to it."""
    total = np.zeros(len(base))
    count = np.zeros(len(base))
    for offset in [*range(-before, 0), *range(1, after + 1)]:
        other = neighbours(session, seq, offset)
        has = other >= 0
        total[has] += base[other[has]]
        count[has] += 1
    return np.divide(total, count, out=np.zeros(len(base)), where=count > 0)


def window_sums(values: np.ndarray, session: np.ndarray, seq: np.ndarray, before: int, after: int) -> np.ndarray:
    """Each candidate's value plus its neighbours' in its session (``before`` and ``after`` chunks away);
    ``values`` may hold a row of several values per candidate."""
    total = np.asarray(values, dtype=np.float64).copy()
    for offset in [*range(-before, 0), *range(1, after + 1)]:
        other = neighbours(session, seq, offset)
        has = other >= 0
        total[has] += values[other[has]]
    return total


def window_bm25(
    frequencies: np.ndarray,
    lengths: np.ndarray,
    session: np.ndarray,
    seq: np.ndarray,
    before: int,
    after: int,
    *,
    k1: float = 1.5,
    b: float = 0.75,
) -> np.ndarray:
    """BM25 (Lucene's form, as bm25s scores a chunk) of each chunk's window (the chunk and its neighbours in
    the session) read as one document, over the corpus of every chunk's window: ``frequencies`` holds each chunk's count of each query
    term (chunks x terms, a repeated query term a column each), ``lengths`` each chunk's length in terms.
    A window's term counts and length are its chunks' sums; a term shared by a turn and its reply counts
    with saturation, as in one text, not twice over."""
    n = len(lengths)
    if not n or not frequencies.shape[1]:
        return np.zeros(n)
    window_tf = window_sums(frequencies, session, seq, before, after)
    window_length = window_sums(np.asarray(lengths, dtype=np.float64), session, seq, before, after)
    mean_length = window_length.mean() or 1.0
    documents = (window_tf > 0).sum(axis=0)
    idf = np.log(1.0 + (n - documents + 0.5) / (documents + 0.5))
    norm = k1 * (1.0 - b + b * window_length / mean_length)
    return (idf * window_tf / (window_tf + norm[:, None])).sum(axis=1)  # bm25s's form: no (k1 + 1) factor


def context_key_scores(
    dense: np.ndarray,
    lexical_window: np.ndarray,
    session: np.ndarray,
    seq: np.ndarray,
    before: int,
    after: int,
    window_norm: np.ndarray,
    bm25_weight: float,
) -> np.ndarray:
    """How well each turn's window (the turn and its neighbours in the session) matches the query, as if the
    window were one text: the cosine to the window's summed vector, ``sum of cosines / |sum of vectors|``
    (``window_norm`` holds that norm, per chunk), plus the window's BM25 as one document (``window_bm25``),
    each z-scored. Neither the window's vector nor its text is stored: norms and term counts are all the
    ranking needs."""

    dense_window = window_sums(np.nan_to_num(dense, nan=0.0), session, seq, before, after)
    dense_window = dense_window / np.where(window_norm > 0, window_norm, 1.0)
    return standardize(dense_window) + bm25_weight * standardize(np.nan_to_num(lexical_window, nan=0.0))


def reply_sources(asked: np.ndarray, session: np.ndarray, seq: np.ndarray, entry: np.ndarray) -> np.ndarray:
    """The candidate each candidate replies to: the chunk right before it in its session when that is another
    entry holding a question (``asked``: its text has a "?"); -1 otherwise."""
    previous = neighbours(session, seq, -1)
    has = previous >= 0
    prev = np.where(has, previous, 0)
    replies = has & (entry[prev] != entry) & asked[prev]
    return np.where(replies, previous, -1)


def inherited(fused: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Each candidate's share of the positive score of the turn it replies to (0 for none)."""
    out = np.zeros(len(fused))
    has = sources >= 0
    out[has] = np.maximum(fused[sources[has]], 0.0)
    return out


def anchor_closeness(days: np.ndarray, target_day: float, tolerance_days: float, span_days: float = 0.0) -> np.ndarray:
    """1 from the target day to ``span_days`` after it, falling linearly to 0 one tolerance beyond either edge
    (``lca.temporal_anchor``); 0 undated."""
    offset = np.floor(days) - target_day
    distance = np.maximum(0.0, np.maximum(-offset, offset - span_days))
    closeness = np.maximum(0.0, 1.0 - distance / (tolerance_days + 1.0))
    return np.where(np.isnan(days), 0.0, closeness)


def lateness(days: np.ndarray) -> np.ndarray:
    """Each candidate's time on the candidates' own span, 0 the earliest to 1 the latest (0 undated, and all 0
    when they share one day): a question about how things stand now is answered by the later of two turns."""
    dated = ~np.isnan(days)
    if not dated.any():
        return np.zeros(len(days))
    first, last = float(days[dated].min()), float(days[dated].max())
    if last <= first:
        return np.zeros(len(days))
    return np.where(dated, (np.nan_to_num(days, nan=first) - first) / (last - first), 0.0)
