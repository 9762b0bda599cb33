"""Power and sample size for the tests ``stats`` runs, so a pre-registration's sample size can be
checked rather than asserted. t tests use statsmodels.stats.power; McNemar's power is computed exactly
for the very test ``paired_binary`` runs (exact binomial below 25 discordant pairs, continuity-corrected
chi-square from there), which statsmodels does not offer; TOST uses the usual shifted-t approximation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats as sps
from statsmodels.stats.power import TTestIndPower, TTestPower

from protocols.analysis.result import EXACT_MCNEMAR_BELOW, StatisticsInputError

MAX_N = 100_000
# Lowest asymptotic relative efficiency of the signed-rank test to the t test (Hodges & Lehmann 1956):
# dividing the t test's n by it gives a Wilcoxon n that holds whatever the distribution.
WILCOXON_ARE = 0.864
TESTS = ("paired_t", "paired_bootstrap", "wilcoxon", "two_sample_t", "mcnemar", "tost_paired")


def _check(alpha: float, power: float | None = None) -> None:
    if not 0.0 < alpha < 1.0:
        raise StatisticsInputError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    if power is not None and not 0.0 < power < 1.0:
        raise StatisticsInputError(f"power must lie strictly between 0 and 1, got {power}")


_REJECT_CACHE: dict[tuple[float, float], np.ndarray] = {}


def _mcnemar_reject_given_d(max_d: int, share_a: float, alpha: float) -> np.ndarray:
    """P(reject | d discordant pairs) for d = 0..max_d, when each discordant pair favours a with
    probability share_a; rejection is p <= alpha for the test paired_binary runs at that d. It does not
    depend on n, so it is kept and extended across the n a sample-size search tries."""
    key = (share_a, alpha)
    known = _REJECT_CACHE.get(key, np.zeros(1))
    if known.size > max_d:
        return known[: max_d + 1]
    chi_crit = float(sps.chi2.isf(alpha, 1))
    extra = []
    for d in range(known.size, max(max_d + 1, 2 * known.size)):
        k = np.arange(d + 1)
        if d < EXACT_MCNEMAR_BELOW:  # statsmodels: p = min(1, 2 * P(X <= min(k, d - k))), X ~ Bin(d, 1/2)
            p = np.minimum(1.0, 2.0 * sps.binom.cdf(np.minimum(k, d - k), d, 0.5))
            reject = p <= alpha
        else:
            reject = (np.abs(2 * k - d) - 1.0) ** 2 / d >= chi_crit
        extra.append(float(np.sum(sps.binom.pmf(k, d, share_a) * reject)))
    _REJECT_CACHE[key] = np.concatenate([known, extra])
    return _REJECT_CACHE[key][: max_d + 1]


def power_mcnemar(n: int, p_a_only: float, p_b_only: float, alpha: float = 0.05) -> float:
    """Exact power of McNemar's test for n pairs, where a pair is a success in a only with probability
    ``p_a_only`` and in b only with ``p_b_only`` (the discordant cells)."""
    _check(alpha)
    if int(n) != n or n < 1 or n > MAX_N:
        raise StatisticsInputError(f"power_mcnemar: n must be a whole number in 1..{MAX_N}, got {n}")
    if p_a_only < 0 or p_b_only < 0 or p_a_only + p_b_only > 1:
        raise StatisticsInputError(
            f"power_mcnemar: discordant probabilities must be >= 0 and sum to at most 1, got {p_a_only}, {p_b_only}"
        )
    discordant = p_a_only + p_b_only
    if discordant == 0:
        return 0.0
    reject = _mcnemar_reject_given_d(int(n), round(p_a_only / discordant, 12), float(alpha))
    return float(np.sum(sps.binom.pmf(np.arange(int(n) + 1), int(n), discordant) * reject))


def power_tost_paired(n: int, margin: float, sd: float, true_difference: float = 0.0, alpha: float = 0.05) -> float:
    """Approximate power of the paired TOST with n pairs (shifted central t, Chow, Shao & Wang 2008):
    T((margin - |delta|)/se - t_crit) + T((margin + |delta|)/se - t_crit) - 1, at least 0."""
    _check(alpha)
    if n < 2 or margin <= 0 or sd <= 0:
        raise StatisticsInputError(f"power_tost_paired: need n >= 2, margin > 0, sd > 0; got {n}, {margin}, {sd}")
    df = n - 1
    se = sd / math.sqrt(n)
    crit = float(sps.t.ppf(1 - alpha, df))
    delta = abs(true_difference)
    value = sps.t.cdf((margin - delta) / se - crit, df) + sps.t.cdf((margin + delta) / se - crit, df) - 1
    return float(max(0.0, value))


def sample_size_paired(effect: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs needed for a two-sided paired t test to detect a mean difference ``effect`` when the
    differences have SD ``sd`` (d_z = effect / sd), via statsmodels ``TTestPower``; rounded up."""
    _check(alpha, power)
    if effect == 0 or sd <= 0:
        raise StatisticsInputError(f"sample_size_paired: need a non-zero effect and sd > 0, got {effect}, {sd}")
    n = TTestPower().solve_power(effect_size=abs(effect) / sd, alpha=alpha, power=power, alternative="two-sided")
    return int(math.ceil(float(np.squeeze(n))))


def _smallest_n(power_at: Callable[[int], float], target: float, start: float) -> int:
    """Smallest n >= 2 whose power reaches the target, searched upward from below a first guess (exact
    power is saw-toothed in n, so the first n reaching it is taken, as a pre-registration should)."""
    n = max(2, int(start))
    while power_at(n) >= target and n > 2:
        n = max(2, n // 2)
    while power_at(n) < target:
        n += 1
        if n > MAX_N:
            raise StatisticsInputError(f"required_n: more than {MAX_N} units would be needed")
    return n


def required_n(
    test: str,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    sd: float | None = None,
    discordant: float | None = None,
) -> int:
    """Units needed for ``test`` to reach ``power`` at ``alpha`` (two-sided); per group for two_sample_t.

    - paired_t / paired_bootstrap: ``effect`` is d_z, or a raw mean difference when ``sd`` (SD of the
      differences) is given; the bootstrap is sized as the t test it approximates.
    - wilcoxon: the paired t n divided by 0.864, the signed-rank test's lowest relative efficiency.
    - two_sample_t: ``effect`` is Cohen's d (or raw with ``sd``), statsmodels ``TTestIndPower``.
    - mcnemar: ``effect`` is the difference in proportions; ``discordant`` (expected share of pairs that
      disagree) is required, since power depends on it; exact power of the test actually run.
    - tost_paired: ``effect`` is the equivalence margin, ``sd`` the SD of the differences (required),
      true difference 0.
    """
    _check(alpha, power)
    if test not in TESTS:
        raise StatisticsInputError(f"required_n: unknown test {test!r}; known tests are {TESTS}")
    if not math.isfinite(effect) or effect == 0:
        raise StatisticsInputError(f"required_n: effect must be a non-zero number, got {effect}")
    if sd is not None and sd <= 0:
        raise StatisticsInputError(f"required_n: sd must be positive, got {sd}")
    if test in ("paired_t", "paired_bootstrap", "wilcoxon"):
        n = sample_size_paired(effect, sd if sd is not None else 1.0, alpha, power)
        return int(math.ceil(n / WILCOXON_ARE)) if test == "wilcoxon" else n
    if test == "two_sample_t":
        d = abs(effect) / (sd if sd is not None else 1.0)
        n = TTestIndPower().solve_power(effect_size=d, alpha=alpha, power=power, ratio=1.0, alternative="two-sided")
        return int(math.ceil(float(np.squeeze(n))))
    if test == "tost_paired":
        if sd is None:
            raise StatisticsInputError("required_n: tost_paired needs sd, the expected SD of the paired differences")
        margin = abs(effect)
        z = float(sps.norm.ppf(1 - alpha) + sps.norm.ppf(1 - (1 - power) / 2))
        guess = (z * sd / margin) ** 2
        return _smallest_n(lambda n: power_tost_paired(n, margin, sd, 0.0, alpha), power, guess)
    if discordant is None:
        raise StatisticsInputError(
            "required_n: mcnemar needs discordant, the expected share of pairs on which the conditions disagree"
        )
    delta = abs(effect)
    if not delta < discordant <= 1:
        raise StatisticsInputError(
            f"required_n: mcnemar needs |effect| < discordant <= 1, got effect {effect}, discordant {discordant}"
        )
    p_a, p_b = (discordant + delta) / 2, (discordant - delta) / 2
    # Connor (1987) normal approximation as the starting guess.
    z_a, z_b = float(sps.norm.ppf(1 - alpha / 2)), float(sps.norm.ppf(power))
    guess = (z_a * math.sqrt(discordant) + z_b * math.sqrt(discordant - delta**2)) ** 2 / delta**2
    return _smallest_n(lambda n: power_mcnemar(n, p_a, p_b, alpha), power, guess)
