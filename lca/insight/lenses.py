"""The adversarial review's lenses: independent passes that each try to break an insight candidate one way.

A lens reads a candidate's ``ReviewEvidence`` (its records, their signatures and the transcript sessions they
cite, and the questions earlier refutations left) and gives a graded ``LensVerdict``: ``supports``, ``weak`` or
``refutes``, a score in [0, 1] (how well the candidate survives this lens) and a reason a reviewer can check. The
lenses shipped here are deterministic, computed from what the substrate already holds:

- ``StructuralSoundnessLens``: do the records of different domains really share their skeleton, part by part
  (variables by kind, feedback signs: the signed relations and the loops they make, thresholds, dynamics)?
- ``EvidenceIndependenceLens``: do the records come from independent sources (transcript sessions), or is one
  source restated?
- ``VocabularyCoincidenceLens``: is the match carried by words the records share across domains rather than by
  structure?

A lens is anything with a ``name`` and ``review(evidence)`` (``ReviewLens``): a model-based lens (the summarizer
role asked to refute, through the ``TextGenerator`` port) is one more class. ``lca.insight.review`` combines the
verdicts by a declared rule and records them in the ledger.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from lca.errors import RecordFormatError
from lca.insight.signatures import STRUCTURAL_WORDS, StructuralSignature, signature_parts
from lca.ledger import key_terms

VERDICTS = ("supports", "weak", "refutes")


@dataclass(frozen=True)
class MemberEvidence:
    """One record of a candidate as a lens sees it."""

    id: str
    domain: str
    text: str
    signature: StructuralSignature | None  # None: no valid signature of its current text is stored
    sessions: tuple[str, ...]  # the transcript sessions its sources cite (empty: it names no source)


@dataclass(frozen=True)
class ReviewEvidence:
    """What every lens of one review reads: the candidate's current records and its earlier refutations."""

    hypothesis: str
    claim: str
    members: tuple[MemberEvidence, ...]
    questions: tuple[str, ...] = ()  # the reasons it was refuted before, for a lens that can answer them

    def cross_domain_pairs(self) -> Iterator[tuple[MemberEvidence, MemberEvidence]]:
        """Every pair of its records from different domains, in member order."""
        for a, b in itertools.combinations(self.members, 2):
            if a.domain != b.domain:
                yield a, b


@dataclass(frozen=True)
class LensVerdict:
    """One lens's graded verdict on one candidate."""

    lens: str
    verdict: str  # one of VERDICTS
    score: float  # in [0, 1]: how well the candidate survives the lens
    reason: str


class ReviewLens(Protocol):
    """One independent pass that tries to break a candidate."""

    @property
    def name(self) -> str: ...

    def review(self, evidence: ReviewEvidence) -> LensVerdict: ...


@dataclass(frozen=True)
class Grading:
    """Where a lens's score turns into a verdict: ``supports`` at or above ``supports_at``, ``refutes`` below
    ``refutes_below``, ``weak`` between."""

    supports_at: float
    refutes_below: float

    def __post_init__(self) -> None:
        for name in ("supports_at", "refutes_below"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise RecordFormatError(f"must be a number in [0, 1], got {value!r}", field=name)
        if self.refutes_below > self.supports_at:
            raise RecordFormatError(
                f"refutes_below {self.refutes_below} is above supports_at {self.supports_at}", field="refutes_below"
            )

    def verdict(self, lens: str, score: float, reason: str) -> LensVerdict:
        score = min(1.0, max(0.0, float(score)))
        grade = "supports" if score >= self.supports_at else "refutes" if score < self.refutes_below else "weak"
        return LensVerdict(lens, grade, round(score, 6), reason)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared over either; two empty sets agree (neither record has a threshold: they agree on that)."""
    return 1.0 if not a and not b else len(a & b) / len(a | b)


# the parts a skeleton is compared by, as the paper names them: feedback signs are the signed relations and the
# loops they make
STRUCTURAL_ASPECTS = {
    "variables": ("variables",),
    "feedback signs": ("relations", "loops"),
    "thresholds": ("thresholds",),
    "dynamics": ("dynamics",),
}


def aspect_similarity(a: StructuralSignature, b: StructuralSignature) -> dict[str, float]:
    """How much of each aspect of ``STRUCTURAL_ASPECTS`` two signatures share (Jaccard, 1 when both lack it)."""
    pa, pb = signature_parts(a), signature_parts(b)
    out = {}
    for aspect, parts in STRUCTURAL_ASPECTS.items():
        out[aspect] = _jaccard(frozenset().union(*(pa[p] for p in parts)), frozenset().union(*(pb[p] for p in parts)))
    return out


@dataclass(frozen=True)
class StructuralSoundnessLens:
    """Do the signatures of its records from different domains share variables, feedback signs, thresholds and
    dynamics? The score is the mean, over those pairs, of each pair's mean aspect similarity; the reason names the
    weakest pair and the aspects it does not share."""

    grading: Grading = Grading(supports_at=0.6, refutes_below=0.3)
    name: str = "structural-soundness"

    def review(self, evidence: ReviewEvidence) -> LensVerdict:
        pairs = [(a, b) for a, b in evidence.cross_domain_pairs() if a.signature and b.signature]
        if not pairs:
            return self.grading.verdict(
                self.name, 0.5, "no two records of different domains both have a signature: structure not shown"
            )
        scored = []
        for a, b in pairs:
            assert a.signature is not None and b.signature is not None  # kept above
            aspects = aspect_similarity(a.signature, b.signature)
            scored.append((sum(aspects.values()) / len(aspects), a.id, b.id, aspects))
        score = sum(s for s, *_ in scored) / len(scored)
        worst, first, second, aspects = min(scored, key=lambda row: (row[0], row[1], row[2]))
        differing = [f"{k} {v:.2f}" for k, v in aspects.items() if v < 1.0]
        detail = f"weakest pair {first} / {second} at {worst:.2f}" + (
            f" (differs in {', '.join(differing)})" if differing else " (one skeleton)"
        )
        return self.grading.verdict(self.name, score, f"{len(scored)} cross-domain pair(s), mean {score:.2f}; {detail}")


@dataclass(frozen=True)
class EvidenceIndependenceLens:
    """Do its records come from independent sources? Records citing a common transcript session are one source
    (joined transitively). Over the ``k`` records that cite sources, forming ``g`` independent groups, independence
    is ``(g - 1) / (k - 1)``: 0 when every record restates one source, 1 when each has its own. Records that cite
    nothing cannot show independence: they pull the score toward 0.5 by their share, and with fewer than two records
    citing anything the lens says so at 0.5."""

    grading: Grading = Grading(supports_at=0.75, refutes_below=0.25)
    name: str = "evidence-independence"

    def review(self, evidence: ReviewEvidence) -> LensVerdict:
        cited = [m for m in evidence.members if m.sessions]
        unknown = len(evidence.members) - len(cited)
        if len(cited) < 2:
            return self.grading.verdict(
                self.name,
                0.5,
                f"{unknown} of {len(evidence.members)} record(s) cite no transcript source: independence not shown",
            )
        parent = {m.id: m.id for m in cited}

        def root(x: str) -> str:
            while parent[x] != x:
                x = parent[x]
            return x

        holder: dict[str, str] = {}
        for m in cited:
            for session in m.sessions:
                if session in holder:
                    parent[root(m.id)] = root(holder[session])
                else:
                    holder[session] = m.id
        groups: dict[str, list[str]] = {}
        for m in cited:
            groups.setdefault(root(m.id), []).append(m.id)
        independence = (len(groups) - 1) / (len(cited) - 1)
        score = independence * len(cited) / len(evidence.members) + 0.5 * unknown / len(evidence.members)
        shared = [sorted(g) for g in groups.values() if len(g) > 1]
        reason = f"{len(groups)} independent source group(s) among {len(cited)} record(s) citing sessions"
        if shared:
            reason += "; one source behind " + "; ".join(", ".join(g) for g in sorted(shared))
        if unknown:
            reason += f"; {unknown} record(s) cite nothing"
        return self.grading.verdict(self.name, score, reason)


@dataclass(frozen=True)
class VocabularyCoincidenceLens:
    """Is the match carried by words rather than structure? For each pair of its records from different domains,
    the content words they share (``lca.ledger.key_terms``, the signature's own structural words aside) over the
    words either uses; the most word-alike pair decides: the score falls from 1 (no shared word) to 0 at
    ``refute_overlap``."""

    grading: Grading = Grading(supports_at=0.6, refutes_below=0.3)
    refute_overlap: float = 0.35
    name: str = "vocabulary-coincidence"

    def __post_init__(self) -> None:
        value = self.refute_overlap
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
            raise RecordFormatError(f"must be a number in (0, 1], got {value!r}", field="refute_overlap")

    def review(self, evidence: ReviewEvidence) -> LensVerdict:
        terms = {m.id: key_terms(m.text) - STRUCTURAL_WORDS for m in evidence.members}
        rows = []
        for a, b in evidence.cross_domain_pairs():
            ta, tb = terms[a.id], terms[b.id]
            overlap = len(ta & tb) / len(ta | tb) if ta | tb else 0.0
            rows.append((overlap, a.id, b.id, sorted(ta & tb)))
        if not rows:
            return self.grading.verdict(self.name, 0.5, "no two records of different domains to compare")
        overlap, first, second, shared = max(rows, key=lambda row: (row[0], row[1], row[2]))
        score = 1.0 - min(1.0, overlap / self.refute_overlap)
        words = ", ".join(shared[:8]) + (", ..." if len(shared) > 8 else "")
        reason = f"most word-alike pair {first} / {second} shares {overlap:.2f} of its words" + (
            f" ({words})" if shared else ""
        )
        return self.grading.verdict(self.name, score, reason)


def default_lenses() -> tuple[ReviewLens, ...]:
    """The deterministic lenses, each at its declared grading."""
    return (StructuralSoundnessLens(), EvidenceIndependenceLens(), VocabularyCoincidenceLens())
