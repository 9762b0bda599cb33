"""The substrate-level continuity measure of the recall-budget ablation, shared by the inspect task and
``lca bench recall-budget``: were the turns a probe needs among the injected items' source pointers, and
were the turns it forbids (a superseded decision, an older preference, a private fact asked in public) kept
out. A budget that saves tokens by dropping the needed turn, or a ranking that lets the superseded turn in,
both show here; neither shows in token counts alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, mean, metric, scorer

from protocols.harness.solvers import PACKET_KEY


@dataclass(frozen=True)
class ProbeContinuity:
    """One probe's context against its gold. ``needed_in`` is None when the probe names no evidence turn (an
    abstention probe), ``forbidden_out`` None when it names no forbidden turn: there is nothing to check."""

    needed_in: bool | None
    forbidden_out: bool | None

    @property
    def both(self) -> bool:
        """Needed turns in and forbidden turns out; a part the probe does not name holds trivially."""
        return self.needed_in is not False and self.forbidden_out is not False


def probe_continuity(pointers: Iterable[str], evidence: Iterable[str], forbidden: Iterable[str]) -> ProbeContinuity:
    """Every evidence pointer among ``pointers`` (the injected items' source pointers), none of the forbidden."""
    held, needed, kept_out = set(pointers), list(evidence), list(forbidden)
    return ProbeContinuity(
        needed_in=all(p in held for p in needed) if needed else None,
        forbidden_out=not any(p in held for p in kept_out) if kept_out else None,
    )


def _quantile(scores: list[SampleScore], q: float) -> float:
    values = [s.score.as_float() for s in scores]
    return float(np.percentile(values, q)) if values else 0.0


@metric
def p50() -> Metric:
    """The median over samples."""

    def compute(scores: list[SampleScore]) -> float:
        return _quantile(scores, 50)

    return compute


@metric
def p95() -> Metric:
    """The 95th percentile over samples."""

    def compute(scores: list[SampleScore]) -> float:
        return _quantile(scores, 95)

    return compute


def needed_forbidden():
    """The inspect scorer: ``needed_in``, ``forbidden_out`` and ``needed_in_forbidden_out`` per probe (1 where the
    probe names nothing to check), and the recall latency as its p50 and p95 over probes."""

    @scorer(
        metrics={
            "needed_in": [mean()],
            "forbidden_out": [mean()],
            "needed_in_forbidden_out": [mean()],
            "recall_latency_quantiles_ms": [p50(), p95()],
        },
        name="needed_forbidden",
    )
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            gold = state.metadata.get("gold", {})
            result = probe_continuity(packet.get("pointers", []), gold.get("evidence", []), gold.get("forbidden", []))
            return Score(
                value={
                    "needed_in": float(result.needed_in is not False),
                    "forbidden_out": float(result.forbidden_out is not False),
                    "needed_in_forbidden_out": float(result.both),
                    "recall_latency_quantiles_ms": float(packet.get("recall_latency_ms", 0.0)),
                },
                explanation=(
                    f"needed in: {result.needed_in}, forbidden out: {result.forbidden_out} "
                    f"({packet.get('injected_tokens', 0)} tokens injected by {packet.get('condition')})"
                ),
            )

        return score

    return _make()
