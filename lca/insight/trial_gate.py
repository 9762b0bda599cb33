"""The gate from candidate to trial: a schema proposed from an insight goes on trial only when that insight has held.

A schema a person proposes from an insight hypothesis (``lca.insight.schemas.propose_schema``) claims the rhyme the
integration cycle surfaced. Before the schema is tried (and its establishment evidence starts to count), the
insight it came from must show three things, each read off the ledger and each a declared threshold
(``TrialGateConfig``):

- **differential**: in the last cycle that saw it, its score (the differential of its best pair) beat that cycle's
  null threshold by at least ``min_margin`` (in the differential's units). The cycle records the threshold with the
  score; a sighting without one (recorded before the threshold was) fails the gate, saying so;
- **review survival**: its last adversarial review (``lca.insight.review``) came out ``survived`` (every lens
  supports it under the default rule), and it is not dormant. A contested or refuted entry, or one never reviewed,
  stays a candidate;
- **trajectory**: it surfaced in at least ``min_cycles`` distinct cycles (a rhyme one cycle saw may be that cycle's
  accident), and its last score is at least ``min_retained`` of its best (a rhyme fading as the store grows is not
  one to try).

A schema proposed from named records, with no insight behind it, has none of this to measure: a named person puts it
on trial (the ledger refuses it otherwise). ``TrialGateReport`` is what the ledger's state machine checks (the
``lca.ledger.SchemaEvidence`` protocol, as for establishment) and records with the transition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lca.errors import RecordFormatError
from lca.insight.review import REVIEW_EVENT, last_review
from lca.insight.schema_gates import check_thresholds, thresholds_from_mapping
from lca.ledger import Hypothesis


@dataclass(frozen=True)
class TrialGateConfig:
    """Every trial gate's threshold, declared and checked."""

    min_margin: float = 0.0  # the last score above its cycle's null threshold, in the differential's units
    min_cycles: int = 2  # distinct cycles that surfaced it
    min_retained: float = 0.8  # its last score over its best (scores above 0; a falling rhyme fails)

    def __post_init__(self) -> None:
        check_thresholds(self, shares=("min_retained",))
        if self.min_cycles < 1:
            raise RecordFormatError(f"must be an integer >= 1, got {self.min_cycles!r}", field="min_cycles")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrialGateConfig:
        return thresholds_from_mapping(cls, values, "trial gate")


@dataclass(frozen=True)
class TrialGate:
    """One gate's measure: passed, and what it read."""

    gate: str
    passed: bool
    detail: str
    counts: dict[str, Any]


@dataclass(frozen=True)
class TrialGateReport:
    """The trial gates of one schema's insight, measured off the ledger."""

    schema: str
    insight: str
    gates: tuple[TrialGate, ...]
    config: TrialGateConfig

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(f"{g.gate}: {g.detail}" for g in self.gates if not g.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "trial",
            "schema": self.schema,
            "insight": self.insight,
            "passed": self.passed,
            "gates": [asdict(g) for g in self.gates],
            "config": asdict(self.config),
        }


def _sightings(h: Hypothesis) -> list[dict[str, Any]]:
    """The cycles' sightings of it, in order (the events that carried a score), with the threshold where recorded."""
    return [e for e in h.history if isinstance(e.get("score"), (int, float))]


def differential_gate(h: Hypothesis, config: TrialGateConfig) -> TrialGate:
    sightings = _sightings(h)
    if not sightings:
        return TrialGate("differential", False, "no cycle has scored it", {})
    last = sightings[-1]
    threshold = last.get("threshold")
    if not isinstance(threshold, (int, float)):
        return TrialGate(
            "differential",
            False,
            "its last sighting carries no null threshold (recorded before cycles kept one): run lca integrate again",
            {"score": last["score"]},
        )
    margin = float(last["score"]) - float(threshold)
    counts = {"score": last["score"], "threshold": threshold, "margin": round(margin, 6), "cycle": last.get("cycle")}
    passed = margin >= config.min_margin and margin > 0
    return TrialGate(
        "differential", passed, f"last score {last['score']:.3f} against threshold {threshold:.3f}", counts
    )


def review_gate(h: Hypothesis) -> TrialGate:
    reviews = sum(1 for e in h.history if e["kind"] == REVIEW_EVENT)
    if h.status == "dormant":
        return TrialGate("review_survival", False, "dormant: a review or a person refuted it", {"reviews": reviews})
    last = last_review(h)
    if last is None:
        return TrialGate("review_survival", False, "never reviewed (lca insights review runs the lenses)", {})
    outcome = str(last.get("outcome"))
    counts = {"reviews": reviews, "outcome": outcome, "rule": last.get("rule"), "cycle": last.get("cycle")}
    return TrialGate("review_survival", outcome == "survived", f"last review {outcome}", counts)


def trajectory_gate(h: Hypothesis, config: TrialGateConfig) -> TrialGate:
    sightings = _sightings(h)
    cycles = {e.get("cycle") for e in sightings if e.get("cycle")}
    scores = [float(e["score"]) for e in sightings]
    best = max(scores, default=0.0)
    retained = scores[-1] / best if scores and best > 0 else 0.0
    counts = {"cycles": len(cycles), "scores": [round(s, 6) for s in scores], "retained": round(retained, 6)}
    if len(cycles) < config.min_cycles:
        return TrialGate("trajectory", False, f"surfaced in {len(cycles)} cycle(s), {config.min_cycles} needed", counts)
    if retained < config.min_retained:
        return TrialGate(
            "trajectory", False, f"last score {retained:.2f} of its best, {config.min_retained:.2f} needed", counts
        )
    return TrialGate(
        "trajectory", True, f"surfaced in {len(cycles)} cycles, last score {retained:.2f} of its best", counts
    )


def trial_gates(schema: str, h: Hypothesis, config: TrialGateConfig | None = None) -> TrialGateReport:
    """The three gates of the insight ``h`` a schema was proposed from."""
    config = config or TrialGateConfig()
    gates = (differential_gate(h, config), review_gate(h), trajectory_gate(h, config))
    return TrialGateReport(schema, h.id, gates, config)
