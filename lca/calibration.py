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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lca.index.vectors import vector_id_for
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
    return [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def calibrate_floor(
    index, negatives: Sequence[str], *, positives: int = 200, quantile: float = 0.95, seed: int = 13
) -> FloorCalibration:
    if not negatives:
        raise ValueError("calibration needs at least one off-topic query")
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
