"""Statistics for study results, with scipy and statsmodels: paired tests for conditions compared item
by item (McNemar for binary measures, Wilcoxon or a paired bootstrap for continuous ones), TOST
equivalence for parity predictions, Holm correction, bootstrap intervals, condition models (mixed or
cluster-robust, in ``models``) and power / sample size (in ``power``).

Every test returns a ``TestResult`` stating its n, an effect size and an interval. Missing values (NaN)
are dropped pairwise and n counts what remained; inputs a test cannot honestly analyse are refused with a
``StatisticsInputError`` naming the problem, never coerced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttost_ind, ttost_paired

from protocols.analysis.models import condition_model
from protocols.analysis.power import power_mcnemar, power_tost_paired, required_n, sample_size_paired
from protocols.analysis.result import (
    EXACT_MCNEMAR_BELOW,
    StatisticsInputError,
    TestResult,
    as_floats,
    bootstrap_ci,
    bootstrap_distribution,
    check_level,
    check_resamples,
    cluster_bootstrap_ci,
    cluster_bootstrap_distribution,
    cluster_codes,
    dropped_note,
    paired_arrays,
    percentile_interval,
)

__all__ = [
    "EXACT_MCNEMAR_BELOW",
    "StatisticsInputError",
    "TestResult",
    "bootstrap_ci",
    "cluster_bootstrap_ci",
    "condition_model",
    "holm",
    "paired_binary",
    "paired_continuous",
    "pairwise_contrasts",
    "proportion_difference_interval",
    "proportion_interval",
    "power_mcnemar",
    "power_tost_paired",
    "required_n",
    "sample_size_paired",
    "tost_ind",
    "tost_paired",
]

PAIRED_METHODS = ("wilcoxon", "bootstrap")
BINARY_SCALES = ("binary",)
CONTINUOUS_SCALES = ("continuous", "count", "interval", "ordinal")


def _difference_distribution(
    diff: np.ndarray, clusters: Any, kept: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, str]:
    """Bootstrap distribution of the mean paired difference: pairs resampled, or whole clusters when
    cluster labels are given (items of one scenario are not independent)."""
    if clusters is None:
        return bootstrap_distribution(
            diff, np.mean, resamples, seed
        ), f"paired bootstrap ({resamples} resamples, seed {seed})"
    labels = list(clusters)
    if len(labels) != kept.size:
        raise StatisticsInputError(f"clusters: {len(labels)} labels for {kept.size} pairs; give one label per pair")
    codes = cluster_codes([label for label, keep in zip(labels, kept) if keep], diff.size)
    if codes.max() < 1:
        raise StatisticsInputError("clusters: every kept pair is in one cluster; a cluster bootstrap needs at least 2")
    distribution = cluster_bootstrap_distribution(diff, codes, np.mean, resamples, seed)
    return distribution, f"cluster bootstrap over {codes.max() + 1} clusters ({resamples} resamples, seed {seed})"


def _d_z(diff: np.ndarray) -> float | None:
    """Cohen's d_z: mean paired difference over the SD of the differences; None when they do not vary."""
    sd = float(np.std(diff, ddof=1)) if diff.size > 1 else 0.0
    return float(np.mean(diff) / sd) if sd > 0 else None


def paired_binary(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Any] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> TestResult:
    """McNemar's test of two conditions scored 0/1 on the same items (a[i] and b[i] are item i).

    Exact binomial test on the discordant pairs when there are fewer than 25, else the continuity-corrected
    chi-square test (statsmodels ``mcnemar``). The estimate and effect size are the difference in
    proportions mean(a) - mean(b), with a paired (or cluster) bootstrap interval."""
    check_level(level)
    check_resamples(resamples)
    x, y, kept = paired_arrays(a, b)
    off_scale = sorted(set(np.unique(np.concatenate([x, y])).tolist()) - {0.0, 1.0})
    if off_scale:
        raise StatisticsInputError(f"paired_binary: values must be 0 or 1, found {off_scale[:5]}")
    n = x.size
    n10 = int(np.sum((x == 1) & (y == 0)))
    n01 = int(np.sum((x == 0) & (y == 1)))
    n11 = int(np.sum((x == 1) & (y == 1)))
    n00 = n - n10 - n01 - n11
    discordant = n10 + n01
    exact = discordant < EXACT_MCNEMAR_BELOW
    if discordant == 0:
        statistic, p_value = 0.0, 1.0
    else:
        res = mcnemar([[n11, n10], [n01, n00]], exact=exact, correction=True)
        statistic, p_value = float(res.statistic), float(res.pvalue)
    diff = x - y
    distribution, how = _difference_distribution(diff, clusters, kept, resamples, seed)
    low, high = percentile_interval(distribution, level)
    estimate = float(diff.mean())
    odds = f"{n10 / n01:.3g}" if n01 else ("undefined" if n10 == 0 else "infinite")
    test_name = "exact binomial" if exact else "chi-square with continuity correction"
    detail = (
        f"McNemar ({test_name}) on {discordant} discordant pairs: a only {n10}, b only {n01} "
        f"(conditional odds ratio {odds}); both {n11}, neither {n00}; {level:.0%} interval: {how}; "
        f"{dropped_note(kept.size, n)}"
    )
    return TestResult(
        test="mcnemar",
        n=n,
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        statistic=statistic,
        p_value=p_value,
        effect_size=estimate,
        effect_name="difference in proportions (a - b)",
        detail=detail,
    )


def _rank_biserial(diff: np.ndarray) -> float | None:
    """Matched-pairs rank-biserial correlation (R+ - R-) / (R+ + R-) over the non-zero differences."""
    nonzero = diff[diff != 0]
    if nonzero.size == 0:
        return None
    ranks = sps.rankdata(np.abs(nonzero))
    r_plus, r_minus = ranks[nonzero > 0].sum(), ranks[nonzero < 0].sum()
    return float((r_plus - r_minus) / (r_plus + r_minus))


def paired_continuous(
    a: Sequence[float],
    b: Sequence[float],
    method: str = "wilcoxon",
    *,
    clusters: Sequence[Any] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> TestResult:
    """Two conditions' continuous scores on the same items. ``wilcoxon``: scipy's signed-rank test (zero
    differences dropped, as Wilcoxon did), effect size the matched-pairs rank-biserial correlation.
    ``bootstrap``: a paired bootstrap of the mean difference, two-sided p from the bootstrap distribution
    shifted to the null (Hall & Wilson), effect size Cohen's d_z. Both estimate the mean difference a - b
    with a bootstrap interval."""
    if method not in PAIRED_METHODS:
        raise StatisticsInputError(f"paired_continuous: method must be one of {PAIRED_METHODS}, got {method!r}")
    check_level(level)
    check_resamples(resamples)
    x, y, kept = paired_arrays(a, b)
    diff = x - y
    n = diff.size
    estimate = float(diff.mean())
    distribution, how = _difference_distribution(diff, clusters, kept, resamples, seed)
    low, high = percentile_interval(distribution, level)
    d_z = _d_z(diff)
    notes = [f"{level:.0%} interval of the mean difference: {how}", dropped_note(kept.size, n)]
    if method == "wilcoxon":
        zeros = int(np.sum(diff == 0))
        if zeros == n:
            statistic, p_value = 0.0, 1.0
            notes.insert(0, "every difference is zero: no evidence of a difference (p = 1)")
        else:
            res = sps.wilcoxon(x, y, zero_method="wilcox")
            statistic, p_value = float(res.statistic), float(res.pvalue)
            notes.insert(0, f"Wilcoxon signed-rank on {n - zeros} non-zero differences ({zeros} zero dropped)")
        notes.append(f"d_z {d_z:.3g}" if d_z is not None else "d_z undefined (differences do not vary)")
        return TestResult(
            test="wilcoxon",
            n=n,
            estimate=estimate,
            ci_low=low,
            ci_high=high,
            statistic=statistic,
            p_value=p_value,
            effect_size=_rank_biserial(diff),
            effect_name="matched-pairs rank-biserial r",
            detail="; ".join(notes),
        )
    extreme = int(np.sum(np.abs(distribution - estimate) >= abs(estimate)))
    p_value = (extreme + 1) / (distribution.size + 1)
    notes.insert(0, "paired bootstrap test of the mean difference (p from the null-shifted distribution)")
    return TestResult(
        test="paired_bootstrap",
        n=n,
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        statistic=None,
        p_value=float(p_value),
        effect_size=d_z,
        effect_name="Cohen's d_z (mean difference / SD of differences)",
        detail="; ".join(notes),
    )


def _check_tost(margin: float, alpha: float) -> None:
    if not (margin > 0 and math.isfinite(margin)):
        raise StatisticsInputError(f"TOST: the equivalence margin must be a positive number, got {margin}")
    if not 0.0 < alpha < 0.5:
        raise StatisticsInputError(f"TOST: alpha must lie in (0, 0.5), got {alpha}")


def _verdict(p_value: float, alpha: float, margin: float) -> str:
    word = "equivalent" if p_value < alpha else "not equivalent"
    return f"{word} within ±{margin:g} at alpha {alpha:g} (TOST p {p_value:.3g})"


def tost_paired(a: Sequence[float], b: Sequence[float], margin: float, alpha: float = 0.05) -> TestResult:
    """Two one-sided t tests that the mean paired difference a - b lies inside (-margin, margin)
    (statsmodels ``ttost_paired``). The interval is the (1 - 2 alpha) t interval, which lies inside the
    margins exactly when equivalence is shown; ``detail`` begins with the verdict ("equivalent" or
    "not equivalent")."""
    _check_tost(margin, alpha)
    x, y, kept = paired_arrays(a, b)
    diff = x - y
    n = diff.size
    mean = float(diff.mean())
    sd = float(np.std(diff, ddof=1))
    notes = [f"paired t, df {n - 1}", f"{1 - 2 * alpha:.0%} t interval", dropped_note(kept.size, n)]
    if sd == 0:
        p_value = 0.0 if abs(mean) < margin else 1.0
        statistic, low, high = None, mean, mean
        notes.insert(0, f"every difference equals {mean:g}: no variance, so the verdict rests on the mean alone")
    else:
        p_value, lower, upper = ttost_paired(x, y, -margin, margin)
        p_value = float(p_value)
        statistic = float(lower[0] if lower[1] >= upper[1] else upper[0])  # the binding one-sided test
        half = float(sps.t.ppf(1 - alpha, n - 1)) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
    return TestResult(
        test="tost_paired",
        n=n,
        estimate=mean,
        ci_low=low,
        ci_high=high,
        statistic=statistic,
        p_value=p_value,
        effect_size=_d_z(diff),
        effect_name="Cohen's d_z (mean difference / SD of differences)",
        detail="; ".join([_verdict(p_value, alpha, margin), *notes]),
    )


def tost_ind(
    a: Sequence[float], b: Sequence[float], margin: float, alpha: float = 0.05, usevar: str = "pooled"
) -> TestResult:
    """TOST for two independent samples (statsmodels ``ttost_ind``; ``usevar="unequal"`` for Welch).
    Missing values are dropped from each side; n is both sides together."""
    _check_tost(margin, alpha)
    if usevar not in ("pooled", "unequal"):
        raise StatisticsInputError(f"tost_ind: usevar must be 'pooled' or 'unequal', got {usevar!r}")
    raw_x, raw_y = as_floats(a, "a"), as_floats(b, "b")
    x, y = raw_x[np.isfinite(raw_x)], raw_y[np.isfinite(raw_y)]
    if x.size < 2 or y.size < 2:
        raise StatisticsInputError(f"tost_ind: {x.size} and {y.size} non-missing values; each side needs at least 2")
    mean = float(x.mean() - y.mean())
    var_x, var_y = float(np.var(x, ddof=1)), float(np.var(y, ddof=1))
    pooled_sd = math.sqrt(((x.size - 1) * var_x + (y.size - 1) * var_y) / (x.size + y.size - 2))
    notes = [
        f"{'pooled' if usevar == 'pooled' else 'Welch'} t, n_a {x.size}, n_b {y.size}",
        f"{1 - 2 * alpha:.0%} t interval",
        dropped_note(raw_x.size + raw_y.size, x.size + y.size, "values"),
    ]
    if pooled_sd == 0:
        p_value = 0.0 if abs(mean) < margin else 1.0
        statistic, low, high, effect = None, mean, mean, None
        notes.insert(0, "neither side varies: the verdict rests on the difference of means alone")
    else:
        p_value, lower, upper = ttost_ind(x, y, -margin, margin, usevar=usevar)
        p_value = float(p_value)
        statistic = float(lower[0] if lower[1] >= upper[1] else upper[0])
        low, high = CompareMeans(DescrStatsW(x), DescrStatsW(y)).tconfint_diff(alpha=2 * alpha, usevar=usevar)
        low, high, effect = float(low), float(high), mean / pooled_sd
    return TestResult(
        test="tost_ind",
        n=x.size + y.size,
        estimate=mean,
        ci_low=low,
        ci_high=high,
        statistic=statistic,
        p_value=p_value,
        effect_size=effect,
        effect_name="Cohen's d (difference of means / pooled SD)",
        detail="; ".join([_verdict(p_value, alpha, margin), *notes]),
    )


def holm(p_values: Sequence[float | None]) -> list[float]:
    """Holm-adjusted p-values (statsmodels ``multipletests``, method "holm"), in the input order. A
    missing p-value (None or NaN) stays NaN and is not counted in the family."""
    raw = np.array([math.nan if p is None else p for p in p_values], dtype=float)
    finite = np.isfinite(raw)
    if np.any((raw[finite] < 0) | (raw[finite] > 1)):
        raise StatisticsInputError(
            f"holm: p-values must lie in [0, 1], got {raw[finite & ((raw < 0) | (raw > 1))].tolist()}"
        )
    adjusted = np.full(raw.shape, math.nan)
    if finite.any():
        adjusted[finite] = multipletests(raw[finite], method="holm")[1]
    return [float(p) for p in adjusted]


def proportion_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (statsmodels ``proportion_confint``): honest near 0 and 1 and
    for small n, where the normal (Wald) interval is not. NaN for n = 0."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise StatisticsInputError(f"proportion_interval: {successes} successes of {n} is not a proportion")
    if n == 0:
        return math.nan, math.nan
    low, high = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    return max(0.0, float(low)), min(1.0, float(high))


def proportion_difference_interval(
    successes_a: int, n_a: int, successes_b: int, n_b: int, level: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p_a - p_b for two independent proportions (statsmodels
    ``confint_proportions_2indep``, method "newcomb"). NaN when either group is empty."""
    if n_a == 0 or n_b == 0:
        return math.nan, math.nan
    low, high = confint_proportions_2indep(
        successes_a, n_a, successes_b, n_b, method="newcomb", compare="diff", alpha=1 - level
    )
    return float(low), float(high)


def pairwise_contrasts(
    frame: pd.DataFrame,
    outcome: str,
    condition_col: str,
    item_col: str,
    *,
    scale: str = "continuous",
    method: str = "wilcoxon",
    pairs: Sequence[tuple[str, str]] | None = None,
    cluster_col: str | None = None,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[tuple[str, str], TestResult]:
    """Every pair of conditions compared item by item on the same items (McNemar for a binary scale,
    ``paired_continuous`` otherwise), p-values Holm-corrected over the pairs. ``frame`` has one row per
    (item, condition); aggregate raters first. Pairs default to every combination, in order of first
    appearance. Each result's p_value is the adjusted one; ``detail`` keeps the raw p."""
    missing = [c for c in (outcome, condition_col, item_col, cluster_col) if c is not None and c not in frame.columns]
    if missing:
        raise StatisticsInputError(
            f"pairwise_contrasts: columns {missing} not in the frame (has {list(frame.columns)})"
        )
    if scale not in BINARY_SCALES + CONTINUOUS_SCALES:
        raise StatisticsInputError(
            f"pairwise_contrasts: scale must be one of {BINARY_SCALES + CONTINUOUS_SCALES}, got {scale!r}"
        )
    duplicated = frame.duplicated([item_col, condition_col])
    if duplicated.any():
        row = frame.loc[duplicated].iloc[0]
        raise StatisticsInputError(
            f"pairwise_contrasts: {int(duplicated.sum())} repeated (item, condition) rows, e.g. item "
            f"{row[item_col]!r} in {row[condition_col]!r}; aggregate to one row per item and condition first"
        )
    wide = frame.pivot(index=item_col, columns=condition_col, values=outcome)
    conditions = [str(c) for c in pd.unique(frame[condition_col])]
    wide.columns = [str(c) for c in wide.columns]
    chosen = list(pairs) if pairs is not None else list(combinations(conditions, 2))
    for pair in chosen:
        unknown = [c for c in pair if c not in conditions]
        if unknown:
            raise StatisticsInputError(f"pairwise_contrasts: conditions {unknown} not in the frame (has {conditions})")
    clusters = None
    if cluster_col is not None:
        per_item = frame.groupby(item_col)[cluster_col].nunique()
        if (per_item > 1).any():
            raise StatisticsInputError(f"pairwise_contrasts: an item lies in several {cluster_col!r} clusters")
        clusters = frame.groupby(item_col)[cluster_col].first().reindex(wide.index).tolist()
    results = {}
    for first, second in chosen:
        if scale in BINARY_SCALES:
            result = paired_binary(
                wide[first], wide[second], clusters=clusters, resamples=resamples, seed=seed, level=level
            )
        else:
            result = paired_continuous(
                wide[first], wide[second], method, clusters=clusters, resamples=resamples, seed=seed, level=level
            )
        results[(first, second)] = result
    adjusted = holm([r.p_value for r in results.values()])
    return {
        key: replace(
            r, p_value=p, detail=f"{r.detail}; p Holm-adjusted over {len(results)} contrasts (raw p {r.p_value:.4g})"
        )
        for (key, r), p in zip(results.items(), adjusted)
    }
