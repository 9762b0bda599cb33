"""The recovery-rate gauge, read off the ledger: how often a refuted insight later proved right.

Of the insight hypotheses ever refuted (by a person or by the review: they went dormant), the share that later
resurfaced on new independent evidence (``hypothesis_resurfaced``: a record they did not hold when refuted) and
were then confirmed (a review that survived, or a promotion). A high rate says refutation came too early; a rate
of 0 over many refutations says resurfacing brings back what deserved to stay dormant. It is a replay of the
ledger, never stored, so any past worldview gives its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lca.insight.reconcile import INSIGHT_TYPES
from lca.insight.review import REVIEW_EVENT
from lca.ledger import LearnedState


@dataclass(frozen=True)
class RecoveryGauge:
    """Counts of refuted, then resurfaced, then confirmed insight hypotheses; the recovered ones by id."""

    refuted: int
    resurfaced: int
    confirmed: int
    recovered: tuple[str, ...]

    @property
    def rate(self) -> float | None:
        """Confirmed over refuted (None before any refutation)."""
        return self.confirmed / self.refuted if self.refuted else None

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "recovered": list(self.recovered), "rate": self.rate}

    def describe(self) -> str:
        rate = "-" if self.rate is None else f"{self.rate:.2f}"
        return (
            f"recovery rate {rate}: of {self.refuted} refuted, {self.resurfaced} resurfaced on new evidence, "
            f"{self.confirmed} then confirmed"
        )


def _confirms(event: dict[str, Any]) -> bool:
    return event["kind"] == "hypothesis_promoted" or (
        event["kind"] == REVIEW_EVENT and event.get("outcome") == "survived"
    )


def recovery_gauge(state: LearnedState) -> RecoveryGauge:
    """The gauge over the insight hypotheses of a replayed ledger (``Ledger.state``, at any time)."""
    refuted = resurfaced = confirmed = 0
    recovered = []
    for h in sorted(state.hypotheses.values(), key=lambda h: h.id):
        if h.type not in INSIGHT_TYPES:
            continue
        was_refuted = came_back = proved = False
        for event in h.history:
            if event["kind"] == "hypothesis_refuted":
                was_refuted = True
            elif was_refuted and event["kind"] == "hypothesis_resurfaced":
                came_back = True
            elif came_back and _confirms(event):
                proved = True
        refuted += was_refuted
        resurfaced += came_back
        confirmed += proved
        if proved:
            recovered.append(h.id)
    return RecoveryGauge(refuted, resurfaced, confirmed, tuple(recovered))
