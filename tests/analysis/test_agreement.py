"""Rater agreement: Krippendorff's alpha (the real package) beside raw and chance agreement, the calibration
gate, and the lean of disagreements toward a condition."""

from __future__ import annotations

import json
import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from lca.errors import LCAError
from protocols.analysis.agreement import AgreementTooLow, agreement, require_agreement


def frame(rows):
    return pd.DataFrame(rows, columns=["item", "rater", "value", "condition"])


def paper_trap():
    """40 items, 'yes' dominates: rater_a says 'no' on items 0-2, rater_b on items 3-5. They agree on 34 of
    40 (0.85), yet chance agreement from the pooled marginals (74 yes, 6 no) is (74*73 + 6*5) / (80*79)."""
    rows = []
    for i in range(40):
        condition = "full-lca" if i % 2 else "summary"
        rows.append((f"i{i}", "rater_a", "no" if i in (0, 1, 2) else "yes", condition))
        rows.append((f"i{i}", "rater_b", "no" if i in (3, 4, 5) else "yes", condition))
    return frame(rows)


def test_the_papers_trap_high_raw_agreement_with_alpha_below_chance_is_refused():
    report = agreement(paper_trap(), "nominal", measure="style_continuity")
    expected = (74 * 73 + 6 * 5) / (80 * 79)
    assert report.raw_agreement == pytest.approx(0.85)
    assert report.expected_agreement == pytest.approx(expected)
    # nominal alpha with two raters and no missing values: (A_o - A_e) / (1 - A_e)
    assert report.alpha == pytest.approx((0.85 - expected) / (1 - expected))
    assert report.alpha < 0 and not report.passes
    low, high = report.alpha_ci
    assert low <= report.alpha <= high and high < 0.667
    assert "agree no more than chance" in report.detail
    with pytest.raises(AgreementTooLow) as caught:
        require_agreement(report)
    message = str(caught.value)
    assert "style_continuity" in message and f"{report.alpha:.3f}" in message
    assert f"{low:.3f}" in message and f"{high:.3f}" in message and "0.667" in message
    assert "refused" in message and caught.value.report is report


def test_alpha_is_the_krippendorff_packages_on_its_reference_data():
    # the package's own example (Krippendorff's data with missing ratings): 0.691358 nominal, 0.810845 interval
    data = [
        [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
        [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
    ]
    rows = [
        (f"u{u}", f"rater_{r}", value, "c")
        for r, line in enumerate(data)
        for u, value in enumerate(line)
        if not math.isnan(value)
    ]
    nominal = agreement(frame(rows), "nominal", resamples=50)
    interval = agreement(frame(rows), "interval", resamples=50)
    assert nominal.alpha == pytest.approx(0.691358, abs=1e-6)
    assert interval.alpha == pytest.approx(0.810845, abs=1e-6)
    assert nominal.alpha == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    # units 1 and 13 have no rating, units 0, 11.. with one rating are not pairable
    assert nominal.n_items == sum(sum(not math.isnan(line[u]) for line in data) >= 2 for u in range(15))
    assert nominal.n_raters == 3 and nominal.mean_abs_difference is None
    assert interval.mean_abs_difference is not None and interval.mean_abs_difference > 0


def test_reliable_raters_pass_and_the_gate_lets_them_through():
    rows = []
    for i in range(30):
        value = i % 5 + 1
        rows.append((f"i{i}", "rater_a", value, "summary"))
        rows.append((f"i{i}", "rater_b", value if i != 7 else value + 1, "summary"))
    report = agreement(frame(rows), "ordinal", measure="m", scale=[1, 2, 3, 4, 5, 6])
    assert report.alpha > 0.9 and report.passes and require_agreement(report) is report
    assert report.raw_agreement == pytest.approx(29 / 30)
    assert report.mean_abs_difference == pytest.approx(1 / 30)
    assert "meets the threshold" in report.detail


def test_disagreements_leaning_toward_one_condition_are_reported():
    rows = []
    for i in range(24):
        cond = "full-lca" if i < 12 else "summary"
        base = 2 + i % 3
        rows.append((f"i{i}", "rater_a", base, cond))
        if cond == "full-lca":
            b = base - 1 if i < 8 else base  # rater_a rates full-lca higher on all 8 disagreements
        else:
            b = base + (1 if i % 2 else -1) if i < 20 else base  # summary: 4 up, 4 down
        rows.append((f"i{i}", "rater_b", b, cond))
    report = agreement(frame(rows), "ordinal", threshold=0.5, resamples=200, measure="style")
    lean = {row.condition: row for row in report.lean}
    assert lean["full-lca"].n_items == 12 and lean["full-lca"].n_disagreements == 8
    assert (lean["full-lca"].positive, lean["full-lca"].negative) == (8, 0)
    assert lean["full-lca"].mean_signed_difference == pytest.approx(1.0)
    assert lean["full-lca"].p_value == pytest.approx(binomtest(8, 8, 0.5).pvalue)
    assert (lean["summary"].positive, lean["summary"].negative) == (4, 4)
    assert lean["summary"].mean_signed_difference == pytest.approx(0.0) and lean["summary"].p_value == 1.0
    assert report.leaning() == ["full-lca"] and report.reference_rater == "rater_a"
    assert "disagreements lean on 'full-lca': rater_a rates it higher" in report.detail
    # the other rater as the reference flips the sign, not the finding
    flipped = agreement(frame(rows), "ordinal", resamples=0, reference="rater_b")
    assert flipped.leaning() == ["full-lca"]
    assert {r.condition: r for r in flipped.lean}["full-lca"].mean_signed_difference == pytest.approx(-1.0)
    assert json.loads(json.dumps(report.to_dict()))["leaning"] == ["full-lca"]


def test_the_bootstrap_interval_is_seeded():
    data = paper_trap()
    one = agreement(data, "nominal", resamples=300, seed=1)
    again = agreement(data, "nominal", resamples=300, seed=1)
    other = agreement(data, "nominal", resamples=300, seed=2)
    assert one.alpha_ci == again.alpha_ci and one.alpha_ci != other.alpha_ci
    assert one.alpha == other.alpha


def test_alpha_without_variation_is_undefined_and_refused():
    rows = [(f"i{i}", r, "yes", "summary") for i in range(10) for r in ("rater_a", "rater_b")]
    report = agreement(frame(rows), "nominal", resamples=20)
    assert report.raw_agreement == 1.0 and math.isnan(report.alpha) and not report.passes
    assert "undefined" in report.detail
    with pytest.raises(AgreementTooLow, match="undefined"):
        require_agreement(report)


def test_missing_ratings_are_counted_and_single_rated_items_left_out():
    rows = [(f"i{i}", r, (i + (r == "rater_b")) % 2, "summary") for i in range(12) for r in ("rater_a", "rater_b")]
    rows[1] = ("i0", "rater_b", math.nan, "summary")  # unparseable: missing
    report = agreement(frame(rows), "nominal", resamples=20)
    assert report.n_missing == 1 and report.n_items == 11
    assert "1 rating(s) missing" in report.detail and "1 item(s) rated by one rater only" in report.detail


@pytest.mark.parametrize(
    "rows, level, kwargs, message",
    [
        ([("i1", "rater_a", 1, "c"), ("i1", "rater_a", 2, "c")], "ordinal", {}, "rated item 'i1' more than once"),
        ([("i1", "rater_a", "good", "c"), ("i1", "rater_b", 2, "c")], "interval", {}, "must be numbers"),
        ([("i1", "rater_a", 7, "c"), ("i1", "rater_b", 2, "c")], "ordinal", {"scale": [1, 2, 3]}, "outside the scale"),
        ([("i1", "rater_a", 1, "a"), ("i1", "rater_b", 2, "b")], "ordinal", {}, "more than one condition"),
        ([("i1", "rater_a", 1, "a")], "ratio", {}, "level 'ratio'"),
        ([("i1", "rater_a", 1, "a")], "nominal", {"reference": "rater_z"}, "reference rater 'rater_z'"),
    ],
)
def test_bad_ratings_are_refused_by_name(rows, level, kwargs, message):
    with pytest.raises(LCAError, match=message):
        agreement(frame(rows), level, resamples=0, **kwargs)
