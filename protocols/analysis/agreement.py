"""Rater agreement for judged measures: Krippendorff's alpha beside raw agreement and chance.

Raw agreement alone misleads: when one category dominates, two raters agree most of the time by chance
(the LCA paper's pilot coding looked fine at ~0.85 raw agreement while alpha was below zero, and the
disagreements ran in the authors' favour). So every report states alpha (the ``krippendorff`` package, at
the measure's level) with a bootstrap interval over items, the raw agreement, the agreement expected by
chance from the pooled category marginals, and, per condition, whether the disagreements lean one way.
``require_agreement`` turns a report below its threshold into a refusal: study data is not coded on a
scheme raters cannot apply reliably.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import krippendorff
import numpy as np
import pandas as pd
from scipy.stats import binomtest

from lca.errors import LCAError

Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")
DEFAULT_THRESHOLD = 0.667  # Krippendorff's lowest conceivable limit for tentative conclusions
REQUIRED_COLUMNS = ("item", "rater", "value")


class AgreementTooLow(LCAError):
    """Calibration failed: alpha is below the pre-registered threshold (or undefined), so coding is refused."""

    def __init__(self, report: AgreementReport) -> None:
        self.report = report
        low, high = report.alpha_ci
        super().__init__(
            f"measure '{report.measure}': Krippendorff's alpha {_num(report.alpha)} "
            f"(95% CI {_num(low)} to {_num(high)}, {report.level}, {report.n_items} items, "
            f"{report.n_raters} raters) is below the threshold {report.threshold:g}: coding of study data "
            f"is refused. {report.detail}"
        )


@dataclass(frozen=True)
class ConditionLean:
    """Do the disagreements on one condition's items run one way? ``mean_signed_difference`` is, over the
    items of the condition where raters disagree, the reference rater's value minus the mean of the other
    raters' values (None when values are not numbers); ``positive``/``negative`` count its signs and
    ``p_value`` is the two-sided sign test of those counts."""

    condition: str
    n_items: int
    n_disagreements: int
    mean_signed_difference: float | None
    positive: int
    negative: int
    p_value: float | None


@dataclass(frozen=True)
class AgreementReport:
    """One judged measure's agreement; ``passes`` decides whether its study data may be coded."""

    measure: str
    level: str
    n_items: int  # items rated by at least two raters (the only ones alpha can use)
    n_raters: int
    n_missing: int  # ratings recorded as missing (unparseable or left blank)
    alpha: float  # NaN when undefined (no variation among the values)
    alpha_ci: tuple[float, float]
    raw_agreement: float
    mean_abs_difference: float | None  # ordinal and interval only
    expected_agreement: float
    threshold: float
    passes: bool
    lean: tuple[ConditionLean, ...]
    reference_rater: str | None
    resamples: int
    seed: int
    detail: str

    def leaning(self, alpha: float = 0.05) -> list[str]:
        """Conditions whose disagreements lean one way (sign test p below ``alpha``)."""
        return [row.condition for row in self.lean if row.p_value is not None and row.p_value < alpha]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["alpha_ci"] = list(self.alpha_ci)
        out["lean"] = [asdict(row) for row in self.lean]
        out["leaning"] = self.leaning()
        return out


def require_agreement(report: AgreementReport) -> AgreementReport:
    """The calibration gate: the report back when it passes, else ``AgreementTooLow`` naming the measure,
    alpha, its interval and the threshold."""
    if not report.passes:
        raise AgreementTooLow(report)
    return report


def agreement(
    ratings: pd.DataFrame,
    level: str,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = 1000,
    seed: int = 0,
    *,
    measure: str = "",
    scale: Sequence[Any] | None = None,
    reference: str | None = None,
) -> AgreementReport:
    """Agreement of a ratings frame (one row per item and rater: ``item``, ``rater``, ``value``, and
    ``condition`` for the lean; a NaN value is a missing rating). ``scale`` (the measure's values, ordered for
    ordinal and interval) is passed to alpha as its value domain and refuses values outside it; ``reference``
    is the rater whose signed difference from the others orients the lean (default: the first by name)."""
    level = _known_level(level)
    if not 0 < threshold <= 1:
        raise LCAError(f"threshold {threshold} must be in (0, 1]")
    if resamples < 0:
        raise LCAError(f"resamples {resamples} must be at least 0")
    frame = _checked(ratings, level, scale)
    n_missing = int(frame["value"].isna().sum())
    rated = frame[frame["value"].notna()]
    raters = sorted(rated["rater"].unique().tolist())
    if reference is not None and reference not in raters:
        raise LCAError(f"reference rater '{reference}' gave no rating; raters: {', '.join(raters)}")
    reference = reference or (raters[0] if raters else None)
    by_item = {item: dict(zip(group["rater"], group["value"])) for item, group in rated.groupby("item", sort=True)}
    pairable = {item: values for item, values in by_item.items() if len(values) >= 2}
    numeric = level != "nominal" or all(_is_number(v) for v in rated["value"])

    domain = _domain(rated["value"].tolist(), level, scale)
    matrix = _matrix(pairable, raters, domain, level)
    alpha = _alpha(matrix, level, domain)
    low, high, undefined = _bootstrap(matrix, level, domain, resamples, seed)
    raw, mad, expected = _raw_and_chance(pairable, level)
    lean = _lean(pairable, _conditions(frame), reference, numeric)
    passes = bool(math.isfinite(alpha) and alpha >= threshold)
    report = AgreementReport(
        measure=measure,
        level=level,
        n_items=len(pairable),
        n_raters=len(raters),
        n_missing=n_missing,
        alpha=alpha,
        alpha_ci=(low, high),
        raw_agreement=raw,
        mean_abs_difference=mad,
        expected_agreement=expected,
        threshold=threshold,
        passes=passes,
        lean=lean,
        reference_rater=reference,
        resamples=resamples,
        seed=seed,
        detail="",
    )
    return _with_detail(report, undefined, single_rated=len(by_item) - len(pairable))


# ---- input ------------------------------------------------------------------------------------------
def _known_level(level: str) -> Level:
    for known in LEVELS:
        if level == known:
            return known
    raise LCAError(f"level '{level}' is not one of {', '.join(LEVELS)}")


def _checked(ratings: pd.DataFrame, level: str, scale: Sequence[Any] | None) -> pd.DataFrame:
    missing = [c for c in REQUIRED_COLUMNS if c not in ratings.columns]
    if missing:
        raise LCAError(f"the ratings frame lacks column(s) {', '.join(missing)}; it needs item, rater, value")
    frame = ratings.copy()
    frame["item"] = frame["item"].astype(str)
    frame["rater"] = frame["rater"].astype(str)
    rated = frame[frame["value"].notna()]
    dup = rated[rated.duplicated(["item", "rater"], keep=False)]
    if len(dup):
        first = dup.iloc[0]
        raise LCAError(f"rater '{first['rater']}' rated item '{first['item']}' more than once")
    if level != "nominal":
        bad = [v for v in rated["value"] if not _is_number(v)]
        if bad:
            raise LCAError(f"{level} ratings must be numbers; got {bad[0]!r}")
    if scale is not None:
        allowed = set(scale)
        outside = [v for v in rated["value"] if v not in allowed]
        if outside:
            raise LCAError(f"rating {outside[0]!r} is outside the scale {list(scale)}")
    if "condition" in frame.columns:
        conflicting = frame.dropna(subset=["condition"]).groupby("item")["condition"].nunique()
        if (conflicting > 1).any():
            item = conflicting[conflicting > 1].index[0]
            raise LCAError(f"item '{item}' carries more than one condition")
    return frame


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _conditions(frame: pd.DataFrame) -> dict[str, str]:
    if "condition" not in frame.columns:
        return {}
    known = frame.dropna(subset=["condition"])
    return {str(item): str(cond) for item, cond in zip(known["item"], known["condition"])}


def _domain(values: list[Any], level: str, scale: Sequence[Any] | None) -> list[Any]:
    if scale is not None:
        return sorted(scale) if level != "nominal" else list(dict.fromkeys(scale))
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:
        return sorted(unique, key=str)


def _matrix(pairable: dict[str, dict[str, Any]], raters: list[str], domain: list[Any], level: str) -> np.ndarray:
    """Raters x items, NaN where a rater did not rate; nominal values as their index in the domain."""
    index = {value: i for i, value in enumerate(domain)}
    matrix = np.full((len(raters), len(pairable)), np.nan)
    for j, values in enumerate(pairable.values()):
        for i, rater in enumerate(raters):
            if rater in values:
                value = values[rater]
                matrix[i, j] = index[value] if level == "nominal" else float(value)
    return matrix


# ---- alpha ------------------------------------------------------------------------------------------
def _alpha(matrix: np.ndarray, level: Level, domain: list[Any]) -> float:
    """Krippendorff's alpha, NaN when undefined (fewer than one pairable item, or a single value seen)."""
    seen = matrix[~np.isnan(matrix)]
    if matrix.shape[1] == 0 or len(np.unique(seen)) < 2:
        return math.nan
    value_domain = list(range(len(domain))) if level == "nominal" else [float(v) for v in domain]
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=value_domain))


def _bootstrap(matrix: np.ndarray, level: Level, domain: list[Any], resamples: int, seed: int):
    """Percentile interval of alpha over items resampled with replacement; resamples where alpha is undefined
    (every drawn value alike) are counted, not imputed."""
    n = matrix.shape[1]
    if n == 0 or resamples == 0:
        return math.nan, math.nan, 0
    rng = np.random.default_rng(seed)
    values = []
    undefined = 0
    for _ in range(resamples):
        value = _alpha(matrix[:, rng.integers(0, n, size=n)], level, domain)
        if math.isfinite(value):
            values.append(value)
        else:
            undefined += 1
    if not values:
        return math.nan, math.nan, undefined
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high), undefined


def _raw_and_chance(pairable: dict[str, dict[str, Any]], level: str) -> tuple[float, float | None, float]:
    """Share of rater pairs (within an item) agreeing exactly, their mean absolute difference (ordinal and
    interval), and the chance that two values drawn from the pooled pairable values agree."""
    agree = pairs = 0
    diffs: list[float] = []
    pooled: Counter = Counter()
    for values in pairable.values():
        vals = list(values.values())
        pooled.update(vals)
        for i in range(len(vals)):
            for j in range(i + 1, len(vals)):
                pairs += 1
                agree += vals[i] == vals[j]
                if level != "nominal":
                    diffs.append(abs(float(vals[i]) - float(vals[j])))
    total = sum(pooled.values())
    raw = agree / pairs if pairs else math.nan
    expected = sum(c * (c - 1) for c in pooled.values()) / (total * (total - 1)) if total > 1 else math.nan
    mad = (sum(diffs) / len(diffs) if diffs else math.nan) if level != "nominal" else None
    return raw, mad, expected


def _lean(
    pairable: dict[str, dict[str, Any]], conditions: dict[str, str], reference: str | None, numeric: bool
) -> tuple[ConditionLean, ...]:
    rows = []
    for condition in sorted(set(conditions.values())):
        items = [item for item in pairable if conditions.get(item) == condition]
        split = [pairable[item] for item in items if len(set(pairable[item].values())) > 1]
        signed = []
        if numeric and reference is not None:
            for values in split:
                others = [float(v) for r, v in values.items() if r != reference]
                if reference in values and others:
                    signed.append(float(values[reference]) - sum(others) / len(others))
        positive = sum(d > 0 for d in signed)
        negative = sum(d < 0 for d in signed)
        rows.append(
            ConditionLean(
                condition=condition,
                n_items=len(items),
                n_disagreements=len(split),
                mean_signed_difference=(sum(signed) / len(signed)) if signed else None,
                positive=positive,
                negative=negative,
                p_value=float(binomtest(positive, positive + negative, 0.5).pvalue) if positive + negative else None,
            )
        )
    return tuple(rows)


# ---- the words --------------------------------------------------------------------------------------
def _num(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _with_detail(report: AgreementReport, undefined: int, single_rated: int) -> AgreementReport:
    low, high = report.alpha_ci
    parts = []
    if not math.isfinite(report.alpha):
        parts.append(
            "alpha is undefined: fewer than one item rated by two raters, or every rating is the same value "
            "(a calibration set must contain items that differ)"
        )
    else:
        verdict = "meets" if report.passes else "is below"
        parts.append(
            f"alpha {_num(report.alpha)} (95% CI {_num(low)} to {_num(high)}) {verdict} the threshold "
            f"{report.threshold:g}"
        )
    parts.append(
        f"raw agreement {_num(report.raw_agreement)} against {_num(report.expected_agreement)} expected by chance"
    )
    if math.isfinite(report.raw_agreement) and math.isfinite(report.expected_agreement):
        if report.raw_agreement <= report.expected_agreement:
            parts.append("the raters agree no more than chance would: the raw agreement comes from the marginals")
    if report.mean_abs_difference is not None:
        parts.append(f"mean absolute difference {_num(report.mean_abs_difference)}")
    if report.n_missing:
        parts.append(f"{report.n_missing} rating(s) missing")
    if single_rated:
        parts.append(f"{single_rated} item(s) rated by one rater only (not used)")
    if undefined:
        parts.append(f"{undefined} of {report.resamples} bootstrap resamples had no variation (left out)")
    for name in report.leaning():
        row = next(r for r in report.lean if r.condition == name)
        way = "higher" if (row.mean_signed_difference or 0) > 0 else "lower"
        parts.append(
            f"disagreements lean on '{name}': {report.reference_rater} rates it {way} than the others on "
            f"{max(row.positive, row.negative)} of {row.positive + row.negative} disagreements "
            f"(sign test p={row.p_value:.3g})"
        )
    text = "; ".join(parts) + "."
    return replace(report, detail=text)
