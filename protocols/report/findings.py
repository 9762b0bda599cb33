"""A study run analysed as its pre-registration says: every prediction tested on the items both conditions
answered, corrected within its family, and given a verdict; per condition and measure a mean with its interval;
the analysis plan's condition model per measure; the raters' agreement per judged measure.

The tests are those of ``protocols.analysis`` (McNemar, paired bootstrap, TOST, Holm, the condition models,
Krippendorff's alpha); this module only chooses among them and applies the decision rules, stated here once:

* superiority: the difference better - than, oriented so that positive favours the prediction (a measure whose
  lower values are better is negated). *supported* when it is at least ``min_effect`` and the corrected p-value
  is below alpha; *not supported* when its whole interval lies below ``min_effect`` (the data rule out the
  predicted effect, or show the opposite); else *inconclusive*.
* equivalence: TOST on the paired differences with the margin. *supported* when the corrected TOST p-value is
  below alpha; *not supported* when the (1 - 2 alpha) interval lies wholly outside the margin; else
  *inconclusive*.
* *uninformative* (equivalence only) when the prediction names a ``floor`` (or ``ceiling``) and both conditions'
  means lie at or below it (at or above it): neither condition can do the task, so parity there says nothing about
  them, whatever TOST says.
* *not tested* when there is nothing to test: fewer than two paired items, a condition without data, or a judged
  measure whose coding was refused (its agreement figures are given instead).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from lca.errors import LCAError
from protocols.analysis.agreement import agreement
from protocols.analysis.stats import (
    StatisticsInputError,
    TestResult,
    bootstrap_ci,
    condition_model,
    holm,
    paired_binary,
    paired_continuous,
    tost_paired,
)
from protocols.report.items import measure_column, measure_frame, rating_values
from protocols.report.run import StudyRun, finite
from protocols.study.schema import ComputedMeasure, JudgedMeasure, Prediction, Study

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_TESTED = "supported", "not supported", "inconclusive", "not tested"
UNINFORMATIVE = "uninformative"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, UNINFORMATIVE, NOT_TESTED)


def _json(value: Any) -> Any:
    if isinstance(value, TestResult):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, float | np.floating):
        return finite(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


@dataclass(frozen=True)
class JudgedStatus:
    """A judged measure's calibration: ``passed`` (its ratings are study data), ``refused`` (alpha below the
    threshold or undefined: not coded) or ``missing`` (no ratings in the run); ``leaning`` names the conditions
    whose disagreements run one way."""

    measure: str
    state: str
    level: str
    threshold: float
    alpha: float | None = None
    alpha_ci: tuple[float | None, float | None] = (None, None)
    raw_agreement: float | None = None
    expected_agreement: float | None = None
    n_items: int = 0
    n_raters: int = 0
    leaning: tuple[str, ...] = ()
    lean: tuple[dict[str, Any], ...] = ()
    reason: str = ""
    source: str = ""
    gate: dict[str, Any] = field(default_factory=dict)  # the runner's gate record: every input and check

    def to_dict(self) -> dict[str, Any]:
        return _json(asdict(self))


@dataclass(frozen=True)
class PredictionOutcome:
    """One prediction against its outcome; ``p_adjusted`` is corrected within the prediction's role family."""

    id: str
    hypothesis: str
    measure: str
    kind: str
    role: str
    conditions: tuple[str, ...]
    verdict: str
    reason: str
    threshold: float | None  # min_effect (superiority) or margin (equivalence)
    result: TestResult | None = None
    p_adjusted: float | None = None
    directed_estimate: float | None = None
    directed_ci: tuple[float | None, float | None] = (None, None)
    means: dict[str, float] = field(default_factory=dict)
    floor: float | None = None  # equivalence: both means at or below it make the test uninformative
    ceiling: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _json(asdict(self) | {"result": self.result})


@dataclass(frozen=True)
class ConditionStat:
    protocol: str
    measure: str
    condition: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    stderr: float

    def to_dict(self) -> dict[str, Any]:
        return _json(asdict(self))


@dataclass(frozen=True)
class ModelContrast:
    """One contrast of the analysis plan's condition model (condition - reference), or why none was fitted."""

    measure: str
    condition: str
    reference: str
    result: TestResult | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _json(asdict(self) | {"result": self.result})


@dataclass(frozen=True)
class StudyAnalysis:
    predictions: tuple[PredictionOutcome, ...]
    conditions: tuple[ConditionStat, ...]
    models: tuple[ModelContrast, ...]
    judged: dict[str, JudgedStatus]
    latency: tuple[dict[str, Any], ...]
    shortfalls: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "predictions": [p.to_dict() for p in self.predictions],
            "conditions": [c.to_dict() for c in self.conditions],
            "condition_models": [m.to_dict() for m in self.models],
            "agreement": {k: v.to_dict() for k, v in self.judged.items()},
            "latency": _json(list(self.latency)),
            "shortfalls": _json(list(self.shortfalls)),
        }


# ---- judged measures --------------------------------------------------------------------------------------
def judged_status(run: StudyRun, measure: JudgedMeasure) -> JudgedStatus:
    """The calibration the runner recorded (``ratings/<id>.agreement.json``); when only the ratings are there,
    alpha is computed here from them (and says so); with neither, the measure is ``missing``."""
    record = run.agreement.get(measure.id)
    status = partial(JudgedStatus, measure=measure.id, level=measure.level, threshold=measure.agreement_threshold)
    if record is not None:
        passes = bool(record.get("passes")) and not bool(record.get("refused"))
        ci = record.get("alpha_ci") or (None, None)
        return status(
            state="passed" if passes else "refused",
            alpha=finite(record.get("alpha")),
            alpha_ci=(finite(ci[0]), finite(ci[1])),
            raw_agreement=finite(record.get("raw_agreement")),
            expected_agreement=finite(record.get("expected_agreement")),
            n_items=int(record.get("n_items") or 0),
            n_raters=int(record.get("n_raters") or 0),
            leaning=tuple(record.get("leaning") or ()),
            lean=tuple(record.get("lean") or ()),
            reason=str(record.get("reason") or record.get("detail") or ""),
            source=f"ratings/{measure.id}.agreement.json (the runner's calibration)",
            gate=dict(record.get("gate") or {})
            | ({"panel_note": record["panel_note"]} if record.get("panel_note") else {}),
        )
    ratings = run.ratings.get(measure.id)
    if ratings is None:
        return status(state="missing", reason="the run holds no ratings of this measure")
    if "phase" in ratings.columns and (ratings["phase"] == "calibration").any():
        ratings = ratings[ratings["phase"] == "calibration"]  # the gate is the calibration set's agreement
    values = rating_values(ratings, measure)
    if measure.level == "nominal":
        by_text = {str(v): v for v in measure.scale}
        values = values.map(lambda v: by_text.get(v, v) if isinstance(v, str) else v)
    items = (
        ratings["sheet_item_id"] if "sheet_item_id" in ratings else ratings["sample_id"] + "|" + ratings["condition"]
    )
    frame = pd.DataFrame({"item": items, "rater": ratings["rater"], "value": values, "condition": ratings["condition"]})
    try:
        report = agreement(
            frame, measure.level, measure.agreement_threshold, measure=measure.id, scale=list(measure.scale)
        )
    except LCAError as exc:
        return status(state="refused", reason=f"agreement could not be computed: {exc}")
    data = report.to_dict()
    return status(
        state="passed" if report.passes else "refused",
        alpha=finite(report.alpha),
        alpha_ci=(finite(report.alpha_ci[0]), finite(report.alpha_ci[1])),
        raw_agreement=finite(report.raw_agreement),
        expected_agreement=finite(report.expected_agreement),
        n_items=report.n_items,
        n_raters=report.n_raters,
        leaning=tuple(report.leaning()),
        lean=tuple(_json(data["lean"])),
        reason=report.detail,
        source=f"computed by the report from ratings/{measure.id}.csv (the run holds no agreement record)",
    )


def _not_coded(status: JudgedStatus | None) -> str | None:
    if status is None or status.state == "passed":
        return None
    if status.state == "missing":
        return "not rated in this run"
    if (status.gate.get("checks") or status.gate.get("reason")) and status.reason:
        why = status.gate.get("summary") or status.reason.strip().rstrip(".")
        return f"coding refused by the rater gate: {why} (every check and figure under Rater agreement)"
    low, high = status.alpha_ci
    return (
        f"coding refused: Krippendorff's alpha {_num(status.alpha)} (95% CI {_num(low)} to {_num(high)}) is "
        f"below the threshold {status.threshold:g}"
    )


def _num(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3f}"


# ---- predictions ----------------------------------------------------------------------------------------
def _paired(
    frame: pd.DataFrame, study: Study, arms: tuple[tuple[str, str], ...], labels: tuple[str, ...]
) -> tuple[pd.Series, pd.Series, str | None]:
    """The two arms' values, aligned by sample: each arm is (condition, measure id); two conditions on one
    measure, or two measures of one condition."""
    series = []
    for (condition, measure_id), label in zip(arms, labels):
        measure = study.measure(measure_id)
        values = measure_frame(frame, measure)
        mine = values[values["condition"] == condition] if len(values) else values
        if not len(mine):
            return (
                pd.Series(dtype=float),
                pd.Series(dtype=float),
                f"no values of '{measure_column(measure)}' under '{condition}' on protocol '{measure.protocol}'",
            )
        series.append(mine.set_index("sample_id")["value"].astype(float).rename(label))
    wide = pd.concat(series, axis=1)
    return wide.iloc[:, 0], wide.iloc[:, 1], None


def evaluate_prediction(
    study: Study, prediction: Prediction, frame: pd.DataFrame, judged: Mapping[str, JudgedStatus]
) -> PredictionOutcome:
    """The prediction's test before correction (its verdict is set by ``decide``)."""
    measure = study.measure(prediction.measure)
    conditions = study.prediction_conditions(prediction)
    threshold = prediction.min_effect if prediction.kind == "superiority" else prediction.margin
    outcome = partial(
        PredictionOutcome,
        id=prediction.id,
        hypothesis=prediction.hypothesis,
        measure=prediction.measure,
        kind=prediction.kind,
        role=prediction.role,
        conditions=conditions,
        threshold=threshold,
        floor=prediction.floor,
        ceiling=prediction.ceiling,
    )
    arms = study.prediction_arms(prediction)
    for _, measure_id in dict.fromkeys(arms):
        armed = study.measure(measure_id)
        refused = _not_coded(judged.get(armed.id)) if isinstance(armed, JudgedMeasure) else None
        if refused:
            return outcome(verdict=NOT_TESTED, reason=refused)
    a, b = conditions
    x, y, missing = _paired(frame, study, arms, conditions)
    if missing:
        return outcome(verdict=NOT_TESTED, reason=missing)
    both = x.notna() & y.notna()
    means = {a: float(x[both].mean()) if both.any() else math.nan, b: float(y[both].mean()) if both.any() else math.nan}
    boot = study.analysis.bootstrap
    try:
        if prediction.kind == "equivalence":
            result = tost_paired(x, y, float(prediction.margin or 0), alpha=study.analysis.alpha)
        elif _is_binary(measure, x, y):
            result = paired_binary(x, y, resamples=boot.resamples, seed=boot.seed)
        else:
            result = paired_continuous(x, y, "bootstrap", resamples=boot.resamples, seed=boot.seed)
    except StatisticsInputError as exc:
        return outcome(verdict=NOT_TESTED, reason=str(exc), means=means)
    sign = -1.0 if prediction.kind == "superiority" and measure.direction == "lower" else 1.0
    low, high = sorted((sign * result.ci_low, sign * result.ci_high))
    return outcome(
        verdict=INCONCLUSIVE,
        reason="",
        result=result,
        directed_estimate=sign * result.estimate,
        directed_ci=(low, high),
        means=means,
    )


def _is_binary(measure, x: pd.Series, y: pd.Series) -> bool:
    if not isinstance(measure, ComputedMeasure) or measure.scale != "binary":
        return False
    seen = set(pd.concat([x, y]).dropna().unique().tolist())
    return seen <= {0.0, 1.0}


def decide(outcome: PredictionOutcome, alpha: float) -> PredictionOutcome:
    """The verdict of a tested prediction from its corrected p-value (module docstring)."""
    if outcome.result is None:
        return outcome
    p = outcome.p_adjusted
    estimate = outcome.directed_estimate
    low, high = outcome.directed_ci
    bound = float(outcome.threshold or 0.0)
    if outcome.kind == "equivalence":
        bounded = _at_bound(outcome)
        if bounded:
            return replace(outcome, verdict=UNINFORMATIVE, reason=bounded)
        if p is not None and p < alpha:
            return replace(
                outcome, verdict=SUPPORTED, reason=f"equivalent within ±{bound:g} (TOST, corrected p {p:.3g})"
            )
        if low is not None and high is not None and (low >= bound or high <= -bound):
            return replace(
                outcome, verdict=NOT_SUPPORTED, reason=f"the interval [{low:.3g}, {high:.3g}] lies outside ±{bound:g}"
            )
        return replace(
            outcome, verdict=INCONCLUSIVE, reason=f"neither equivalence within ±{bound:g} nor its absence shown"
        )
    if p is not None and p < alpha and estimate is not None and estimate >= bound and estimate > 0:
        return replace(
            outcome,
            verdict=SUPPORTED,
            reason=f"difference {estimate:.3g} >= {bound:g} in the predicted direction, corrected p {p:.3g}",
        )
    if high is not None and high < bound:
        return replace(
            outcome,
            verdict=NOT_SUPPORTED,
            reason=f"the interval of the difference [{low:.3g}, {high:.3g}] lies below the predicted {bound:g}",
        )
    why = (
        "not significant after correction" if p is None or p >= alpha else f"difference {estimate:.3g} below {bound:g}"
    )
    return replace(outcome, verdict=INCONCLUSIVE, reason=f"{why}; the interval still admits the predicted effect")


def _at_bound(outcome: PredictionOutcome) -> str | None:
    """Why an equivalence test is uninformative: both conditions at the pre-registered floor or ceiling."""
    means = [m for m in outcome.means.values() if m == m]
    if len(means) < 2:
        return None
    shown = ", ".join(f"{c} {m:.3g}" for c, m in outcome.means.items())
    if outcome.floor is not None and max(means) <= outcome.floor:
        return f"both conditions at the floor ({shown}; floor {outcome.floor:g}): parity there says nothing"
    if outcome.ceiling is not None and min(means) >= outcome.ceiling:
        return f"both conditions at the ceiling ({shown}; ceiling {outcome.ceiling:g}): parity there says nothing"
    return None


def correct(p_values: list[float | None], method: str) -> list[float | None]:
    if method == "holm":
        return [finite(p) for p in holm(p_values)]
    if method == "bonferroni":
        m = sum(p is not None for p in p_values)
        return [None if p is None else min(1.0, p * m) for p in p_values]
    return list(p_values)


def evaluate_predictions(
    study: Study, frame: pd.DataFrame, judged: Mapping[str, JudgedStatus]
) -> tuple[PredictionOutcome, ...]:
    """Every prediction tested, p-values corrected within each role family (primary, secondary) by the
    analysis plan's correction, then decided."""
    raw = [evaluate_prediction(study, p, frame, judged) for p in study.predictions]
    out = list(raw)
    for role in ("primary", "secondary"):
        tested = {i: o.result for i, o in enumerate(raw) if o.role == role and o.result is not None}
        adjusted = correct([result.p_value for result in tested.values()], study.analysis.correction)
        for i, p in zip(tested, adjusted):
            out[i] = replace(raw[i], p_adjusted=p)
    return tuple(decide(o, study.analysis.alpha) for o in out)


# ---- descriptive tables ---------------------------------------------------------------------------------
def _conditions_of(study: Study, measure, values: pd.DataFrame) -> list[str]:
    planned = list(study.protocol_conditions(measure.protocol)) if measure.protocol in study.protocol_names else []
    return planned + [c for c in pd.unique(values["condition"]) if c not in planned]


def condition_stats(study: Study, frame: pd.DataFrame, judged: Mapping[str, JudgedStatus]) -> tuple[ConditionStat, ...]:
    """Per measure and condition: n items, mean, bootstrap 95% interval, standard error."""
    boot = study.analysis.bootstrap
    out = []
    for measure in study.measures:
        if isinstance(measure, JudgedMeasure) and _not_coded(judged.get(measure.id)):
            continue
        values = measure_frame(frame, measure)
        for condition in _conditions_of(study, measure, values):
            v = values.loc[values["condition"] == condition, "value"].to_numpy(dtype=float)
            n = int(v.size)
            mean = float(v.mean()) if n else math.nan
            stderr = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
            low, high = bootstrap_ci(v, resamples=boot.resamples, seed=boot.seed) if n > 1 else (math.nan, math.nan)
            out.append(ConditionStat(measure.protocol, measure.id, condition, n, mean, low, high, stderr))
    return tuple(out)


def condition_models(
    study: Study, frame: pd.DataFrame, judged: Mapping[str, JudgedStatus]
) -> tuple[ModelContrast, ...]:
    """The analysis plan's model (mixed or cluster-robust, grouped by its ``groups``) per measure, contrasts
    against the measure's first condition; a measure that cannot be modelled says why."""
    plan = study.analysis
    out = []
    for measure in study.measures:
        if isinstance(measure, JudgedMeasure) and _not_coded(judged.get(measure.id)):
            continue
        values = measure_frame(frame, measure, groups=plan.groups)
        conditions = [c for c in _conditions_of(study, measure, values) if (values["condition"] == c).any()]
        reference = conditions[0] if conditions else ""
        groups = [g for g in plan.groups if g in values.columns]
        if len(conditions) < 2 or not groups:
            why = (
                "fewer than two conditions with data"
                if len(conditions) < 2
                else f"no grouping column {list(plan.groups)}"
            )
            out.append(ModelContrast(measure.id, "", reference, None, f"not modelled: {why}"))
            continue
        try:
            contrasts = condition_model(values, "value", "condition", groups, kind=plan.model, reference=reference)
        except (StatisticsInputError, ValueError, np.linalg.LinAlgError) as exc:
            out.append(ModelContrast(measure.id, "", reference, None, f"not modelled: {exc}"))
            continue
        out.extend(ModelContrast(measure.id, c, reference, r) for c, r in contrasts.items())
    return tuple(out)


def _percentile(values: pd.Series, q: float) -> float:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return float(np.percentile(v, q)) if len(v) else math.nan


def latency_table(frame: pd.DataFrame) -> tuple[dict[str, Any], ...]:
    """Per protocol and condition: recall latency and whole-sample time at p50 and p95, mean injected tokens."""
    if frame.empty:
        return ()
    rows = []
    for (protocol, condition), part in frame.groupby(["protocol", "condition"], sort=True):
        rows.append(
            {
                "protocol": protocol,
                "condition": condition,
                "samples": int(len(part)),
                "recall_p50_ms": _percentile(part["recall_latency_ms"], 50),
                "recall_p95_ms": _percentile(part["recall_latency_ms"], 95),
                "sample_p50_s": _percentile(part["sample_seconds"], 50),
                "sample_p95_s": _percentile(part["sample_seconds"], 95),
                "injected_tokens_mean": float(pd.to_numeric(part["injected_tokens"], errors="coerce").mean()),
            }
        )
    return tuple(rows)


def shortfall_table(frame: pd.DataFrame) -> tuple[dict[str, Any], ...]:
    """Per protocol and condition: samples, errored samples (excluded from every measure) and samples whose
    condition did less than it claims (kept), by kind."""
    if frame.empty:
        return ()
    rows = []
    for (protocol, condition), part in frame.groupby(["protocol", "condition"], sort=True):
        kinds: dict[str, int] = {}
        for text in part["shortfalls"]:
            for kind in filter(None, str(text).split(",")):
                kinds[kind] = kinds.get(kind, 0) + 1
        rows.append(
            {
                "protocol": protocol,
                "condition": condition,
                "samples": int(len(part)),
                "errors": int(part["error"].notna().sum()),
                "with_shortfall": int(part["shortfall"].sum()),
                "kinds": kinds,
            }
        )
    return tuple(rows)


def analyse_frame(study: Study, frame: pd.DataFrame, judged: Mapping[str, JudgedStatus] | None = None) -> StudyAnalysis:
    """The whole analysis of an items frame (``items_frame``), given the judged measures' calibration."""
    judged = dict(judged or {})
    return StudyAnalysis(
        predictions=evaluate_predictions(study, frame, judged),
        conditions=condition_stats(study, frame, judged),
        models=condition_models(study, frame, judged),
        judged=judged,
        latency=latency_table(frame),
        shortfalls=shortfall_table(frame),
    )


def analyse(run: StudyRun, frame: pd.DataFrame) -> StudyAnalysis:
    judged = {m.id: judged_status(run, m) for m in run.study.judged_measures()}
    return analyse_frame(run.study, frame, judged)
