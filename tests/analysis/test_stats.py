"""Statistics: known answers against scipy/statsmodels called directly or values worked by hand, missing
values dropped pairwise with n counting what remained, refusals with clear messages, seeded determinism,
and the mixed model's fallback recorded, never silent."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from protocols.analysis import models
from protocols.analysis.stats import (
    StatisticsInputError,
    TestResult,
    bootstrap_ci,
    cluster_bootstrap_ci,
    condition_model,
    holm,
    paired_binary,
    paired_continuous,
    pairwise_contrasts,
    power_mcnemar,
    power_tost_paired,
    required_n,
    sample_size_paired,
    tost_ind,
    tost_paired,
)

X = np.arange(10.0)
SHIFTS = np.array([0.3, -0.1, 0.2, 0.4, 0.0, 0.5, 0.1, -0.2, 0.3, 0.2])


# ---- bootstrap ------------------------------------------------------------------------------------
def test_bootstrap_ci_is_the_percentile_interval_of_seeded_resample_means():
    values = np.array([2.0, 4.0, 4.0, 5.0, 7.0, 9.0])
    rng = np.random.default_rng(7)
    means = values[rng.integers(0, values.size, size=(500, values.size))].mean(axis=1)
    expected = tuple(np.quantile(means, [0.05, 0.95]))
    assert bootstrap_ci(values, resamples=500, seed=7, level=0.9) == pytest.approx(expected)


def test_bootstrap_ci_known_cases_nan_and_determinism():
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert bootstrap_ci([1.0, 2.0, math.nan, 3.0]) == bootstrap_ci([1.0, 2.0, 3.0])
    values = np.random.default_rng(0).normal(size=50)
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    assert bootstrap_ci(values, seed=3) != bootstrap_ci(values, seed=4)
    # A statistic without an axis argument is applied row by row, to the same draws.
    by_row = bootstrap_ci(values, stat=lambda row: float(np.median(row)), seed=3)
    assert by_row == pytest.approx(bootstrap_ci(values, stat=np.median, seed=3))


def test_bootstrap_ci_agrees_with_scipy_on_a_larger_sample():
    values = np.random.default_rng(1).normal(loc=1.0, size=300)
    scipy_ci = sps.bootstrap((values,), np.mean, n_resamples=4000, method="percentile", random_state=1)
    low, high = bootstrap_ci(values, resamples=4000)
    assert low == pytest.approx(scipy_ci.confidence_interval.low, abs=0.02)
    assert high == pytest.approx(scipy_ci.confidence_interval.high, abs=0.02)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ci([1.0, math.nan]), "at least 2"),
        (lambda: bootstrap_ci([1.0, 2.0], level=1.5), "level"),
        (lambda: bootstrap_ci(["a", "b"]), "expected numbers"),
        (lambda: bootstrap_ci([1.0, 2.0], resamples=0), "resamples"),
        (lambda: cluster_bootstrap_ci([1.0, 2.0], ["s1", "s1"]), "at least 2"),
        (lambda: cluster_bootstrap_ci([1.0, 2.0, 3.0], ["s1", "s2"]), "one label per value"),
    ],
)
def test_bootstrap_refusals(call, message):
    with pytest.raises(StatisticsInputError, match=message):
        call()


def test_cluster_bootstrap_with_singleton_clusters_is_the_plain_bootstrap():
    values = np.random.default_rng(2).normal(size=20)
    assert cluster_bootstrap_ci(values, list(range(20)), seed=5) == pytest.approx(bootstrap_ci(values, seed=5))


def test_cluster_bootstrap_resamples_whole_clusters():
    values = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    clusters = ["a", "a", "a", "b", "b", "b"]
    # Two clusters: resample means are 0, 0.5 or 1, so the 95% interval runs from 0 to 1 ...
    assert cluster_bootstrap_ci(values, clusters) == (0.0, 1.0)
    # ... where the item bootstrap, treating six items as independent, is narrower.
    low, high = bootstrap_ci(values)
    assert low > 0.0 and high < 1.0
    generic = cluster_bootstrap_ci(values, clusters, stat=lambda v: float(np.mean(v)), seed=9)
    assert generic == pytest.approx(cluster_bootstrap_ci(values, clusters, seed=9))
    with_nan = cluster_bootstrap_ci([*values, math.nan], [*clusters, "c"])
    assert with_nan == (0.0, 1.0)


# ---- McNemar --------------------------------------------------------------------------------------
def test_paired_binary_matches_statsmodels_and_the_binomial_test():
    a = [1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1]
    b = [0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0]  # a only: 5, b only: 0, both: 4, neither: 3
    result = paired_binary(a, b)
    assert result.test == "mcnemar" and result.n == 12
    direct = mcnemar([[4, 5], [0, 3]], exact=True)
    assert result.p_value == pytest.approx(direct.pvalue)
    assert result.p_value == pytest.approx(sps.binomtest(0, 5, 0.5).pvalue)  # 2 * 0.5**5
    assert result.p_value == pytest.approx(0.0625)
    assert result.estimate == pytest.approx(5 / 12) and result.effect_size == pytest.approx(5 / 12)
    assert result.ci_low <= result.estimate <= result.ci_high
    assert "exact binomial" in result.detail and "a only 5, b only 0" in result.detail


def test_paired_binary_uses_corrected_chi_square_from_25_discordant_pairs():
    a = [1] * 20 + [0] * 10 + [1] * 5
    b = [0] * 20 + [1] * 10 + [1] * 5
    result = paired_binary(a, b)
    stat = (abs(20 - 10) - 1) ** 2 / 30
    assert result.statistic == pytest.approx(stat)
    assert result.p_value == pytest.approx(sps.chi2.sf(stat, 1))
    assert "chi-square" in result.detail


def test_paired_binary_drops_missing_pairs_and_refuses_bad_input():
    result = paired_binary([1, 0, math.nan, 1, 1], [0, 0, 1, math.nan, 0])
    assert result.n == 3 and "2 of 5 pairs dropped" in result.detail
    assert paired_binary([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(StatisticsInputError, match="a has 3 values and b has 2"):
        paired_binary([1, 0, 1], [1, 0])
    with pytest.raises(StatisticsInputError, match="0 or 1"):
        paired_binary([1, 0, 2], [1, 0, 1])
    with pytest.raises(StatisticsInputError, match="1 complete pairs"):
        paired_binary([1, math.nan], [0, 1])


def test_paired_binary_is_deterministic_per_seed_and_can_bootstrap_clusters():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
    assert paired_binary(a, b, seed=1) == paired_binary(a, b, seed=1)
    clustered = paired_binary(a, b, clusters=[i // 5 for i in range(40)])
    assert "cluster bootstrap over 8 clusters" in clustered.detail
    assert clustered.p_value == paired_binary(a, b).p_value


# ---- continuous paired tests ----------------------------------------------------------------------
def test_wilcoxon_matches_scipy_with_a_hand_computed_rank_biserial():
    y = X + SHIFTS
    result = paired_continuous(X, y)
    direct = sps.wilcoxon(X, y, zero_method="wilcox")
    assert (result.statistic, result.p_value) == pytest.approx((direct.statistic, direct.pvalue))
    assert result.estimate == pytest.approx(-SHIFTS.mean()) and result.n == 10
    # Differences 1, 2, 3, -0.5: ranks of |d| 2, 3, 4, 1; R+ = 9, R- = 1; r = (9 - 1) / 10.
    assert paired_continuous([1, 2, 3, 0], [0, 0, 0, 0.5]).effect_size == pytest.approx(0.8)


def test_wilcoxon_with_every_difference_zero_says_so():
    result = paired_continuous([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert result.p_value == 1.0 and result.effect_size is None
    assert "every difference is zero" in result.detail


def test_paired_bootstrap_p_and_effect_size():
    y = X + SHIFTS
    result = paired_continuous(X, y, "bootstrap", seed=2)
    diff = X - y
    assert result.effect_size == pytest.approx(diff.mean() / diff.std(ddof=1))
    assert 0 < result.p_value < 0.05  # 9 of 10 shifts point one way
    assert result == paired_continuous(X, y, "bootstrap", seed=2)
    null = paired_continuous([0.1, -0.2, 0.3, -0.1, 0.05, -0.15], [0.0] * 6, "bootstrap")
    assert null.p_value > 0.5
    with pytest.raises(StatisticsInputError, match="method must be one of"):
        paired_continuous(X, y, "ttest")


def test_paired_continuous_counts_pairs_after_dropping_missing_values():
    result = paired_continuous([1.0, math.nan, 3.0, 4.0, 5.0], [0.5, 1.0, math.nan, 3.0, 4.5])
    assert result.n == 3 and "2 of 5 pairs dropped" in result.detail


# ---- TOST -----------------------------------------------------------------------------------------
def test_tost_paired_matches_statsmodels_and_its_interval_decides():
    y = X + SHIFTS
    result = tost_paired(X, y, margin=0.5)
    p_value, _, _ = ttost_paired(X, y, -0.5, 0.5)
    assert result.p_value == pytest.approx(p_value)
    diff = X - y
    half = sps.t.ppf(0.95, 9) * diff.std(ddof=1) / math.sqrt(10)
    assert (result.ci_low, result.ci_high) == pytest.approx((diff.mean() - half, diff.mean() + half))
    assert result.detail.startswith("equivalent within ±0.5")
    assert -0.5 < result.ci_low and result.ci_high < 0.5
    narrow = tost_paired(X, y, margin=0.2)
    assert narrow.detail.startswith("not equivalent") and narrow.ci_low < -0.2
    assert narrow.p_value >= 0.05


def test_tost_paired_with_constant_differences_and_refusals():
    same = tost_paired([0.5, 0.7, 0.9], [0.5, 0.7, 0.9], margin=0.1)
    assert same.p_value == 0.0 and same.detail.startswith("equivalent") and "no variance" in same.detail
    far = tost_paired([1.0, 1.0, 1.0], [0.5, 0.5, 0.5], margin=0.1)
    assert far.p_value == 1.0 and far.detail.startswith("not equivalent")
    with pytest.raises(StatisticsInputError, match="margin must be a positive"):
        tost_paired(X, X, margin=0)
    with pytest.raises(StatisticsInputError, match="alpha"):
        tost_paired(X, X, margin=0.1, alpha=0.6)


def test_tost_ind_matches_statsmodels():
    a = np.array([0.61, 0.55, 0.70, 0.64, 0.58, 0.66, math.nan])
    b = np.array([0.60, 0.57, 0.66, 0.69, 0.52, 0.63, 0.59])
    result = tost_ind(a, b, margin=0.1)
    x = a[~np.isnan(a)]
    assert result.n == 13 and "1 of 14 values dropped" in result.detail
    assert result.p_value == pytest.approx(ttost_ind(x, b, -0.1, 0.1)[0])
    sp = math.sqrt((5 * x.var(ddof=1) + 6 * b.var(ddof=1)) / 11)
    half = sps.t.ppf(0.95, 11) * sp * math.sqrt(1 / 6 + 1 / 7)
    diff = x.mean() - b.mean()
    assert (result.ci_low, result.ci_high) == pytest.approx((diff - half, diff + half))
    assert result.effect_size == pytest.approx(diff / sp)
    assert tost_ind(a, b, 0.1, usevar="unequal").p_value == pytest.approx(
        ttost_ind(x, b, -0.1, 0.1, usevar="unequal")[0]
    )


# ---- Holm -----------------------------------------------------------------------------------------
def test_holm_by_hand_keeps_missing_p_values_out_of_the_family():
    # Sorted 0.01, 0.03, 0.04 -> 3 x 0.01, 2 x 0.03, max(1 x 0.04, 0.06): 0.03, 0.06, 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    adjusted = holm([0.01, None, 0.04, math.nan, 0.03])
    assert adjusted[0::2] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[1]) and math.isnan(adjusted[3])
    assert holm([]) == []
    with pytest.raises(StatisticsInputError, match=r"\[0, 1\]"):
        holm([0.5, 1.2])


# ---- condition models -----------------------------------------------------------------------------
def study_frame(seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(8):
        offset = rng.normal()
        for condition, effect in [("stateless", 0.0), ("summary", 0.3), ("it's full-lca", 0.8)]:
            for i in range(3):
                score = offset + effect + rng.normal(0, 0.5)
                rows.append({"score": score, "condition": condition, "scenario": f"s{s}", "item": f"s{s}-{i}"})
    return pd.DataFrame(rows)


def test_cluster_robust_contrasts_equal_statsmodels_ols():
    frame = study_frame()
    results = condition_model(frame, "score", "condition", ["scenario"], kind="cluster_robust", reference="stateless")
    assert set(results) == {"summary", "it's full-lca"}
    means = frame.groupby("condition")["score"].mean()
    direct = smf.ols("score ~ C(condition, Treatment('stateless'))", frame).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(frame["scenario"])[0]}, use_t=True
    )
    term = "C(condition, Treatment('stateless'))[T.summary]"
    summary = results["summary"]
    assert summary.estimate == pytest.approx(means["summary"] - means["stateless"])
    assert (summary.ci_low, summary.ci_high) == pytest.approx(tuple(direct.conf_int().loc[term]))
    assert summary.p_value == pytest.approx(direct.pvalues[term])
    assert summary.n == 72 and summary.test == "cluster_robust_contrast"
    assert "FALLBACK" not in summary.detail and "8 clusters" in summary.detail


def test_mixed_contrasts_equal_statsmodels_mixedlm():
    frame = study_frame()
    results = condition_model(frame, "score", "condition", ["scenario"], reference="stateless")
    direct = smf.mixedlm("score ~ C(condition, Treatment('stateless'))", frame, groups=frame["scenario"]).fit(reml=True)
    term = "C(condition, Treatment('stateless'))[T.it's full-lca]"
    full = results["it's full-lca"]
    assert full.test == "mixed_contrast"
    assert full.estimate == pytest.approx(direct.params[term], rel=1e-5)
    assert full.p_value == pytest.approx(direct.pvalues[term], rel=1e-3)
    assert full.ci_low < full.estimate < full.ci_high and full.effect_size > 0
    assert "random intercept" in full.detail and "FALLBACK" not in full.detail


def test_mixed_model_falls_back_with_a_note_when_a_group_has_one_level():
    frame = study_frame().assign(scenario="only")
    result = condition_model(frame, "score", "condition", ["scenario"], reference="stateless")["summary"]
    assert result.test == "cluster_robust_contrast"
    assert "FALLBACK from mixed model" in result.detail and "one level" in result.detail
    assert "HC1" in result.detail


class FakeNonConvergingMixedLM:
    def __init__(self, *args, **kwargs):
        pass

    def fit(self, **kwargs):
        class Fit:
            converged = False

        return Fit()


class FakeFormulaApi:
    mixedlm = FakeNonConvergingMixedLM
    ols = staticmethod(smf.ols)


def test_mixed_model_that_does_not_converge_falls_back_with_a_note(monkeypatch):
    monkeypatch.setattr(models, "smf", FakeFormulaApi)
    frame = study_frame()
    result = condition_model(frame, "score", "condition", ["scenario"], reference="stateless")["summary"]
    assert "FALLBACK from mixed model: MixedLM did not converge" in result.detail
    robust = condition_model(frame, "score", "condition", ["scenario"], "cluster_robust", "stateless")["summary"]
    assert (result.estimate, result.ci_low, result.p_value) == pytest.approx(
        (robust.estimate, robust.ci_low, robust.p_value)
    )


def test_condition_model_drops_missing_rows_and_refuses_bad_input():
    frame = study_frame()
    frame.loc[[0, 5], "score"] = math.nan
    frame.loc[7, "scenario"] = None
    result = condition_model(frame, "score", "condition", ["scenario"], "cluster_robust")["summary"]
    assert result.n == 69 and "3 rows dropped" in result.detail
    with pytest.raises(StatisticsInputError, match="reference 'hosted'"):
        condition_model(frame, "score", "condition", ["scenario"], reference="hosted")
    with pytest.raises(StatisticsInputError, match=r"columns \['rater'\]"):
        condition_model(frame, "score", "condition", ["rater"])
    with pytest.raises(StatisticsInputError, match="kind must be one of"):
        condition_model(frame, "score", "condition", ["scenario"], kind="anova")
    with pytest.raises(StatisticsInputError, match="not numeric"):
        condition_model(frame.assign(score="high"), "score", "condition", ["scenario"])
    with pytest.raises(StatisticsInputError, match="1 condition"):
        condition_model(frame[frame.condition == "summary"], "score", "condition", ["scenario"])


# ---- pairwise contrasts ---------------------------------------------------------------------------
def test_pairwise_contrasts_pair_items_and_holm_correct():
    frame = study_frame()
    results = pairwise_contrasts(frame, "score", "condition", "item")
    assert list(results) == [("stateless", "summary"), ("stateless", "it's full-lca"), ("summary", "it's full-lca")]
    wide = frame.pivot(index="item", columns="condition", values="score")
    raw = [sps.wilcoxon(wide[a], wide[b]).pvalue for a, b in results]
    assert [r.p_value for r in results.values()] == pytest.approx(holm(raw))
    assert all(r.n == 24 and "Holm-adjusted over 3" in r.detail for r in results.values())


def test_pairwise_binary_contrasts_use_mcnemar_and_drop_unpaired_items():
    frame = pd.DataFrame(
        {
            "item": ["p1", "p2", "p3", "p4", "p1", "p2", "p3"],
            "condition": ["full-lca"] * 4 + ["summary"] * 3,
            "needed_in": [1, 1, 0, 1, 0, 1, 0],
        }
    )
    result = pairwise_contrasts(frame, "needed_in", "condition", "item", scale="binary")[("full-lca", "summary")]
    assert result.test == "mcnemar" and result.n == 3 and "1 of 4 pairs dropped" in result.detail
    with pytest.raises(StatisticsInputError, match="repeated \\(item, condition\\) rows"):
        pairwise_contrasts(pd.concat([frame, frame.iloc[:1]]), "needed_in", "condition", "item")
    with pytest.raises(StatisticsInputError, match="scale must be one of"):
        pairwise_contrasts(frame, "needed_in", "condition", "item", scale="likert")


# ---- power ----------------------------------------------------------------------------------------
def test_power_mcnemar_by_hand():
    # Every discordant pair favours a: the exact test rejects only when all d of them do and 2 * 0.5**d
    # <= 0.05, i.e. d >= 6; with n = 6 that needs all six pairs discordant: 0.5**6.
    assert power_mcnemar(5, 0.5, 0.0) == 0.0
    assert power_mcnemar(6, 0.5, 0.0) == pytest.approx(1 / 64)
    assert power_mcnemar(20, 0.0, 0.0) == 0.0


def test_power_mcnemar_matches_a_simulation_of_the_test_run():
    n, p_a, p_b = 40, 0.25, 0.05
    rng = np.random.default_rng(0)
    cells = rng.multinomial(n, [p_a, p_b, 1 - p_a - p_b], size=3000)
    rejections = 0
    for n10, n01, rest in cells:
        exact = n10 + n01 < 25
        rejections += mcnemar([[rest, n10], [n01, 0]], exact=exact, correction=True).pvalue <= 0.05
    assert power_mcnemar(n, p_a, p_b) == pytest.approx(rejections / 3000, abs=0.03)


def test_sample_sizes_against_statsmodels_and_known_tables():
    assert sample_size_paired(0.5, 1.0) == 34  # G*Power: d_z 0.5, alpha 0.05, power 0.8
    assert sample_size_paired(2.0, 4.0) == 34
    assert sample_size_paired(0.3, 1.0) == math.ceil(TTestPower().solve_power(0.3, alpha=0.05, power=0.8))
    assert required_n("paired_t", 0.5) == 34
    assert required_n("two_sample_t", 0.5) == math.ceil(TTestIndPower().solve_power(0.5, alpha=0.05, power=0.8)) == 64
    assert required_n("wilcoxon", 0.5) == math.ceil(34 / 0.864)


def test_required_n_is_the_smallest_n_reaching_power():
    n = required_n("mcnemar", 0.2, discordant=0.4)
    assert power_mcnemar(n, 0.3, 0.1) >= 0.8 > power_mcnemar(n - 1, 0.3, 0.1)
    n = required_n("tost_paired", 0.5, sd=1.0)
    assert power_tost_paired(n, 0.5, 1.0) >= 0.8 > power_tost_paired(n - 1, 0.5, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"test": "mcnemar", "effect": 0.2}, "needs discordant"),
        ({"test": "mcnemar", "effect": 0.5, "discordant": 0.4}, "effect"),
        ({"test": "tost_paired", "effect": 0.1}, "needs sd"),
        ({"test": "anova", "effect": 0.5}, "known tests are"),
        ({"test": "paired_t", "effect": 0.0}, "non-zero"),
        ({"test": "paired_t", "effect": 0.5, "power": 1.2}, "power"),
    ],
)
def test_required_n_refusals(kwargs, message):
    with pytest.raises(StatisticsInputError, match=message):
        required_n(**kwargs)


# ---- the record -----------------------------------------------------------------------------------
def test_result_to_dict_is_json_ready():
    result = TestResult("x", 3, 0.5, math.nan, math.inf, None, np.float64(0.2), None, "d", "note")
    as_dict = result.to_dict()
    assert as_dict["ci_low"] is None and as_dict["ci_high"] is None and as_dict["p_value"] == 0.2
    assert json.loads(json.dumps(as_dict, allow_nan=False)) == as_dict
    assert set(paired_binary([1, 0, 1], [0, 0, 1]).to_dict()) == {
        "test",
        "n",
        "estimate",
        "ci_low",
        "ci_high",
        "statistic",
        "p_value",
        "effect_size",
        "effect_name",
        "detail",
    }


def test_a_second_grouping_factor_is_stated_in_the_detail():
    frame = pd.concat([study_frame().assign(rater=r) for r in ("rater_a", "rater_b")], ignore_index=True)
    frame["score"] += np.where(frame["rater"] == "rater_b", 0.2, 0.0)
    mixed = condition_model(frame, "score", "condition", ["scenario", "rater"], reference="stateless")["summary"]
    assert "variance components" in mixed.detail or "FALLBACK" in mixed.detail
    robust = condition_model(frame, "score", "condition", ["scenario", "rater"], "cluster_robust", "stateless")
    assert "not modelled by the cluster-robust fit" in robust["summary"].detail


def test_one_row_per_group_falls_back_with_a_note():
    frame = study_frame()
    frame["scenario"] = [f"g{i}" for i in range(len(frame))]
    result = condition_model(frame, "score", "condition", ["scenario"], reference="stateless")["summary"]
    assert "FALLBACK from mixed model: every group holds one row" in result.detail


@pytest.mark.parametrize("kind", ["mixed", "cluster_robust"])
def test_a_condition_model_of_values_that_never_vary_is_an_exact_contrast_not_a_round_off_test(kind):
    frame = pd.DataFrame(
        {
            "y": [1.0] * 6 + [1.0] * 6 + [0.0] * 6,
            "condition": ["a"] * 6 + ["b"] * 6 + ["c"] * 6,
            "scenario": ["s1", "s2"] * 9,
        }
    )
    out = models.condition_model(frame, "y", "condition", ["scenario"], kind=kind, reference="a")
    assert (out["b"].estimate, out["c"].estimate) == (0.0, -1.0)
    assert (
        out["b"].p_value is None
        and out["b"].test == "exact_contrast"
        and (out["c"].ci_low, out["c"].ci_high) == (-1.0, -1.0)
    )
    varied = frame.assign(y=[1.0, 0.0] * 3 + [1.0] * 12)  # one condition varies: the model is fitted
    assert models.condition_model(varied, "y", "condition", ["scenario"], kind=kind, reference="a")["b"].test.endswith(
        "_contrast"
    )
