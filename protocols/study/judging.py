"""Rating a judged measure of a study run: calibrate first, code only when the raters agree.

The items are the agent's answers read back from the protocol's eval logs (the probe and the answer; the
condition stays in the hidden key). A seeded draw of ``calibration_items`` of them, across conditions, is
rated first by every rater of the panel (``protocols.analysis.raters``, blind and in each rater's own order);
Krippendorff's alpha at the measure's level (``protocols.analysis.agreement``) must reach the pre-registered
threshold, with at least ``min_raters`` raters giving readable ratings, before the rest is rated. A refusal
keeps the calibration ratings and says why. ``write_ratings`` writes the run directory's long-format file.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from protocols.study.schema import JudgedMeasure

RATINGS_COLUMNS = (
    "sheet_item_id",
    "sample_id",
    "protocol",
    "condition",
    "rater",
    "value",
    "raw",
    "missing_reason",
    "phase",  # calibration (rated before the gate) or coding (rated after it passed)
)


@dataclass(frozen=True)
class JudgedRatings:
    """A judged measure's ratings (``rate_with_models`` frame plus ``phase``), its calibration report and
    whether coding was refused (and why)."""

    frame: Any  # pandas.DataFrame
    report: Any  # AgreementReport | None
    refused: bool
    reason: str | None
    calibration: tuple[str, ...]
    coded: tuple[str, ...]


def answer_items(locations: Sequence[str]) -> tuple[list[Any], dict[str, str]]:
    """Rating items from a protocol's eval logs: the probe (the sample's input) and the agent's answer, one
    per sample and condition; the condition stays in the item (the hidden key), never in what a rater sees.
    Samples that errored have no answer and are left out (the exclusion rules count them). Also returns
    item id -> sample id."""
    from inspect_ai.log import read_eval_log

    from protocols.analysis.raters import RatingItem

    items, samples = [], {}
    for location in locations:
        log = read_eval_log(location)
        metadata = log.eval.metadata or {}
        condition = str(metadata.get("condition_label", metadata.get("condition", log.eval.task)))
        for sample in log.samples or ():
            if sample.error or sample.output is None:
                continue
            item_id = f"{sample.id}@{condition}" + (f"#{sample.epoch}" if sample.epoch and sample.epoch > 1 else "")
            items.append(RatingItem(item_id, _probe_text(sample.input), sample.output.completion, condition))
            samples[item_id] = str(sample.id)
    return items, samples


def _probe_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    users = [m for m in value if getattr(m, "role", None) == "user"]
    return users[-1].text if users else ""


def rate_judged(
    measure: JudgedMeasure, items: Sequence[Any], generators: Mapping[str, Any], *, seed: int, resamples: int = 1000
) -> JudgedRatings:
    """Calibrate, then code: the raters rate ``calibration_items`` items (a seeded draw across conditions);
    alpha at the measure's level must reach its threshold, with at least ``min_raters`` raters giving
    ratings, before the rest is rated. A refusal keeps the calibration ratings and says why."""
    import pandas as pd

    from protocols.analysis.agreement import AgreementTooLow, agreement
    from protocols.analysis.raters import RaterPanel as Panel
    from protocols.analysis.raters import rate_with_models

    panel = Panel(measure.rater_panel.raters, measure.rater_panel.prompt, tuple(measure.scale), measure.level)
    ordered = list(items)
    random.Random(f"{seed}:calibration:{measure.id}").shuffle(ordered)
    calibration, rest = ordered[: measure.calibration_items], ordered[measure.calibration_items :]
    if not calibration:
        empty = pd.DataFrame(columns=["item", "rater", "value", "condition", "raw", "problem", "phase"])
        return JudgedRatings(empty, None, True, "no answers to rate (every sample errored)", (), ())
    frame = rate_with_models(panel, calibration, generators, seed=seed).assign(phase="calibration")
    ids = tuple(item.item_id for item in calibration)
    rated = frame[frame["value"].notna()]
    giving = sorted(rated["rater"].unique())
    if len(giving) < measure.rater_panel.min_raters:
        missing = int(frame["value"].isna().sum())
        reason = (
            f"only {len(giving)} rater(s) gave a readable rating ({', '.join(giving) or 'none'}); the panel needs "
            f"{measure.rater_panel.min_raters}; {missing} of {len(frame)} calibration rating(s) are missing "
            "(the raw replies are in the ratings file)"
        )
        return JudgedRatings(frame, None, True, reason, ids, ())
    try:
        report = agreement(
            frame[["item", "rater", "value", "condition"]],
            measure.level,
            measure.agreement_threshold,
            resamples,
            seed,
            measure=measure.id,
            scale=tuple(measure.scale),
        )
    except LCAError as exc:
        return JudgedRatings(frame, None, True, f"agreement cannot be computed: {exc}", ids, ())
    if not report.passes:
        return JudgedRatings(frame, report, True, str(AgreementTooLow(report)), ids, ())
    coded = tuple(item.item_id for item in rest)
    if rest:
        coding = rate_with_models(panel, rest, generators, seed=seed).assign(phase="coding")
        frame = pd.concat([frame, coding], ignore_index=True)
    return JudgedRatings(frame, report, False, None, ids, coded)


def write_ratings(
    path: Path, frame, items: Sequence[Any], samples: Mapping[str, str], protocol: str, seed: int
) -> None:
    """The long-format ratings file: one row per item and rater. ``sheet_item_id`` is the item's blind id over
    all the measure's items (what a human sheet would show); ``condition`` is here, the raters never saw it."""
    from protocols.analysis.raters import blind_items

    blind = blind_items(items, seed)
    sheet = {item_id: blind_id for blind_id, (item_id, _) in blind.key.items()}
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(RATINGS_COLUMNS)
        for row in frame.to_dict("records"):
            value = row["value"]
            missing = isinstance(value, float) and math.isnan(value)
            writer.writerow(
                [
                    sheet[row["item"]],
                    samples[row["item"]],
                    protocol,
                    row["condition"],
                    row["rater"],
                    "" if missing else value,
                    row.get("raw") or "",
                    (row.get("problem") or "") if missing else "",
                    row["phase"],
                ]
            )
