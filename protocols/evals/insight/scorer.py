"""The insight protocol's scorer: the measures of the cycle the solver ran (``measure.cycle_measures``, left in the
sample's store under ``RUN_KEY``), for the cycle and for the content-only detector on the same corpus. Nothing here
reads a model's answer. A precision with nothing above the threshold is NaN, and its mean is over the corpora where
something was (``applicable_mean``)."""

from __future__ import annotations

import math
from typing import Any

RUN_KEY = "insight_run"
MEASURES = (
    "precision",
    "recall",
    "false_discoveries",
    "topical_differential",
    "content_only_precision",
    "content_only_topical_discoveries",
)


def _value(value: Any) -> float:
    return float("nan") if value is None else float(value)


def measure_values(run: dict[str, Any]) -> dict[str, float]:
    """The declared measures of one sample's run (NaN where one does not apply)."""
    cycle, baseline = run.get("cycle") or {}, run.get("content_only") or {}
    topical = (cycle.get("topical_differential") or {}).get("mean")
    return {
        "precision": _value(cycle.get("precision")),
        "recall": _value(cycle.get("recall")),
        "false_discoveries": _value(cycle.get("false_discoveries")),
        "topical_differential": _value(topical),
        "content_only_precision": _value(baseline.get("precision")),
        "content_only_topical_discoveries": _value(baseline.get("topical_discoveries")),
    }


def rhyme_detection():
    from inspect_ai.scorer import Score, scorer

    from protocols.harness.continuity_scorers import applicable_mean

    @scorer(metrics={name: [applicable_mean()] for name in MEASURES}, name="rhyme_detection")
    def _make():
        async def score(state, target):
            run = state.store.get(RUN_KEY) or {}
            values = measure_values(run)
            shown = ", ".join(f"{k}={v:.3g}" for k, v in values.items() if not math.isnan(v))
            return Score(
                value=values,
                answer=f"{int(run.get('cycle', {}).get('above_threshold_pairs', 0))} pair(s) above the threshold",
                explanation=f"gold rhymes {target.text}: {shown or 'nothing measured'}",
                metadata={"run": run},
            )

        return score

    return _make()
