"""Freshness's scorer: whether health saw the injected fault, how soon, and whether it raised a false alarm.

The solver (``freshness.inject_fault``) leaves the run in the sample's store under ``RUN_KEY``; nothing here reads a
model's answer. ``steps_to_detection`` and ``seconds_to_detection`` exist only for detected faults: an undetected
fault is NaN there, and their mean is over the detected faults alone (``mean_of_detected``), so a miss shows in
``detected`` and never as a fast detection.
"""

from __future__ import annotations

import math

RUN_KEY = "freshness_run"


def mean_of_detected():
    from inspect_ai.scorer import metric

    @metric(name="mean_of_detected")
    def _make():
        def compute(scores) -> float:
            values = [float(getattr(s, "score", s).as_float()) for s in scores]  # SampleScore or Score
            kept = [v for v in values if not math.isnan(v)]
            return sum(kept) / len(kept) if kept else float("nan")

        return compute

    return _make()


def fault_detection():
    from inspect_ai.scorer import Score, mean, scorer

    @scorer(
        metrics={
            "detected": [mean()],
            "steps_to_detection": [mean_of_detected()],
            "seconds_to_detection": [mean_of_detected()],
            "false_alarm": [mean()],
        },
        name="fault_detection",
    )
    def _make():
        async def score(state, target):
            run = state.store.get(RUN_KEY) or {}
            detected = bool(run.get("detected"))
            nan = float("nan")
            return Score(
                value={
                    "detected": float(detected),
                    "steps_to_detection": float(run["steps_to_detection"]) if detected else nan,
                    "seconds_to_detection": float(run["seconds_to_detection"]) if detected else nan,
                    "false_alarm": float(bool(run.get("false_alarm"))),
                },
                answer=f"{run.get('check')} ({run.get('status')})" if detected else "not detected",
                explanation=run.get("message") or f"no health check saw '{target.text}'",
                metadata={"run": run},
            )

        return score

    return _make()
