"""The adversarial review of insight candidates: every lens (``lca.insight.lenses``) in its own pass, the graded
verdicts combined by a declared rule, each review recorded in the ledger with every lens's verdict.

The integration cycle reviews each insight hypothesis it surfaced that has not been reviewed on its current records
(a new entry, a resurfaced one, one that gained records); ``lca insights review`` reviews on demand. A review is a
``hypothesis_reviewed`` event (the rule, the outcome, its score, the records reviewed and each lens's verdict, score
and reason); it leaves the status alone unless the outcome is ``refuted``, which also appends
``hypothesis_refuted`` (by ``review:<rule>``, the refuting lenses' reasons as its reason): the entry turns dormant
and stays in the ledger, and comes back only on new independent evidence, carrying those reasons as questions.

How verdicts combine is a declared table, ``COMBINATION_RULES``, one named row per rule, so a rule is a name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from lca.insight.lenses import (
    EvidenceIndependenceLens,
    LensVerdict,
    MemberEvidence,
    ReviewEvidence,
    ReviewLens,
    StructuralSoundnessLens,
    VocabularyCoincidenceLens,
)
from lca.insight.reconcile import INSIGHT_TYPES, MEMBER_PREFIX
from lca.insight.signatures import StructuralSignature, signature_from_json
from lca.insight.store import InsightRecord, SignatureRow, SignatureStore, insight_records
from lca.ledger import Hypothesis, Ledger
from lca.memory import MemoryFile, MemoryStore

OUTCOMES = ("survived", "contested", "refuted")
REVIEW_EVENT = "hypothesis_reviewed"

# the shipped lenses by name: a ReviewConfig names the ones a cycle runs
LENSES: dict[str, Callable[[], ReviewLens]] = {
    "structural-soundness": StructuralSoundnessLens,
    "evidence-independence": EvidenceIndependenceLens,
    "vocabulary-coincidence": VocabularyCoincidenceLens,
}


@dataclass(frozen=True)
class CombinationRule:
    """One way to combine a review's verdicts into its outcome and score."""

    name: str
    description: str
    combine: Callable[[Sequence[LensVerdict]], tuple[str, float]]


def _veto(verdicts: Sequence[LensVerdict]) -> tuple[str, float]:
    kinds = {v.verdict for v in verdicts}
    outcome = "refuted" if "refutes" in kinds else "survived" if kinds == {"supports"} else "contested"
    return outcome, min(v.score for v in verdicts)


def _mean(verdicts: Sequence[LensVerdict]) -> tuple[str, float]:
    score = sum(v.score for v in verdicts) / len(verdicts)
    return ("survived" if score >= 0.6 else "refuted" if score < 0.3 else "contested"), score


COMBINATION_RULES: tuple[CombinationRule, ...] = (
    CombinationRule(
        "veto",
        "the default: refuted when any lens refutes, survived when every lens supports, else contested; the score is "
        "the lowest lens score (a candidate is as strong as the lens it does worst under)",
        _veto,
    ),
    CombinationRule(
        "mean",
        "the mean lens score: survived at 0.6 or above, refuted below 0.3, else contested (no single lens decides)",
        _mean,
    ),
)
RULES = tuple(r.name for r in COMBINATION_RULES)


def combination_rule(name: str) -> CombinationRule:
    for rule in COMBINATION_RULES:
        if rule.name == name:
            return rule
    raise RecordFormatError(f"unknown review rule {name!r}; one of: {', '.join(RULES)}", field="rule")


@dataclass(frozen=True)
class ReviewConfig:
    """Which lenses review a candidate (none: no review, an ablation), the rule that combines them, and whether a
    refuted outcome turns the entry dormant (else it is recorded and the entry waits for a person)."""

    lenses: tuple[str, ...] = tuple(LENSES)
    rule: str = "veto"
    refuted_goes_dormant: bool = True

    def __post_init__(self) -> None:
        combination_rule(self.rule)
        unknown = [name for name in self.lenses if name not in LENSES]
        if unknown or len(set(self.lenses)) != len(self.lenses):
            raise RecordFormatError(
                f"lenses must be distinct names of: {', '.join(LENSES)}; got {list(self.lenses)}", field="lenses"
            )

    def built(self) -> tuple[ReviewLens, ...]:
        return tuple(LENSES[name]() for name in self.lenses)


@dataclass(frozen=True)
class ReviewOutcome:
    """One review of one insight hypothesis."""

    hypothesis: str
    rule: str
    outcome: str  # one of OUTCOMES
    score: float
    members: tuple[str, ...]  # the records reviewed (those of its records that are current)
    verdicts: tuple[LensVerdict, ...]

    @property
    def reason(self) -> str:
        """Why it did not survive: each lens that did not support, with its reason."""
        return "; ".join(f"{v.lens} {v.verdict}: {v.reason}" for v in self.verdicts if v.verdict != "supports")


def review(evidence: ReviewEvidence, lenses: Sequence[ReviewLens], rule: str = "veto") -> ReviewOutcome:
    """Every lens on ``evidence``, each on its own, combined by ``rule``."""
    if not lenses:
        raise LCAError("a review needs at least one lens")
    verdicts = tuple(lens.review(evidence) for lens in lenses)
    outcome, score = combination_rule(rule).combine(verdicts)
    return ReviewOutcome(
        evidence.hypothesis, rule, outcome, round(score, 6), tuple(m.id for m in evidence.members), verdicts
    )


def last_review(h: Hypothesis) -> dict[str, Any] | None:
    """The latest ``hypothesis_reviewed`` event in its history, or None."""
    return next((e for e in reversed(h.history) if e["kind"] == REVIEW_EVENT), None)


def needs_review(h: Hypothesis) -> bool:
    """Live (not dormant) and not yet reviewed on the records it holds now."""
    if h.type not in INSIGHT_TYPES or h.status == "dormant":
        return False
    last = last_review(h)
    return last is None or set(last.get("members") or ()) != set(h.members)


def record_review(ledger: Ledger, outcome: ReviewOutcome, h: Hypothesis, *, cycle: str | None) -> bool:
    """Append the review to the ledger; True when its outcome is ``refuted``."""
    ledger.append(
        REVIEW_EVENT,
        outcome.hypothesis,
        {
            "cycle": cycle,
            "rule": outcome.rule,
            "outcome": outcome.outcome,
            "review_score": outcome.score,  # not "score": that key is the cycle's trajectory
            "reviewed": list(outcome.members),
            "members": sorted(h.members),
            "verdicts": [v.__dict__ for v in outcome.verdicts],
        },
    )
    return outcome.outcome == "refuted"


def member_evidence(
    h: Hypothesis,
    records: Mapping[str, InsightRecord],
    signatures: Mapping[str, StructuralSignature],
    sessions: Mapping[str, tuple[str, ...]],
) -> ReviewEvidence:
    """A hypothesis's current records (those of its members still current) with what the lenses read."""
    ids = sorted(m[len(MEMBER_PREFIX) :] for m in h.members if m.startswith(MEMBER_PREFIX))
    members = tuple(
        MemberEvidence(rid, records[rid].domain, records[rid].text, signatures.get(rid), sessions.get(rid, ()))
        for rid in ids
        if rid in records
    )
    return ReviewEvidence(h.id, h.claim, members, tuple(r.get("reason", "") for r in h.refutations))


def sessions_of(memories: Iterable[MemoryFile]) -> dict[str, tuple[str, ...]]:
    """Each memory's cited transcript sessions, sorted."""
    return {m.record.id: tuple(sorted({span.session for span in m.record.sources})) for m in memories}


def review_hypotheses(
    home: Path | str,
    hypotheses: Iterable[str],
    config: ReviewConfig,
    *,
    records: Sequence[InsightRecord],
    signatures: Mapping[str, SignatureRow],
    memories: Iterable[MemoryFile],
    cycle: str | None = None,
    force: bool = False,
    lenses: Sequence[ReviewLens] | None = None,
) -> tuple[ReviewOutcome, ...]:
    """Review each named insight hypothesis that needs it (``needs_review``; every live one named with ``force``),
    record each review in the ledger, and refute (to dormant) the refuted ones when the config says so.
    ``signatures``: by record id (the cycle's); ``lenses``: instead of the config's (a model-based lens)."""
    lenses = config.built() if lenses is None else tuple(lenses)
    if not lenses:
        return ()
    ledger = Ledger(home)
    state = ledger.state()
    by_id = {r.id: r for r in records}
    parsed = {rid: signature_from_json(row.signature) for rid, row in signatures.items() if rid in by_id}
    cited = sessions_of(memories)
    out = []
    for hid in dict.fromkeys(hypotheses):
        h = state.hypotheses.get(hid)
        if h is None or h.type not in INSIGHT_TYPES or h.status == "dormant":
            continue
        if not (force or needs_review(h)):
            continue
        evidence = member_evidence(h, by_id, parsed, cited)
        if not evidence.members:
            continue
        outcome = review(evidence, lenses, config.rule)
        if record_review(ledger, outcome, h, cycle=cycle) and config.refuted_goes_dormant:
            ledger.append(
                "hypothesis_refuted",
                hid,
                {
                    "reason": outcome.reason,
                    "by": f"review:{outcome.rule}",
                    "members": sorted(h.members),
                    "cycle": cycle,
                },
            )
        out.append(outcome)
    return tuple(out)


def current_signatures(home: Path | str, records: Sequence[InsightRecord]) -> dict[str, SignatureRow]:
    """Each record's stored signature of its current text, by record id (of several signers', the first by key)."""
    current = {(r.id, r.content_hash) for r in records}
    out: dict[str, SignatureRow] = {}
    for _, row in sorted(SignatureStore(home).signatures().items()):
        if (row.source, row.source_hash) in current:
            out.setdefault(row.source, row)
    return out


def review_store(
    home: Path | str,
    config: ReviewConfig,
    hypothesis: str | None = None,
    *,
    lenses: Sequence[ReviewLens] | None = None,
) -> tuple[ReviewOutcome, ...]:
    """Outside a cycle (``lca insights review``): the named live insight hypothesis, reviewed again, or every one
    that needs a review, with the signatures the last cycle stored."""
    state = Ledger(home).state()
    if hypothesis is not None:
        h = state.hypotheses.get(hypothesis)
        if h is None or h.type not in INSIGHT_TYPES:
            raise LCAError(f"no insight hypothesis {hypothesis!r} in the ledger (lca insights list shows them)")
        if h.status == "dormant":
            raise LCAError(f"{hypothesis} is dormant: it is reviewed again when new evidence resurfaces it")
    loaded = MemoryStore(home).load()
    records, _ = insight_records(home, loaded=loaded)
    wanted = [hypothesis] if hypothesis is not None else sorted(state.hypotheses)
    return review_hypotheses(
        home,
        wanted,
        config,
        records=records,
        signatures=current_signatures(home, records),
        memories=loaded.files,
        force=hypothesis is not None,
        lenses=lenses,
    )
