"""Models of an outcome by condition with grouping factors (scenarios, raters), as a study's analysis
plan names: a linear mixed model (random intercept per first group) or OLS with cluster-robust errors.

A mixed model that cannot be fitted honestly (one group level, one row per group, a failed or
non-converged fit, non-finite estimates) falls back to cluster-robust OLS, and the reason is written in
every contrast's ``detail``: the fallback is never silent.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

from protocols.analysis.result import StatisticsInputError, TestResult

KINDS = ("mixed", "cluster_robust")
_TERM = "C(cond)[T.{}]"


def _prepare(
    frame: pd.DataFrame, outcome: str, condition_col: str, group_cols: Sequence[str], reference: str | None
) -> tuple[pd.DataFrame, dict[str, str], str, int]:
    """A frame with safe column names (y, cond, g0, g1, ...) and conditions coded k0 (the reference),
    k1, ... so formulas never meet a condition name; rows missing any value are dropped and counted."""
    if isinstance(group_cols, str):
        group_cols = [group_cols]
    needed = [outcome, condition_col, *group_cols]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise StatisticsInputError(f"condition_model: columns {missing} not in the frame (has {list(frame.columns)})")
    if not group_cols:
        raise StatisticsInputError("condition_model: name at least one grouping column (e.g. scenario)")
    try:
        y = pd.to_numeric(frame[outcome], errors="raise").astype(float)
    except (TypeError, ValueError) as exc:
        raise StatisticsInputError(f"condition_model: outcome {outcome!r} is not numeric ({exc})") from exc
    data = pd.DataFrame({"y": y, "cond": frame[condition_col]})
    for i, col in enumerate(group_cols):
        data[f"g{i}"] = frame[col]
    complete = data["y"].map(math.isfinite) & data.drop(columns="y").notna().all(axis=1)
    data = data.loc[complete].reset_index(drop=True)
    dropped = int((~complete).sum())
    conditions = [str(c) for c in pd.unique(data["cond"])]
    data["cond"] = data["cond"].astype(str)
    if len(conditions) < 2:
        raise StatisticsInputError(f"condition_model: {len(conditions)} condition(s) with data; at least 2 are needed")
    reference = conditions[0] if reference is None else str(reference)
    if reference not in conditions:
        raise StatisticsInputError(f"condition_model: reference {reference!r} is not among the conditions {conditions}")
    ordered = [reference] + [c for c in conditions if c != reference]
    codes = {name: f"k{i}" for i, name in enumerate(ordered)}
    data["cond"] = data["cond"].map(codes)
    for i in range(len(group_cols)):
        data[f"g{i}"] = data[f"g{i}"].astype(str)
    return data, codes, reference, dropped


def _mixed_fit(data: pd.DataFrame, n_groups: int) -> tuple[Any, list[str]]:
    """MixedLM (REML), random intercept per g0, further grouping columns as variance components within
    it. Returns (fit, notes) or (None, [reason]) when the fit cannot be trusted."""
    if data["g0"].nunique() < 2:
        return None, ["the first grouping factor has one level, so a random intercept is not identifiable"]
    if data.groupby("g0").size().max() < 2:
        return None, ["every group holds one row, so a random intercept cannot be told from the residual"]
    extra = [c for c in data.columns if c.startswith("g") and c != "g0"]
    vc = {c: f"0 + C({c})" for c in extra} or None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = smf.mixedlm("y ~ C(cond)", data, groups=data["g0"], re_formula="1", vc_formula=vc).fit(reml=True)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            return None, [f"MixedLM failed ({type(exc).__name__}: {exc})"]
    messages = sorted({str(w.message).splitlines()[0] for w in caught})
    if not fit.converged:
        return None, ["MixedLM did not converge" + (f" ({'; '.join(messages)})" if messages else "")]
    terms = [t for t in fit.params.index if t.startswith("C(cond)")]
    if not all(math.isfinite(fit.params[t]) and math.isfinite(fit.bse[t]) for t in terms):
        return None, ["MixedLM gave non-finite contrasts or standard errors"]
    notes = [f"MixedLM (REML), random intercept per first group ({n_groups} groups)"]
    if extra:
        notes.append(f"{len(extra)} further grouping factor(s) as variance components within the first group")
    notes.extend(f"MixedLM warning: {m}" for m in messages)
    return fit, notes


def _ols_fit(data: pd.DataFrame) -> tuple[Any, list[str]]:
    """OLS with errors clustered on g0 (t with G - 1 df); heteroskedasticity-robust HC1 errors with a note
    when there is a single cluster, where clustering is undefined."""
    model = smf.ols("y ~ C(cond)", data)
    n_clusters = data["g0"].nunique()
    if n_clusters < 2:
        fit = model.fit(cov_type="HC1", use_t=True)
        return fit, ["OLS with HC1 (heteroskedasticity-robust) errors: one cluster, so clustering is undefined"]
    groups = pd.factorize(data["g0"])[0]
    fit = model.fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    notes = [f"OLS with errors clustered on the first group ({n_clusters} clusters, t with {n_clusters - 1} df)"]
    if n_clusters < 10:
        notes.append(f"only {n_clusters} clusters: cluster-robust errors are unreliable below about 10")
    extra = [c for c in data.columns if c.startswith("g") and c != "g0"]
    if extra:
        notes.append(f"{len(extra)} further grouping factor(s) not modelled by the cluster-robust fit")
    return fit, notes


def _exact_contrasts(data: pd.DataFrame, codes: dict[str, str], reference: str) -> dict[str, TestResult]:
    """No variation within any condition: a model's standard errors would be zero or round-off (a p of 0.049 on
    1e-16), so the contrasts are the exact differences of the conditions' values, without a test."""
    values = data.groupby("cond")["y"].first()
    counts = data["cond"].value_counts()
    out: dict[str, TestResult] = {}
    for name, code in codes.items():
        if name == reference:
            continue
        estimate = float(values[code] - values[codes[reference]])
        out[name] = TestResult(
            test="exact_contrast",
            n=int(len(data)),
            estimate=estimate,
            ci_low=estimate,
            ci_high=estimate,
            statistic=None,
            p_value=None,
            effect_size=None,
            effect_name="none (no variation)",
            detail=f"{name} - {reference}: rows {int(counts[code])} vs {int(counts[codes[reference]])}; every row of "
            "each condition has the same value, so the contrast is exact and no model or test applies",
        )
    return out


def condition_model(
    frame: pd.DataFrame,
    outcome: str,
    condition_col: str,
    group_cols: Sequence[str],
    kind: str = "mixed",
    reference: str | None = None,
    level: float = 0.95,
) -> dict[str, TestResult]:
    """Per-condition contrasts against ``reference`` (default: the first condition in the frame) from a
    linear model of ``outcome`` by condition, one row per (item, condition[, rater]).

    ``kind="mixed"``: statsmodels MixedLM with a random intercept per ``group_cols[0]`` (e.g. scenario);
    falls back to cluster-robust OLS with the reason recorded. ``kind="cluster_robust"``: OLS, errors
    clustered on ``group_cols[0]``. A 0/1 outcome is modelled linearly, so contrasts are differences in
    proportions. Returns {condition: TestResult} for every condition other than the reference; the effect
    size is the contrast over the model's residual SD (for the mixed model, total SD)."""
    if kind not in KINDS:
        raise StatisticsInputError(f"condition_model: kind must be one of {KINDS}, got {kind!r}")
    if not 0.0 < level < 1.0:
        raise StatisticsInputError(f"condition_model: level must lie strictly between 0 and 1, got {level}")
    data, codes, reference, dropped = _prepare(frame, outcome, condition_col, group_cols, reference)
    if data.groupby("cond")["y"].nunique().max() <= 1:
        return _exact_contrasts(data, codes, reference)
    n_groups = data["g0"].nunique()
    notes: list[str] = []
    fit = None
    used = kind
    if kind == "mixed":
        fit, notes = _mixed_fit(data, n_groups)
        if fit is None:
            notes = [f"FALLBACK from mixed model: {notes[0]}; used cluster-robust OLS instead"]
            used = "cluster_robust"
    if fit is None:
        fit, ols_notes = _ols_fit(data)
        notes.extend(ols_notes)
    if used == "mixed":
        group_var = float(np.sum(np.diag(np.atleast_2d(np.asarray(fit.cov_re))))) + float(np.sum(fit.vcomp))
        sd = math.sqrt(max(fit.scale + group_var, 0.0))
        sd_name = "total SD"
    else:
        sd = math.sqrt(max(float(fit.scale), 0.0))
        sd_name = "residual SD"
    if set(np.unique(data["y"])) <= {0.0, 1.0}:
        notes.append("0/1 outcome modelled linearly: contrasts are differences in proportions")
    if dropped:
        notes.append(f"{dropped} rows dropped for missing values")
    interval = fit.conf_int(alpha=1 - level)
    counts = data["cond"].value_counts()
    results: dict[str, TestResult] = {}
    for name, code in codes.items():
        if name == reference:
            continue
        term = _TERM.format(code)
        estimate = float(fit.params[term])
        stat = float(fit.tvalues[term])
        p_value = float(fit.pvalues[term])
        low, high = (float(v) for v in interval.loc[term])
        detail = "; ".join(
            [
                f"{name} - {reference}: rows {int(counts[code])} vs {int(counts[codes[reference]])}",
                *notes,
                f"{level:.0%} Wald interval",
            ]
        )
        results[name] = TestResult(
            test=f"{used}_contrast",
            n=int(len(data)),
            estimate=estimate,
            ci_low=low,
            ci_high=high,
            statistic=stat if math.isfinite(stat) else None,
            p_value=p_value if math.isfinite(p_value) else None,
            effect_size=estimate / sd if sd > 0 else None,
            effect_name=f"contrast / {sd_name}",
            detail=detail,
        )
    return results
