"""Named fusion functions over the candidates' dense and lexical scores.

Each takes per-candidate arrays (``nan`` where a candidate was not retrieved by that side) and returns one
fused score per candidate; higher is better. ``rrf`` (Cormack et al. 2009) reads only ranks, ``zscore``
standardizes each side (over the statistics' population, see ``RetrievalConfig.z_scope``), ``blend``
min-max normalizes each side over the candidates it retrieved.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def ranks_of(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each present score (descending; ties by position); ``nan`` stays unranked (0)."""
    present = ~np.isnan(scores)
    order = np.lexsort((np.arange(len(scores)), -np.where(present, scores, -np.inf)))
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    ranks[~present] = 0
    return ranks


def rrf(dense: np.ndarray, lexical: np.ndarray, *, dense_weight=1.0, bm25_weight=1.0, rrf_k=60, **_) -> np.ndarray:
    fused = np.zeros(len(dense), dtype=np.float64)
    for weight, scores in ((dense_weight, dense), (bm25_weight, lexical)):
        ranks = ranks_of(scores)
        hit = ranks > 0
        fused[hit] += weight / (rrf_k + ranks[hit])
    return fused


def standardize(scores: np.ndarray, population: np.ndarray | None = None) -> np.ndarray:
    """``(x - mean) / std`` with the statistics taken over ``population`` (default: the present scores);
    absent scores become the population's minimum first (a chunk a side did not retrieve scores lowest)."""
    values = np.asarray(scores, dtype=np.float64)
    present = ~np.isnan(values)
    if not present.any():
        return np.zeros(len(values))
    stats = values[present] if population is None else np.asarray(population, dtype=np.float64)
    values = np.where(present, values, stats.min())
    spread = stats.std()
    return (values - stats.mean()) / (spread if spread > 0 else 1.0)


def zscore(
    dense: np.ndarray,
    lexical: np.ndarray,
    *,
    dense_weight=1.0,
    bm25_weight=1.0,
    dense_population: np.ndarray | None = None,
    lexical_population: np.ndarray | None = None,
    **_,
) -> np.ndarray:
    return dense_weight * standardize(dense, dense_population) + bm25_weight * standardize(lexical, lexical_population)


def blend(dense: np.ndarray, lexical: np.ndarray, *, dense_weight=1.0, bm25_weight=1.0, **_) -> np.ndarray:
    fused = np.zeros(len(dense), dtype=np.float64)
    for weight, scores in ((dense_weight, dense), (bm25_weight, lexical)):
        present = ~np.isnan(scores)
        if not present.any():
            continue
        low, high = scores[present].min(), scores[present].max()
        span = (high - low) or 1.0
        fused[present] += weight * (scores[present] - low) / span
    return fused


FUSIONS: dict[str, Callable[..., np.ndarray]] = {"rrf": rrf, "z": zscore, "blend": blend}


def fuse(name: str, dense: np.ndarray, lexical: np.ndarray, **options) -> np.ndarray:
    try:
        function = FUSIONS[name]
    except KeyError:
        raise ValueError(f"unknown fusion {name!r}; known: {', '.join(FUSIONS)}") from None
    return function(np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64), **options)
