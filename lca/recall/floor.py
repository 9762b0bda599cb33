"""The similarity floor one store applies, measured against that store's own scores.

One absolute cosine fitted on one corpus starves another: on a large store coherent off-topic
questions reach 0.5 and more, so the floor must sit there; on a store of a few dozen short turns
they reach 0.2, and a floor of 0.5 refuses turns a person would call plainly relevant. So the
floor recall applies (``floor_mode: store``) is this store's *off-topic ceiling*, the best cosine
that coherent off-topic questions (``data/calibration/off_topic_queries.txt``) reach anywhere in the
store, plus a margin; never above the absolute ``floor`` (a large store keeps the absolute
behaviour) and never below ``floor_min``. The ceiling is measured by one matrix product over the
store's vectors at ingest (``fit_store_profile``), kept in the store and fitted again once the store has
changed, so recall reads it and never measures it on its path. The same measurement
reads a question against the store's *topic*, twice: its cosine to the mean of the store's vectors (what
the history is about as a whole), and the mean of its few best cosines in the store (one of the subjects a
history of several subjects holds: a tax question, a knee injury and a party in one person's history),
each beside the best that the off-topic questions reach the same way (``TopicReading``); recall lets a small
store's whole history past the floor for a question on its topic (``RecallConfig.store_topic``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import weakref
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from lca.errors import EmbeddingFailedError
from lca.fileio import atomic_write_bytes
from lca.retrieval.query import unit_query_vector
from lca.temporal_anchor import MONTHS, TemporalAnchor, anchor_weight, temporal_anchor
from lca.types import as_utc, parse_timestamp

OFF_TOPIC_QUERIES = Path(__file__).resolve().parents[2] / "data" / "calibration" / "off_topic_queries.txt"
FLOOR_MODES = ("store", "absolute")
SMALL_STORE_VECTORS = 4096  # below this a recount is cheaper than deciding whether to skip it
REMEASURE_GROWTH = 0.02  # above it, remeasure when the vector count moved by more than this share
TOPIC_NEIGHBOURS = 3  # a question's subject in the store: the mean of its this many best cosines there
PROFILE_FORMAT = 1  # of the profile a store keeps (``fit_store_profile``)


def load_queries(path: Path | str) -> list[str]:
    """One query a line; blank lines and ``#`` comments skipped."""
    return [
        line.strip()
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


@dataclass(frozen=True)
class StoreFloor:
    """The floor one recall held candidates' cosine to, and what it was made of."""

    value: float
    mode: str  # store | absolute
    absolute: float
    minimum: float
    margin: float
    ceiling: float | None = None  # the best cosine this store's off-topic questions reach; None: not measured

    def describe(self) -> str:
        if self.mode == "absolute" or self.ceiling is None:
            why = "absolute" if self.mode == "absolute" else "absolute: no off-topic ceiling measured"
            return f"floor {self.value:.3f} ({why})"
        return (
            f"floor {self.value:.3f} (store: off-topic ceiling {self.ceiling:.3f} + margin {self.margin:.2f}, "
            f"within [{self.minimum:.2f}, {self.absolute:.2f}])"
        )


@dataclass(frozen=True)
class StoreProfile:
    """What one store's own vectors say about the questions it can answer, measured once per store state."""

    count: int  # the vectors it was measured on
    ceiling: float | None  # the best cosine an off-topic question reaches anywhere in the store
    centroid: np.ndarray | None = field(default=None, compare=False, repr=False)  # the unit mean of its vectors
    topic_ceiling: float | None = None  # the best cosine an off-topic question reaches to that centroid
    # a small store's vectors (at most SMALL_STORE_VECTORS), kept to read a question's subject in it ...
    vectors: np.ndarray | None = field(default=None, compare=False, repr=False)
    subject_ceiling: float | None = None  # ... and the best mean of TOPIC_NEIGHBOURS cosines off-topic questions reach


@dataclass(frozen=True)
class TopicReading:
    """A question read against its store's topic: its cosine to the store's centroid, and the mean of its
    ``TOPIC_NEIGHBOURS`` best cosines in the store (its subject there), each beside the best that off-topic
    questions reach the same way. Above either ceiling plus ``margin`` the question is on the store's topic:
    the centroid reads a history about one thing, the subject a history about several."""

    cosine: float
    ceiling: float
    margin: float
    subject: float | None = None
    subject_ceiling: float | None = None

    @property
    def on_centroid(self) -> bool:
        return self.cosine > self.ceiling + self.margin

    @property
    def on_subject(self) -> bool:
        return (
            self.subject is not None
            and self.subject_ceiling is not None
            and (self.subject > self.subject_ceiling + self.margin)
        )

    @property
    def on_topic(self) -> bool:
        return self.on_centroid or self.on_subject

    def describe(self) -> str:
        if self.on_subject and not self.on_centroid:
            return (
                f"mean of its {TOPIC_NEIGHBOURS} best cosines in the store {self.subject:.3f} > off-topic ceiling "
                f"there {self.subject_ceiling:.3f} + margin {self.margin:.2f}"
            )
        relation = ">" if self.on_centroid else "<="
        return (
            f"cosine to the store's centroid {self.cosine:.3f} {relation} off-topic ceiling there "
            f"{self.ceiling:.3f} + margin {self.margin:.2f}"
        )


_query_vectors: dict[tuple[str, str], np.ndarray] = {}
_profiles: weakref.WeakKeyDictionary[Any, StoreProfile] = weakref.WeakKeyDictionary()


def _off_topic_vectors(index: Any, path: Path) -> np.ndarray | None:
    """The off-topic questions as the store's embedder embeds a query; once per embedder and file."""
    return _embedded_off_topic(index.embedder, path, index.query_vector)


def prime_off_topic(embedder: Any, path: Path | None = None) -> bool:
    """Embed the off-topic questions for ``embedder`` now, as a store's query would (unit vectors), so that the
    first recall of a process does not pay for about 50 query embeddings; a harness measuring recall calls it at
    warm-up. False: no questions to embed, or one that does not embed to a usable vector (nothing is kept then, and
    the first recall embeds them through the store, which fails closed on such a vector)."""
    try:
        vectors = _embedded_off_topic(embedder, path or OFF_TOPIC_QUERIES, lambda q: unit_query_vector(embedder, q))
    except EmbeddingFailedError:
        return False
    return vectors is not None


def _query_key(embedder: Any, path: Path) -> tuple[str, str]:
    return str(getattr(embedder, "embedder_id", type(embedder).__name__)), str(path)


def _embedded_off_topic(embedder: Any, path: Path, embed_query: Any) -> np.ndarray | None:
    key = _query_key(embedder, path)
    if key not in _query_vectors:
        if not path.exists():
            return None
        queries = load_queries(path)
        if not queries:
            return None
        _query_vectors[key] = np.stack([embed_query(q) for q in queries]).astype(np.float32)
    return _query_vectors[key]


def _vector_count(index: Any) -> int | None:
    try:
        return len(index.vectors)
    except Exception:  # an index without a countable vector store: measure every time
        return None


def _stored(index: Any) -> np.ndarray | None:
    lister = getattr(index, "stored_vectors", None)
    if lister is None:
        return None
    stored, _ = lister()
    return np.asarray(stored, dtype=np.float32) if len(stored) else None


def best_cosines(index: Any, query_vectors: np.ndarray) -> np.ndarray | None:
    """Each query's best cosine anywhere in the store (a chunk's text or any of its sentence keys): the
    value recall holds to the floor, for every candidate the store could offer. None when the index
    cannot list its vectors or holds none (then nothing is lowered)."""
    stored = _stored(index)
    if stored is None:
        return None
    return (np.asarray(query_vectors, dtype=np.float32) @ stored.T).max(axis=1)


def _holds(measured: int, count: int | None) -> bool:
    """Whether a profile measured on ``measured`` vectors still describes a store of ``count``: the same count, or
    a large store within ``REMEASURE_GROWTH`` of it."""
    return count is not None and (
        measured == count or (measured >= SMALL_STORE_VECTORS and abs(count - measured) <= REMEASURE_GROWTH * measured)
    )


def _remember(index: Any, profile: StoreProfile | None) -> None:
    try:
        if profile is not None:
            _profiles[index] = profile
    except TypeError:  # not weak-referenceable: no cache
        pass


def store_profile(index: Any, path: Path | None = None) -> StoreProfile | None:
    """The off-topic ceiling and the topic centroid of this store: the one ingest fitted and kept in the store
    (``fit_store_profile``), read once per index while it holds; measured here (kept in memory only) just for a
    store no ingest fitted (indexed by an older version, or its file gone). None: no vectors."""
    path = path or OFF_TOPIC_QUERIES
    count = _vector_count(index)
    if count == 0:
        return None
    cached = _profiles.get(index)
    if cached is not None and _holds(cached.count, count):
        return cached
    kept = _read_kept(index, path, count)
    profile = kept[0] if kept is not None and _holds(kept[0].count, count) else _measure(index, path, count)
    _remember(index, profile)
    return profile


def fit_store_profile(index: Any, path: Path | None = None) -> StoreProfile | None:
    """Fit this store's profile at ingest unless the one it keeps still holds, and keep it in the store
    (``StoreLayout.floor_profile``, with the off-topic questions' vectors, so a later ingest embeds none): recall
    reads it and never fits it on its path (a first recall used to, about 0.9 s a store). The caller holds the
    writer lock."""
    path = path or OFF_TOPIC_QUERIES
    count = _vector_count(index)
    if not count:
        return None
    kept = _read_kept(index, path, count)
    if kept is not None and _holds(kept[0].count, count):
        _remember(index, kept[0])
        return kept[0]
    if kept is not None and kept[1] is not None:  # the questions' vectors this embedder gave: not embedded again
        _query_vectors.setdefault(_query_key(index.embedder, path), kept[1])
    profile = _measure(index, path, count)
    at = _kept_path(index)
    if profile is not None and at is not None:
        vectors = _off_topic_vectors(index, path)
        meta = {
            "format": PROFILE_FORMAT,
            "embedder": str(getattr(index.embedder, "embedder_id", "")),
            "queries": _queries_digest(path),
            "count": profile.count,
            "ceiling": profile.ceiling,
            "topic_ceiling": profile.topic_ceiling,
            "subject_ceiling": profile.subject_ceiling,
        }
        data = io.BytesIO()
        np.savez(
            data,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            centroid=profile.centroid if profile.centroid is not None else np.zeros(0, np.float32),
            off_topic=vectors if vectors is not None else np.zeros((0, 0), np.float32),
        )
        atomic_write_bytes(at, data.getvalue())
    _remember(index, profile)
    return profile


def _kept_path(index: Any) -> Path | None:
    layout = getattr(index, "layout", None)
    return getattr(layout, "floor_profile", None)


def _queries_digest(path: Path) -> str:
    return hashlib.sha256("\n".join(load_queries(path)).encode()).hexdigest() if path.exists() else ""


def _read_kept(index: Any, path: Path, count: int | None) -> tuple[StoreProfile, np.ndarray | None] | None:
    """The profile the store keeps and its off-topic vectors, if fitted by this embedder on these questions; None
    where there is none, or it cannot be read (a cache: ingest fits it again)."""
    at = _kept_path(index)
    if at is None or not at.is_file():
        return None
    try:
        with np.load(at, allow_pickle=False) as kept:
            meta = json.loads(kept["meta"].tobytes())
            centroid, off_topic = np.asarray(kept["centroid"], np.float32), np.asarray(kept["off_topic"], np.float32)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None
    embedder = str(getattr(index.embedder, "embedder_id", ""))
    if meta.get("format") != PROFILE_FORMAT or meta.get("embedder") != embedder:
        return None
    if meta.get("queries") != _queries_digest(path):
        return None
    small = int(meta["count"]) <= SMALL_STORE_VECTORS and _holds(int(meta["count"]), count)
    profile = StoreProfile(
        int(meta["count"]),
        meta.get("ceiling"),
        centroid if len(centroid) else None,
        meta.get("topic_ceiling"),
        _stored(index) if small else None,  # a small store's vectors, read (not measured) to read a subject
        meta.get("subject_ceiling"),
    )
    return profile, off_topic if off_topic.size else None


def _measure(index: Any, path: Path, count: int | None) -> StoreProfile | None:
    """The store's profile measured now over its stored vectors (None: it lists none)."""
    stored = _stored(index)
    if stored is None:
        return None
    vectors = _off_topic_vectors(index, path)
    centroid = stored.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    centroid = centroid / norm if norm > 0 else None
    scores = vectors @ stored.T if vectors is not None else None
    small = len(stored) <= SMALL_STORE_VECTORS
    return StoreProfile(
        count or 0,
        float(scores.max()) if scores is not None else None,
        centroid,
        float((vectors @ centroid).max()) if vectors is not None and centroid is not None else None,
        stored if small else None,
        float(subject_scores(scores).max()) if scores is not None and small else None,
    )


def off_topic_ceiling(index: Any, path: Path | None = None) -> float | None:
    """The best cosine the off-topic questions reach in this store (cached per index while it is unchanged)."""
    profile = store_profile(index, path)
    return profile.ceiling if profile is not None else None


def subject_scores(scores: np.ndarray) -> np.ndarray:
    """Each row's mean of its ``TOPIC_NEIGHBOURS`` best cosines (all of them in a store holding fewer)."""
    k = min(TOPIC_NEIGHBOURS, scores.shape[1])
    return np.sort(scores, axis=1)[:, -k:].mean(axis=1)


def topic_reading(index: Any, query_vector: np.ndarray, margin: float) -> TopicReading | None:
    """``query_vector`` against this store's topic (its centroid, and its subject among the store's vectors
    where the store is small enough to keep them); None where the store has no measure of it."""
    profile = store_profile(index)
    if profile is None or profile.centroid is None or profile.topic_ceiling is None:
        return None
    query = np.asarray(query_vector, dtype=np.float32)
    cosine = float(query @ profile.centroid)
    subject = subject_ceiling = None
    if profile.vectors is not None and profile.subject_ceiling is not None:
        subject = round(float(subject_scores((profile.vectors @ query)[None, :])[0]), 6)
        subject_ceiling = round(profile.subject_ceiling, 6)
    return TopicReading(round(cosine, 6), round(profile.topic_ceiling, 6), margin, subject, subject_ceiling)


@contextmanager
def held_out_profile(index: Any, profile: StoreProfile) -> Iterator[None]:
    """Recall over ``index`` reads ``profile`` (its floor and its topic) while inside: how a calibration
    judges off-topic questions against ceilings fitted on other questions, never on themselves."""
    previous = _profiles.get(index)
    _profiles[index] = profile
    try:
        yield
    finally:
        if previous is None:
            _profiles.pop(index, None)
        else:
            _profiles[index] = previous


def store_floor(index: Any, *, floor: float, mode: str, minimum: float, margin: float) -> StoreFloor:
    """The floor for one recall over ``index``: the absolute one, or this store's off-topic ceiling plus the
    margin, clamped to ``[minimum, floor]``."""
    if mode == "absolute":
        return StoreFloor(floor, mode, floor, minimum, margin)
    ceiling = off_topic_ceiling(index)
    if ceiling is None:
        return StoreFloor(floor, mode, floor, minimum, margin)
    return StoreFloor(floor_value(ceiling, floor, minimum, margin), mode, floor, minimum, margin, round(ceiling, 6))


def floor_value(ceiling: float, floor: float, minimum: float, margin: float) -> float:
    """The store floor: the off-topic ceiling plus the margin, within ``[minimum, floor]``."""
    return round(min(floor, max(minimum, ceiling + margin)), 6)


# ---- what clears the floor besides similarity ------------------------------------------------------
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours|ourselves)\b", re.IGNORECASE
)


def query_anchor(query: str, as_of: datetime | None) -> TemporalAnchor | None:
    """The days a date expression in ``query`` points at, read against ``as_of`` as the ranking reads it
    (``lca.temporal_anchor.temporal_anchor``: "two weeks ago", "3 April 2026", "on April 10")."""
    return temporal_anchor(query, as_utc(as_of).replace(tzinfo=None) if as_of is not None else None)


def anchored(anchor: TemporalAnchor | None, timestamp: str | None) -> bool:
    """Whether a record dated ``timestamp`` lies where the query's date expression points."""
    if anchor is None:
        return False
    moment = parse_timestamp(timestamp)
    return moment is not None and anchor_weight(anchor, moment.replace(tzinfo=None)) > 0.0


_NAME_WORD = re.compile(r"[A-Za-z][A-Za-z0-9&'’-]*")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_NOT_NAMES = frozenset(
    "i i'm i've i'd i'll ok okay a an and at by for from in of on or the to with".split()
    + list(MONTHS)
    + "monday tuesday wednesday thursday friday saturday sunday".split()
)


def proper_names(text: str) -> frozenset[str]:
    """The names a text uses: capitalised words that do not open a sentence ("Tidewater", "Kessler GmbH",
    "Mazda3", "PR"), calendar and title words aside."""
    names = set()
    for sentence in _SENTENCE_BREAK.split(text):
        for word in _NAME_WORD.findall(sentence)[1:]:
            word = re.sub(r"['’]s$", "", word)
            if word[0].isupper() and word.lower() not in _NOT_NAMES:
                names.add(word)
    return frozenset(names)


def speaks_of_own_history(query: str) -> bool:
    """A question in the first person ("what did I say", "what we discussed", "my sister") is about the
    user's own life and history, so that history is its context; an encyclopedic question is not."""
    return _FIRST_PERSON.search(query) is not None
