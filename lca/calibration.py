"""Fit the recall similarity floor to one store.

The floor should sit above what coherent but off-topic questions reach in this store
and below what on-topic ones reach. Negatives: well-formed questions about unrelated
subjects (``data/calibration/off_topic_queries.txt`` or a user's list), scored by
their best cosine anywhere in the store. Positives: sampled stored chunks, queried by
their own first half (a partial restatement), scored by the cosine to their chunk.
The fitted floor is a high quantile of the negatives; the margin is how far the
positives' median sits above it. A negative that scores high is listed, because an
"off-topic" question may be on topic for this store.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from lca.index.vectors import vector_id_for
from lca.params import ParameterError
from lca.recall.floor import best_cosines, floor_value, held_out_profile, store_profile, subject_scores
from lca.recall.floor import load_queries as floor_queries
from lca.types import text_digest


@dataclass(frozen=True)
class FloorCalibration:
    floor: float
    quantile: float
    margin: float
    negatives: int
    positives: int
    negative_quantiles: dict[str, float]
    positive_quantiles: dict[str, float]
    positives_above_floor: float
    highest_negatives: list[tuple[float, str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def load_queries(path: Path) -> list[str]:
    """One query a line; blank lines and ``#`` comments skipped (the list recall's store floor reads too)."""
    return floor_queries(path)


def off_topic_injection(substrate, queries: Sequence[str], config=None, *, folds: int = 5) -> dict:
    """How often coherent off-topic questions get anything injected, under the absolute floor and under the
    store floor, both with every other setting of ``config`` (default: the store's).

    The store floor is measured held out: the questions are split into ``folds``; each fold's questions
    are recalled with the store's profile refitted on the other folds' questions (the floor from their best
    cosines, the store topic's ceilings from their cosines to the store's centroid and their best few cosines
    in the store; ``RecallConfig.store_topic``), so a question never lowers or raises a threshold it is
    judged by.
    """

    if not queries:
        raise ValueError("the injection rate needs at least one off-topic query")
    config = config or substrate.recall_config
    index = substrate.index
    absolute, store = replace(config, floor_mode="absolute"), replace(config, floor_mode="store")
    injected_absolute = [q for q in queries if substrate.recall(q, config=absolute).items]
    vectors = np.stack([index.query_vector(q) for q in queries]).astype(np.float32)
    best = best_cosines(index, vectors)
    profile = store_profile(index)
    if best is None or profile is None:
        raise ValueError("the store holds no vectors to measure off-topic questions against")
    to_centroid = vectors @ profile.centroid if profile.centroid is not None else None
    subjects = subject_scores(vectors @ profile.vectors.T) if profile.vectors is not None else None
    folds = max(2, min(folds, len(queries)))
    injected_store: list[str] = []
    fold_floors: list[float] = []
    for fold in range(folds):
        held = [i for i in range(len(queries)) if i % folds == fold]
        rest = [i for i in range(len(queries)) if i % folds != fold]
        if not held or not rest:
            continue
        ceiling = float(best[rest].max())
        refitted = replace(
            profile,
            ceiling=ceiling,
            topic_ceiling=float(to_centroid[rest].max()) if to_centroid is not None else profile.topic_ceiling,
            subject_ceiling=float(subjects[rest].max()) if subjects is not None else profile.subject_ceiling,
        )
        fold_floors.append(round(floor_value(ceiling, config.floor, config.floor_min, config.floor_margin), 4))
        with held_out_profile(index, refitted):
            injected_store += [queries[i] for i in held if substrate.recall(queries[i], config=store).items]
    return {
        "queries": len(queries),
        "absolute_floor": config.floor,
        "absolute_rate": round(len(injected_absolute) / len(queries), 4),
        "absolute_injected": injected_absolute,
        "store_floor_by_fold": fold_floors,
        "store_rate_held_out": round(len(injected_store) / len(queries), 4),
        "store_injected": injected_store,
    }


def calibrate_floor(
    index, negatives: Sequence[str], *, positives: int = 200, quantile: float = 0.95, seed: int = 13
) -> FloorCalibration:
    if not negatives:
        raise ValueError("calibration needs at least one off-topic query")
    if not 0.0 <= quantile <= 1.0:  # also refuses nan, which compares false with everything
        raise ParameterError("--quantile", str(quantile), "must be a number from 0 to 1")
    if positives < 1:
        raise ParameterError("--positives", str(positives), "must be at least 1")
    neg_scores: list[tuple[float, str, str]] = []
    for query in negatives:
        hits = index.search(query, k=1, mode="dense")
        if hits:
            neg_scores.append((float(hits[0].dense_score), query, hits[0].pointer.key()))
    rows, texts = index.catalog_.lexical_corpus()
    rng = random.Random(seed)
    picks = rng.sample(range(len(texts)), min(positives, len(texts)))
    pos = []
    for i in picks:
        words = texts[i].split()
        if len(words) < 6:
            continue
        half = " ".join(words[: len(words) // 2])
        stored = index.vectors.index_.reconstruct(vector_id_for(text_digest(texts[i])))
        pos.append(float(index.query_vector(half) @ stored))
    neg = np.array([s for s, _, _ in neg_scores]) if neg_scores else np.zeros(1)
    pos_arr = np.array(pos) if pos else np.zeros(1)
    floor = float(np.quantile(neg, quantile))
    qs = (0.05, 0.25, 0.5, 0.75, 0.95)
    return FloorCalibration(
        floor=round(floor, 4),
        quantile=quantile,
        margin=round(float(np.median(pos_arr)) - floor, 4),
        negatives=len(neg_scores),
        positives=len(pos),
        negative_quantiles={f"q{int(q * 100)}": round(float(np.quantile(neg, q)), 4) for q in qs},
        positive_quantiles={f"q{int(q * 100)}": round(float(np.quantile(pos_arr, q)), 4) for q in qs},
        positives_above_floor=round(float(np.mean(pos_arr >= floor)), 4),
        highest_negatives=sorted(neg_scores, reverse=True)[:5],
    )
