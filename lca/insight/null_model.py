"""The null model: how high a differential gets by chance, so a surfaced candidate must beat it.

The domain labels are shuffled (a permutation: each domain keeps its size) ``shuffles`` times, seeded. In each
shuffle a *spurious* pair is one the shuffled labels call cross-domain while the real labels put both records in
one domain: whatever differential it scores is what chance and a domain's own structural habits give, not a rhyme
across domains. Only pairs the surfacing rules could let through may be spurious (``eligible``: the cycle passes
the pairs whose records lie in different content clusters, as a surfaced pair's must), so the null is drawn at the
content distance of a real candidate: a same-domain pair's higher content similarity would otherwise discount it
below any cross-domain pair and make the threshold too easy.

Two statistics read the shuffles (``NULL_STATISTICS``):

- ``tail`` (the default): the spurious scores of every shuffle pooled; the threshold is the score a share ``tail`` of
  them exceed (``tail`` 0.001: one spurious pair in a thousand clears it). A per-pair false-positive rate, so the
  false discoveries it lets through grow with the pairs scored (linearly), and the threshold stays where it is as a
  store grows;
- ``max``: the best spurious score of each shuffle; the threshold is the declared ``quantile`` of those maxima. A
  family-wise bound: it grows with the count of same-domain pairs, so the larger the store the fewer rhymes clear it
  (docs/insight.md has both measured on the planted corpora).

Either way a real cross-domain pair surfaces only above it.

When no two records share a domain nothing can be spurious, and when too few shuffles yield a spurious pair the
quantile means nothing: the threshold is then undefined, with the reason, and the cycle surfaces nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

NULL_STATISTICS = ("tail", "max")


@dataclass(frozen=True)
class NullModel:
    """The threshold (None when undefined, ``reason`` says why) and the distribution it came from."""

    shuffles: int
    quantile: float
    seed: int
    threshold: float | None
    informative_shuffles: int  # shuffles that had at least one spurious pair
    best_spurious: tuple[float, ...]  # the best spurious score of each informative shuffle, sorted
    reason: str | None = None
    statistic: str = "max"
    tail: float | None = None  # the ``tail`` statistic's share of spurious scores above the threshold
    # distinct eligible same-domain pairs (fewer than 1 / tail: the threshold is near their max)
    spurious_pairs: int = 0
    pooled_spurious: int = 0  # spurious scores pooled over the shuffles

    def summary(self) -> dict[str, object]:
        values = np.asarray(self.best_spurious, dtype=np.float64)
        spread = {}
        if values.size:
            spread = {
                "min": float(values.min()),
                "median": float(np.median(values)),
                "max": float(values.max()),
            }
        # what the family-wise statistic would set on the same shuffles, beside whichever one set the threshold
        best_quantile = float(np.quantile(values, self.quantile, method="higher")) if values.size else None
        return {
            "statistic": self.statistic,
            "max_statistic_threshold": best_quantile,
            "tail": self.tail,
            "spurious_pairs": self.spurious_pairs,
            "pooled_spurious": self.pooled_spurious,
            "shuffles": self.shuffles,
            "quantile": self.quantile,
            "seed": self.seed,
            "threshold": self.threshold,
            "informative_shuffles": self.informative_shuffles,
            "best_spurious": spread,
            "reason": self.reason,
        }


def null_threshold(
    first: np.ndarray,
    second: np.ndarray,
    scores: np.ndarray,
    domains: Sequence[str],
    *,
    eligible: np.ndarray | None = None,
    shuffles: int,
    quantile: float,
    seed: int,
    statistic: str = "tail",
    tail: float = 0.001,
    min_informative: int = 20,
) -> NullModel:
    """The threshold for pairs ``(first[k], second[k])`` (indexes into ``domains``) scored ``scores[k]``; only the
    pairs where ``eligible`` is true (all, when None) can be spurious. ``statistic`` reads the shuffles: ``tail``
    (the pooled spurious scores' upper ``tail``) or ``max`` (the ``quantile`` of each shuffle's best)."""
    if shuffles < 1 or not 0.0 < quantile < 1.0:
        raise ValueError(f"shuffles must be >= 1 and quantile in (0, 1), got {shuffles}, {quantile}")
    if statistic not in NULL_STATISTICS or not 0.0 < tail < 1.0:
        raise ValueError(
            f"statistic must be one of {', '.join(NULL_STATISTICS)} and tail in (0, 1), got {statistic}, {tail}"
        )
    labels = np.unique(np.asarray(domains), return_inverse=True)[1]
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    same_domain = labels[first] == labels[second]
    if eligible is not None:
        same_domain &= np.asarray(eligible, dtype=bool)

    described = NullModel(
        shuffles,
        quantile,
        seed,
        None,
        0,
        (),
        statistic=statistic,
        tail=tail if statistic == "tail" else None,
        spurious_pairs=int(same_domain.sum()),
    )

    def undefined(reason: str, best: Sequence[float] = ()) -> NullModel:
        return replace(described, informative_shuffles=len(best), best_spurious=tuple(sorted(best)), reason=reason)

    if not same_domain.any():
        return undefined("no eligible scored pair lies within one domain: nothing can be spurious, so no threshold")
    rng = np.random.default_rng(seed)
    best: list[float] = []
    pooled: list[np.ndarray] = []  # every spurious score, kept only for the tail statistic
    pooled_count = 0
    for _ in range(shuffles):
        shuffled = rng.permutation(labels)
        spurious = same_domain & (shuffled[first] != shuffled[second])
        if spurious.any():
            best.append(float(scores[spurious].max()))
            pooled_count += int(spurious.sum())
            if statistic == "tail":
                pooled.append(scores[spurious])
    needed = min(min_informative, shuffles)
    if len(best) < needed:
        return undefined(
            f"only {len(best)} of {shuffles} shuffles made a spurious pair (at least {needed} needed)", best
        )
    if statistic == "tail":
        threshold = float(np.quantile(np.concatenate(pooled), 1.0 - tail, method="higher"))
    else:
        threshold = float(np.quantile(np.asarray(best), quantile, method="higher"))
    return replace(
        described,
        threshold=threshold,
        informative_shuffles=len(best),
        best_spurious=tuple(sorted(best)),
        pooled_spurious=pooled_count,
    )
