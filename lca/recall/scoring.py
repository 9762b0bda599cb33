"""A recall's candidates scored through the term table (``lca.recall.resonance``) and judged: whether a policy filter,
the context or the floor holds each back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from lca.recall.config import RecallConfig
from lca.recall.pairing import FLOOR_REASON
from lca.recall.records import RecallContext, ScoredCandidate
from lca.recall.resonance import TERMS, CandidateFacts, signed_weights, weighted_sum
from lca.recall.terms import AGENT_WORDS, HELD_FOR_HISTORY
from lca.types import SearchHit


class CandidateReading(NamedTuple):
    """What recall read of one candidate besides its terms: what a refusal and the scored record say."""

    hit: SearchHit
    source_type: str  # memory | transcript
    cosine: float  # its best dense key's cosine to the query (NaN: no query vector)
    clears: bool  # it clears the floor on its own
    marker: str | None  # what replaced the turn
    said_in: str | None  # where it was said, if not where recall is asked


def scored_candidates(
    facts: Sequence[CandidateFacts],
    seen: Sequence[CandidateReading],
    columns: Sequence[Sequence[float]],
    cfg: RecallConfig,
    context: RecallContext,
    below: str,
) -> list[ScoredCandidate]:
    """Each candidate with its terms (``columns``, in table order), its score, and whether a policy filter, the
    context or the floor holds it back (``below``: the floor's account, made once; every refused one quotes it)."""
    signed = signed_weights(cfg.weights)
    shown = set(context.shown)
    out: list[ScoredCandidate] = []
    for n, (fact, (hit, source_type, cosine, clears, marker, said_in)) in enumerate(zip(facts, seen, strict=True)):
        values = [column[n] for column in columns]
        reasons = fact.risk_reasons if fact.agent_words <= 0 else [*fact.risk_reasons, AGENT_WORDS]
        why_not = None
        if "private in a public channel" in reasons:
            why_not = f"policy filter: {', '.join(reasons)}"
        elif cfg.project_filter and (said_in or "").startswith("project "):  # off by default: a label, and Q
            why_not = f"policy filter: said in another {(said_in or '').split(',')[0]} (project_filter)"
        elif HELD_FOR_HISTORY.intersection(reasons):
            why_not = f"policy filter: {', '.join(reasons)} (ask about history to see it)"
        elif source_type == "transcript" and f"{hit.pointer.session_id}#{hit.pointer.entry_id}" in shown:
            why_not = "already in the context: shown whole outside recall (RecallContext.shown)"
        elif not clears:
            why_not = f"{FLOOR_REASON} (cosine {cosine:.3f} {below}"
        out.append(
            ScoredCandidate(
                hit.chunk_id,
                fact.key,
                source_type,
                fact.authority_key,
                hit.text,
                hit.timestamp,
                cosine,
                dict(zip(TERMS, values, strict=True)),
                weighted_sum(values, signed),
                tuple(reasons),
                why_not=why_not,
                marker=marker,
                said_in=said_in,
                subagent_id=hit.pointer.subagent_id,
                peer_agent=hit.pointer.peer_agent,
            )
        )
    return out
