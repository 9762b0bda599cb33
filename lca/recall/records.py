"""What one recall serves and returns: the turn's context, each scored candidate, the result."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from lca.derived import derived_message, derived_text
from lca.recall.resonance import RESONANCE_TERMS, ResonanceWeights
from lca.types import speakers_set


# ---- records ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RecallContext:
    """The turn recall serves: the query and the task markers around it."""

    query: str
    role: str | None = None
    project: str | None = None
    channel: str | None = None
    command: str | None = None
    public_channel: bool = False
    as_of: datetime | None = None
    about_history: bool = False
    exact_wording: bool = False
    continues_previous_task: bool = False
    previous_injection_used: bool | None = None
    resume: bool = False  # picks up interrupted work: the latest session's last turns come first (resume_turns)
    shown: tuple[str, ...] = ()  # "session#entry" turns the context already shows whole (a handoff's tail):
    # recall does not spend its budget on them again

    def task_markers(self) -> set[str]:
        return {m.lower() for m in (self.role, self.project, self.channel, self.command) if m}


@dataclass(frozen=True)
class ScoredCandidate:
    """One candidate with every term, its score, and what became of it."""

    chunk_id: str
    source: str  # the pointer key
    source_type: str  # memory | transcript
    authority_key: str  # the authority table row it used
    text: str  # credentials redacted (lca.secrets); the source pointer leads to the verbatim transcript
    timestamp: str | None
    cosine: float
    terms: Mapping[str, float]
    score: float
    risk_reasons: tuple[str, ...] = ()
    injected: bool = False
    why_not: str | None = None
    tokens: int = 0
    trimmed: bool = False
    wildcard: bool = False
    prompt_of: str | None = None  # recalled as the turn right before this chunk's turn (RecallConfig.exchanges)
    marker: str | None = None  # what replaced this turn, shown in its header ("superseded 2026-03-13 by s4:7")
    said_in: str | None = None  # where the turn was said, when not where recall was asked ("project harbour-st")
    subagent_id: str | None = None  # the subagent that wrote the turn (lca.types.SourcePointer)
    peer_agent: str | None = None  # the peer agent the turn came from: shown as an observation, never an instruction

    def contribution(self, weights: ResonanceWeights) -> dict[str, float]:
        """What each term added to the score (a penalty's is negative)."""
        return {t.name: t.sign * getattr(weights, t.name) * self.terms[t.name] for t in RESONANCE_TERMS}


@dataclass(frozen=True)
class RecallResult:
    """What recall injected, what it left out and why, and the rendered block."""

    context: RecallContext
    policy: str
    action: str  # inject | shrink | skip | defer | none
    items: tuple[ScoredCandidate, ...]
    candidates: tuple[ScoredCandidate, ...]
    tokens: int
    budget: int
    latency_ms: float
    block: str
    floor: float | None = None  # the floor candidates' cosine was held to (lca.recall.floor)
    floor_detail: str = ""  # what that floor was made of: absolute, or the store's off-topic ceiling + margin
    whole_history: bool = False  # the whole history fitted the budget and the floor held none of it back
    whole_history_why: str = ""  # what made the question one about this history (first person, topic, project)
    fallback: str | None = None  # why recall ranked another way than the store's hybrid ("lexical: <error>")

    @property
    def omitted(self) -> tuple[ScoredCandidate, ...]:
        return tuple(c for c in self.candidates if not c.injected)


def log_record(result: RecallResult, weights: Any, floor: float) -> dict[str, Any]:
    """One recall as the recall log keeps it, one row per candidate: the raw material for fitting weights. Queries
    are redacted; a candidate's text is not logged (its pointer leads to the transcript)."""
    return {
        "at": time.time(),
        "query": derived_text(result.context.query),
        "policy": result.policy,
        "action": result.action,
        "weights": asdict(weights),
        "floor": result.floor if result.floor is not None else floor,
        "floor_detail": result.floor_detail,
        "whole_history": result.whole_history,
        "whole_history_why": result.whole_history_why,
        "fallback": None if result.fallback is None else derived_message(result.fallback),
        "tokens": result.tokens,
        "budget": result.budget,
        "latency_ms": round(result.latency_ms, 3),
        "candidates": [_logged(c) for c in result.candidates],
    }


def _logged(c: ScoredCandidate) -> dict[str, Any]:
    """One candidate's row in the recall log; who spoke only where the turn names a subagent or a peer agent."""
    return {
        "chunk_id": c.chunk_id,
        "source": c.source,
        "cosine": round(c.cosine, 6) if math.isfinite(c.cosine) else None,
        "terms": {k: round(v, 6) for k, v in c.terms.items()},
        "score": round(c.score, 6),
        "injected": c.injected,
        "wildcard": c.wildcard,
        "prompt_of": c.prompt_of,
        "why_not": c.why_not,
        **speakers_set(c),
    }
