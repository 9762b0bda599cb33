"""Rating a judged measure of a study run: calibrate first, code only when the gate passes.

The items are the agent's answers read back from the protocol's eval logs (the probe and the answer; the
condition stays in the hidden key). The panel first rates the measure's calibration set: the pre-registered file of
items with reference codes when the measure names one (then every study answer is coded after the gate), else a
seeded draw of ``calibration_items`` of the study's answers (the rest is coded after the gate). Every rater rates
blind and in its own order, with its own prompt and decoding settings (``protocols.analysis.raters``). The gate
(``protocols.analysis.gate``) refuses a panel whose raters are one rater (same model, prompt and settings), fewer
than ``min_raters`` raters giving readable ratings, Krippendorff's alpha among the raters below the threshold, and
any rater whose agreement with the reference codes is below the reference threshold. A refusal keeps the
calibration ratings and says why. ``write_ratings`` writes the run directory's long-format file.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocols.study.panel import JudgedMeasure, analysis_panel

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
    "reference",  # a calibration-set item's reference code (empty for the study's answers)
)
CALIBRATION_PROTOCOL = "calibration-set"  # the protocol column of a calibration-set item's rows


@dataclass(frozen=True)
class JudgedRatings:
    """A judged measure's ratings (``rate_with_models`` frame plus ``phase``), the raters' agreement on the
    calibration items (``report``), the gate with every input and check (``gate``) and whether coding was
    refused (and why)."""

    frame: Any  # pandas.DataFrame
    report: Any  # AgreementReport | None
    refused: bool
    reason: str | None
    calibration: tuple[str, ...]
    coded: tuple[str, ...]
    gate: Any = None  # protocols.analysis.gate.GateReport | None


def answer_items(locations: Sequence[str]) -> tuple[list[Any], dict[str, str]]:
    """Rating items from a protocol's eval logs: the probe (the sample's input) and the agent's answer, one
    per sample and condition; the condition stays in the item (the hidden key), never in what a rater sees.
    Samples that errored have no answer and are left out (the exclusion rules count them). Also returns
    item id -> sample id."""
    # inspect, pandas and protocols.analysis are slow to load; `lca --help` imports this module
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
    measure: JudgedMeasure,
    items: Sequence[Any],
    generators: Mapping[str, Any],
    *,
    seed: int,
    resamples: int = 1000,
    identities: Mapping[str, Any],
    calibration_set: Any = None,
) -> JudgedRatings:
    """Calibrate, then code (module docstring). ``identities`` (rater -> ``RaterIdentity``) decide whether the
    raters are distinct; ``calibration_set`` (``protocols.analysis.gate.CalibrationSet``, the measure's own
    when it names one) holds them against its reference codes."""
    import pandas as pd

    from protocols.analysis.gate import calibration_gate
    from protocols.analysis.raters import rate_with_models

    panel = analysis_panel(measure)
    if calibration_set is not None:
        calibration, rest = calibration_set.rating_items(), list(items)
        codes, source = calibration_set.codes(), calibration_set.summary()
    else:
        ordered = list(items)
        random.Random(f"{seed}:calibration:{measure.id}").shuffle(ordered)
        calibration, rest = ordered[: measure.calibration_items], ordered[measure.calibration_items :]
        codes = None
        source = {
            "source": "study answers",
            "items": len(calibration),
            "note": "a seeded draw of the study's own answers, without reference codes: nothing holds the raters "
            "against known codes",
        }
    if not calibration:
        empty = pd.DataFrame(columns=["item", "rater", "value", "condition", "raw", "problem", "phase"])
        return JudgedRatings(empty, None, True, "no answers to rate (every sample errored)", (), ())
    frame = rate_with_models(panel, calibration, generators, seed=seed).assign(phase="calibration")
    ids = tuple(item.item_id for item in calibration)
    gate = calibration_gate(
        frame,
        measure=measure.id,
        level=measure.level,
        scale=tuple(measure.scale),
        threshold=measure.agreement_threshold,
        min_raters=measure.rater_panel.min_raters,
        identities=identities,
        reference_codes=codes,
        reference_threshold=measure.reference_threshold,
        calibration=source,
        resamples=resamples,
        seed=seed,
    )
    if not gate.passes:
        return JudgedRatings(frame, gate.among, True, gate.reason, ids, (), gate)
    coded = tuple(item.item_id for item in rest)
    if rest:
        coding = rate_with_models(panel, rest, generators, seed=seed).assign(phase="coding")
        frame = pd.concat([frame, coding], ignore_index=True)
    return JudgedRatings(frame, gate.among, False, None, ids, coded, gate)


def write_ratings(
    path: Path,
    frame,
    items: Sequence[Any],
    samples: Mapping[str, str],
    protocol: str,
    seed: int,
    codes: Mapping[str, Any] | None = None,
) -> None:
    """The long-format ratings file: one row per item and rater. ``sheet_item_id`` is the item's blind id over
    all the measure's items (what a human sheet would show); ``condition`` is here, the raters never saw it.
    A calibration-set item (``codes``: its id -> reference code) is its own id under protocol and condition
    ``calibration-set``, with its reference code."""
    from protocols.analysis.raters import blind_items

    blind = blind_items(items, seed)
    sheet = {item_id: blind_id for blind_id, (item_id, _) in blind.key.items()}
    codes = codes or {}
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(RATINGS_COLUMNS)
        for row in frame.to_dict("records"):
            value = row["value"]
            missing = isinstance(value, float) and math.isnan(value)
            reference = row["item"] in codes
            writer.writerow(
                [
                    row["item"] if reference else sheet[row["item"]],
                    row["item"] if reference else samples[row["item"]],
                    CALIBRATION_PROTOCOL if reference else protocol,
                    row["condition"],
                    row["rater"],
                    "" if missing else value,
                    row.get("raw") or "",
                    (row.get("problem") or "") if missing else "",
                    row["phase"],
                    codes[row["item"]] if reference else "",
                ]
            )
