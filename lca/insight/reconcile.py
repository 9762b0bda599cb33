"""Reconciliation of a cycle's candidates with the hypothesis ledger, by membership overlap.

A candidate's membership is its records (``record:<id>``). The ledger's insight hypothesis sharing the most of it
(``lca.ledger.membership_overlap`` at least ``overlap``) is the same candidate seen again: the cycle appends
``hypothesis_observed`` with its score, which extends that entry's trajectory, instead of proposing a new one. A
dormant (refuted) hypothesis stays dormant when seen again on the same records; it comes back
(``hypothesis_resurfaced``) only on new independent evidence, a record it did not hold when it was last refuted,
and carries its refutations as the questions its review must answer. Nothing is ever deleted.

Every event says where its candidate came from (``origin``): the cycle's neighbour search, or a hot-cycle probe
(``lca.insight.probe``). An entry a probe proposed is of its own type, ``PROBE_TYPE``, so the review queue can
tell a reviewer which insights were found by deliberately pairing an active record with a dormant one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lca.ledger import Hypothesis, Ledger, hypothesis_id, membership_overlap

INSIGHT_TYPE = "insight"
PROBE_TYPE = "insight-probe"  # an insight first proposed by a hot-cycle probe
INSIGHT_TYPES = (INSIGHT_TYPE, PROBE_TYPE)
ORIGINS = {"neighbours": INSIGHT_TYPE, "probe": PROBE_TYPE}  # a candidate's origin -> the type it is proposed as
MEMBER_PREFIX = "record:"


@dataclass(frozen=True)
class ScoredPair:
    """Two records from different domains and what each space says of them."""

    first: str
    second: str
    structural: float
    content: float
    score: float


@dataclass(frozen=True)
class InsightCandidate:
    """Records from two or more domains that rhyme in structure: its pairs above the threshold, its best score."""

    members: tuple[str, ...]
    domains: tuple[str, ...]
    score: float
    pairs: tuple[ScoredPair, ...]
    skeleton: str  # the canonical signature text of the best pair's first record

    @property
    def membership(self) -> frozenset[str]:
        return frozenset(MEMBER_PREFIX + m for m in self.members)

    @property
    def claim(self) -> str:
        return (
            f"structural rhyme across {', '.join(self.domains)}: {', '.join(self.members)} share a skeleton "
            f"({self.skeleton[:160]})"
        )


@dataclass(frozen=True)
class Reconciliation:
    """What the cycle did with one candidate in the ledger."""

    hypothesis: str
    action: str  # proposed | observed | resurfaced | observed_dormant
    overlap: float  # with the entry it joined (1.0 for a new one)
    new_members: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()  # a resurfaced one's earlier refutations


def members_at_last_refutation(h: Hypothesis) -> frozenset[str]:
    """The records a hypothesis held when it was last refuted: evidence new to it is anything else."""
    held: set[str] = set()
    last: set[str] = set()
    for event in h.history:
        held |= set(event.get("members") or ())
        if event["kind"] == "hypothesis_refuted":
            last = set(held)
    return frozenset(last or held)


def reconcile(
    ledger: Ledger,
    candidates: Sequence[InsightCandidate],
    *,
    cycle: str,
    overlap: float,
    origin: str = "neighbours",
    threshold: float | None = None,
) -> list[Reconciliation]:
    """Record each candidate in the ledger (see the module docstring); one entry per candidate, with the cycle's null
    threshold beside its score when given (the trial gate reads the margin)."""
    if origin not in ORIGINS:
        raise ValueError(f"origin must be one of {', '.join(ORIGINS)}, got {origin!r}")
    state = ledger.state()
    known = [h for h in state.hypotheses.values() if h.type in INSIGHT_TYPES]
    out = []
    for candidate in candidates:
        members = candidate.membership
        data = {
            "cycle": cycle,
            "score": round(float(candidate.score), 6),
            **({"threshold": round(float(threshold), 6)} if threshold is not None else {}),
            "members": sorted(members),
            "domains": list(candidate.domains),
            "sources": list(candidate.members),
            "origin": origin,
        }
        ranked = sorted(((membership_overlap(members, h.members), h.id) for h in known), reverse=True)
        best = next(((o, hid) for o, hid in ranked if o >= overlap), None)
        if best is None:
            subject = hypothesis_id(candidate.claim)
            ledger.append("hypothesis_proposed", subject, {"claim": candidate.claim, "type": ORIGINS[origin], **data})
            out.append(Reconciliation(subject, "proposed", 1.0))
            continue
        share, subject = best
        h = state.hypotheses[subject]
        if h.status != "dormant":
            ledger.append("hypothesis_observed", subject, data)
            out.append(Reconciliation(subject, "observed", share))
            continue
        new = tuple(sorted(members - members_at_last_refutation(h)))
        if not new:
            ledger.append("hypothesis_observed", subject, data)
            out.append(Reconciliation(subject, "observed_dormant", share))
            continue
        questions = tuple(r.get("reason", "") for r in h.refutations)
        ledger.append(
            "hypothesis_resurfaced", subject, {**data, "new_members": list(new), "questions": list(questions)}
        )
        out.append(Reconciliation(subject, "resurfaced", share, new, questions))
    return out
