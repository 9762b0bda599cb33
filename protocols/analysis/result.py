"""The record every statistical test returns, the input checks they share, and bootstrap intervals.

Kept apart from ``stats`` so that the model and power modules can use them without an import cycle;
``protocols.analysis.stats`` re-exports everything public here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lca.errors import LCAError

# Resampled rows held in memory at once (resamples x n floats), so a large input is bootstrapped in chunks.
_CHUNK_CELLS = 2_000_000
# McNemar runs the exact binomial test below this many discordant pairs, the chi-square test from it on.
EXACT_MCNEMAR_BELOW = 25


class StatisticsInputError(LCAError, ValueError):
    """Input a test cannot honestly analyse (mismatched lengths, too few values, values off the scale)."""


@dataclass(frozen=True)
class TestResult:
    """One test's outcome. Every test states its n, an effect size and an interval, so that no number in
    a report stands without the sample it came from and its uncertainty. ``detail`` says which test ran,
    how the interval was computed, what was dropped and any fallback taken."""

    __test__ = False  # not a pytest test class, despite the name

    test: str
    n: int
    estimate: float
    ci_low: float
    ci_high: float
    statistic: float | None
    p_value: float | None
    effect_size: float | None
    effect_name: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: plain floats, and None where a number is missing or not finite (JSON has no NaN)."""
        return {key: _json_value(value) for key, value in asdict(self).items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    return value


# ---- input checks ---------------------------------------------------------------------------------
def as_floats(values: Any, name: str) -> np.ndarray:
    """A 1-d float array; refuses text and nested input with a message naming the argument."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise StatisticsInputError(f"{name}: expected numbers, got values that are not ({exc})") from exc
    if array.ndim != 1:
        raise StatisticsInputError(f"{name}: expected one value per item (1-d), got shape {array.shape}")
    return array


def paired_arrays(a: Any, b: Any, min_n: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both sides as float arrays with every pair holding a missing value (NaN) dropped; returns
    (a, b, kept) where kept is the boolean mask over the input pairs. Refuses unequal lengths: a paired
    test needs one value per item on each side, in the same item order."""
    x, y = as_floats(a, "a"), as_floats(b, "b")
    if x.shape != y.shape:
        raise StatisticsInputError(
            f"paired test: a has {x.size} values and b has {y.size}; pair the conditions item by item first"
        )
    kept = np.isfinite(x) & np.isfinite(y)
    if int(kept.sum()) < min_n:
        raise StatisticsInputError(
            f"paired test: {int(kept.sum())} complete pairs (of {x.size}) after dropping missing values; "
            f"at least {min_n} are needed"
        )
    return x[kept], y[kept], kept


def check_level(level: float, name: str = "level") -> None:
    if not 0.0 < level < 1.0:
        raise StatisticsInputError(f"{name} must lie strictly between 0 and 1, got {level}")


def check_resamples(resamples: int) -> None:
    if int(resamples) < 1:
        raise StatisticsInputError(f"resamples must be at least 1, got {resamples}")


def dropped_note(n_in: int, n_kept: int, unit: str = "pairs") -> str:
    dropped = n_in - n_kept
    return f"{dropped} of {n_in} {unit} dropped for missing values" if dropped else f"no {unit} dropped"


# ---- bootstrap ------------------------------------------------------------------------------------
def bootstrap_distribution(values: np.ndarray, stat: Callable[..., Any], resamples: int, seed: int) -> np.ndarray:
    """The statistic over ``resamples`` resamples of ``values`` (with replacement), drawn from
    ``numpy.random.default_rng(seed)`` so the same seed gives the same distribution."""
    rng = np.random.default_rng(seed)
    n = values.size
    chunk = max(1, _CHUNK_CELLS // max(n, 1))
    out: list[np.ndarray] = []
    remaining = int(resamples)
    while remaining > 0:
        rows = min(chunk, remaining)
        samples = values[rng.integers(0, n, size=(rows, n))]
        out.append(_apply_rows(stat, samples))
        remaining -= rows
    return np.concatenate(out)


def _apply_rows(stat: Callable[..., Any], samples: np.ndarray) -> np.ndarray:
    """``stat`` over each row: vectorised when it takes ``axis`` (numpy reductions), else row by row."""
    try:
        result = np.asarray(stat(samples, axis=1), dtype=float)
        if result.shape == (samples.shape[0],):
            return result
    except TypeError:
        pass
    return np.array([float(stat(row)) for row in samples])


def percentile_interval(distribution: np.ndarray, level: float) -> tuple[float, float]:
    finite = distribution[np.isfinite(distribution)]
    if finite.size == 0:
        return math.nan, math.nan
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    stat: Callable[..., Any] = np.mean,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over the values (missing values dropped first).
    Deterministic for a given seed. Refuses fewer than two values: one value has no spread to resample."""
    check_level(level)
    check_resamples(resamples)
    array = as_floats(values, "values")
    array = array[np.isfinite(array)]
    if array.size < 2:
        raise StatisticsInputError(f"bootstrap_ci: {array.size} non-missing values; at least 2 are needed")
    return percentile_interval(bootstrap_distribution(array, stat, resamples, seed), level)


def cluster_bootstrap_distribution(
    values: np.ndarray, codes: np.ndarray, stat: Callable[..., Any], resamples: int, seed: int
) -> np.ndarray:
    """The statistic over resamples that draw whole clusters with replacement (codes 0..G-1), so items
    that share a scenario move together and the interval reflects between-cluster variation."""
    rng = np.random.default_rng(seed)
    n_clusters = int(codes.max()) + 1
    draws = rng.integers(0, n_clusters, size=(int(resamples), n_clusters))
    if stat is np.mean:  # the common case, exactly and fast: sums and counts per cluster
        sums = np.bincount(codes, weights=values, minlength=n_clusters)
        counts = np.bincount(codes, minlength=n_clusters).astype(float)
        return sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    members = [values[codes == c] for c in range(n_clusters)]
    return np.array([float(stat(np.concatenate([members[c] for c in row]))) for row in draws])


def cluster_codes(clusters: Any, size: int) -> np.ndarray:
    """Integer codes 0..G-1 for the cluster labels (any hashable values); refuses a length mismatch."""
    labels = list(clusters)
    if len(labels) != size:
        raise StatisticsInputError(f"clusters: {len(labels)} labels for {size} values; give one label per value")
    index: dict[Any, int] = {}
    return np.array([index.setdefault(label, len(index)) for label in labels], dtype=int)


def cluster_bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[Any],
    stat: Callable[..., Any] = np.mean,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval from a cluster bootstrap (whole clusters resampled). Missing values are
    dropped with their labels; refuses fewer than two clusters, which leave nothing to resample between."""
    check_level(level)
    check_resamples(resamples)
    array = as_floats(values, "values")
    labels = list(clusters)
    if len(labels) != array.size:
        raise StatisticsInputError(f"clusters: {len(labels)} labels for {array.size} values; give one label per value")
    kept = np.isfinite(array)
    codes = cluster_codes([label for label, keep in zip(labels, kept) if keep], int(kept.sum()))
    if codes.size == 0 or codes.max() < 1:
        raise StatisticsInputError(
            f"cluster_bootstrap_ci: {0 if codes.size == 0 else 1} cluster(s) with values; at least 2 are needed"
        )
    distribution = cluster_bootstrap_distribution(array[kept], codes, stat, resamples, seed)
    return percentile_interval(distribution, level)
