"""The per-item frame: one row per (protocol, sample_id, condition, epoch) of a study run, read from its logs.

This is the analysis API a notebook or an outside analysis uses (``load_run`` then ``items_frame``), and the
frame the report writes as ``items.parquet``, so nobody needs to parse ``.eval`` logs. Every score value is a
column named ``<scorer>/<metric>`` (a scorer with one value: ``<scorer>/<scorer>``), NaN kept where a measure
does not apply; a judged measure whose raters' agreement passed is the column ``judged/<measure id>`` (the mean
of its raters' values). Beside them: scenario, category, the question and the answer, the injected pointers and
tokens, the recall latency, the shortfalls and any sample error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from inspect_ai.log import read_eval_log

from protocols.report.run import StudyRun
from protocols.study.schema import ComputedMeasure, JudgedMeasure

KEY_COLUMNS = ("protocol", "sample_id", "condition", "epoch")
JUDGED_PREFIX = "judged/"
_LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # inspect's correct / incorrect / partial / no answer


def measure_column(measure: ComputedMeasure | JudgedMeasure) -> str:
    """The items-frame column holding a measure's per-item value."""
    if isinstance(measure, JudgedMeasure):
        return f"{JUDGED_PREFIX}{measure.id}"
    return f"{measure.scorer}/{measure.metric}"


def score_float(value: Any) -> float:
    """A score value as a float: numbers and booleans as they are, inspect's letter grades by their meaning,
    anything else NaN (never a guessed 0)."""
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, str):
        if value in _LETTER_SCORES:
            return _LETTER_SCORES[value]
        try:
            return float(value)
        except ValueError:
            return math.nan
    return math.nan


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages: the last one is the question asked
        last = value[-1] if value else None
        return str(getattr(last, "text", "") or "") if last is not None else ""
    return "" if value is None else str(value)


def _packet(scores: Mapping[str, Any]) -> Mapping[str, Any]:
    for score in scores.values():
        packet = (getattr(score, "metadata", None) or {}).get("packet")
        if isinstance(packet, Mapping):
            return packet
    return {}


def sample_row(protocol: str, condition: str, sample: Any) -> dict[str, Any]:
    """One sample of a task log as a row (without the scenario history the sample carries)."""
    meta = sample.metadata or {}
    scores = sample.scores or {}
    packet = _packet(scores)
    pointers = packet.get("pointers")
    if pointers is None:
        pointers = sorted({p for item in packet.get("items") or () for p in item.get("pointers") or ()})
    shortfalls = sorted((meta.get("shortfalls") or {}).keys())
    sample_id = str(sample.id)
    row: dict[str, Any] = {
        "protocol": protocol,
        "sample_id": sample_id,
        "condition": condition,
        "epoch": int(sample.epoch or 1),
        "scenario": str(meta.get("scenario") or sample_id.split(":", 1)[0]),
        "category": None if meta.get("category") is None else str(meta.get("category")),
        "question": _text(sample.input),
        "answer": sample.output.completion if sample.output is not None else "",
        "error": None if sample.error is None else str(getattr(sample.error, "message", sample.error)),
        "injected_tokens": score_float(packet.get("injected_tokens", math.nan)),
        "recall_latency_ms": score_float(packet.get("recall_latency_ms", math.nan)),
        "injected_pointers": [str(p) for p in pointers],
        "shortfalls": ",".join(str(k) for k in shortfalls),
        "shortfall": bool(shortfalls),
        "sample_seconds": score_float(sample.total_time if sample.total_time is not None else math.nan),
    }
    for scorer, score in scores.items():
        value = score.value
        if isinstance(value, Mapping):
            for metric, inner in value.items():
                row[f"{scorer}/{metric}"] = score_float(inner)
        elif not isinstance(value, list):
            row[f"{scorer}/{scorer}"] = score_float(value)
    return row


def log_rows(protocol: str, condition: str, location: str) -> list[dict[str, Any]]:
    log = read_eval_log(location)
    return [sample_row(protocol, condition, sample) for sample in log.samples or ()]


def items_frame(run: StudyRun) -> pd.DataFrame:
    """Every sample of every task log of the run, one row per (protocol, sample_id, condition, epoch), plus a
    ``judged/<id>`` column per judged measure whose coding was allowed (agreement passed)."""
    rows: list[dict[str, Any]] = []
    for protocol, headers in run.logs.items():
        for header in headers:
            rows.extend(log_rows(protocol, header.condition, header.location))
    frame = pd.DataFrame(rows)
    if frame.empty:
        frame = pd.DataFrame(columns=[*KEY_COLUMNS, "scenario", "category", "error"])
    for measure in run.study.judged_measures():
        ratings = run.ratings.get(measure.id)
        if ratings is None or not coding_allowed(run, measure.id):
            continue
        frame = attach_judged(frame, measure, ratings)
    return frame.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)


def coding_allowed(run: StudyRun, measure_id: str) -> bool:
    """A judged measure's ratings are study data only when its calibration passed (the agreement record says
    so, and does not say refused)."""
    record = run.agreement.get(measure_id)
    if record is None:
        return False
    return bool(record.get("passes")) and not bool(record.get("refused"))


def rating_values(ratings: pd.DataFrame, measure: JudgedMeasure) -> pd.Series:
    """The ratings' values on the measure's scale: numbers for ordinal and interval scales, the labels as
    written for nominal ones; an empty or unparseable cell is missing (NaN)."""
    raw = ratings["value"].astype(str).str.strip().replace("", np.nan)
    if measure.level == "nominal":
        return raw
    return pd.to_numeric(raw, errors="coerce")


def attach_judged(frame: pd.DataFrame, measure: JudgedMeasure, ratings: pd.DataFrame) -> pd.DataFrame:
    """Add ``judged/<id>``: the mean of the raters' values per (protocol, sample_id, condition); nominal
    measures are not averaged (their column holds the majority label only when the raters agree)."""
    data = ratings.assign(value=rating_values(ratings, measure))
    if "protocol" not in data.columns or not data["protocol"].astype(str).str.strip().any():
        data = data.assign(protocol=measure.protocol)
    data = data.dropna(subset=["value"])
    keys = ["protocol", "sample_id", "condition"]
    if measure.level == "nominal":
        per = data.groupby(keys)["value"].agg(lambda v: v.iloc[0] if v.nunique() == 1 else np.nan)
    else:
        per = data.groupby(keys)["value"].mean()
    per = per.rename(measure_column(measure)).reset_index()
    return frame.merge(per, on=keys, how="left")


def measure_frame(
    frame: pd.DataFrame, measure: ComputedMeasure | JudgedMeasure, groups: tuple[str, ...] = ("scenario",)
) -> pd.DataFrame:
    """A measure's values, one row per (sample_id, condition) of its protocol: epochs averaged, errored samples
    and samples the measure does not apply to (NaN) dropped. Columns: sample_id, condition, value and the
    grouping columns the frame has (``groups``)."""
    column = measure_column(measure)
    kept = [g for g in groups if g in frame.columns and g not in ("sample_id", "condition")]
    if column not in frame.columns or frame.empty:
        return pd.DataFrame(columns=["sample_id", "condition", "value", *kept])
    rows = frame[(frame["protocol"] == measure.protocol) & frame["error"].isna()]
    rows = rows.assign(value=pd.to_numeric(rows[column], errors="coerce")).dropna(subset=["value"])
    grouped = rows.groupby(["sample_id", "condition"], sort=True)
    out = grouped.agg(value=("value", "mean"), **{g: (g, "first") for g in kept}).reset_index()
    return out[["sample_id", "condition", "value", *kept]]
