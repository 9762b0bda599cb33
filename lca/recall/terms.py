"""The resonance terms, each its own function in [0, 1] (the table that weighs them: ``lca.recall.resonance``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache

from lca.errors import RecordFormatError
from lca.types import as_utc

PEER_AGENT_AUTHORITY = "transcript:peer_agent"
"""The authority row of a message from a peer agent (``peer_agent_turn``): another agent's words are an observation
to weigh, never an instruction, so the row stays below the user's (``transcript``; ``RecallConfig`` checks it)."""

DEFAULT_AUTHORITY = {
    "memory:approved": 1.0,
    "memory:reviewed": 0.8,
    "memory:unreviewed": 0.6,
    "memory:inferred": 0.4,
    "transcript": 0.5,
    PEER_AGENT_AUTHORITY: 0.25,
    "summary": 0.3,
}


def transcript_authority(peer_agent: str | None) -> str:
    """The authority row of a transcript turn: a peer agent's, or the transcript's own (the user's, the agent's)."""
    return PEER_AGENT_AUTHORITY if peer_agent else "transcript"


# ---- the terms -------------------------------------------------------------------------
def similarity_terms(fused: Sequence[float]) -> list[float]:
    """S per candidate, in (0, 1): the store's ranking score (``lca.retrieval``: fused dense and BM25 and its
    signals), standardized over the candidates and passed through the logistic. S keeps the ranking's order
    exactly, so with the other weights at 0 recall ranks as search does, and small weights on the other
    terms move only candidates the ranking barely separates."""
    if not fused:
        return []
    values = [float(v) for v in fused]
    mean = math.fsum(values) / len(values)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if spread <= 1e-12:
        return [0.5] * len(values)
    return [1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, (v - mean) / spread)))) for v in values]


EXPERIENCE_EVENT_WEIGHTS = {
    "used": 1.0,
    "approved": 2.0,
    "prevented_mistake": 3.0,
    "corrected": -2.0,
    "contradicted": -3.0,
    "superseded": -3.0,  # a later decision replaced it (an explicit ``supersedes`` event)
}


def experience_term(counts: Mapping[str, int], *, normalization: str = "sigmoid", cap: float = 1.0) -> float:
    """E: learned retrieval metadata in [0, 1], from what happened to a memory, never from its content.

    Each event kind has a signed weight; counts enter through log1p so that repetition saturates.
    ``sigmoid`` maps the evidence to (0, 1) with 0.5 for no history; ``log`` to [0, 1] by
    log1p(positive evidence) / log1p(50); ``cap`` clips the raw evidence to [0, cap] / cap.
    """
    raw = sum(EXPERIENCE_EVENT_WEIGHTS.get(kind, 0.0) * math.log1p(max(0, n)) for kind, n in counts.items())
    if normalization == "sigmoid":
        return 1.0 / (1.0 + math.exp(-raw))
    if normalization == "log":
        return min(1.0, math.log1p(max(0.0, raw)) / math.log1p(50.0))
    if normalization == "cap":
        return min(max(raw, 0.0), cap) / cap
    raise RecordFormatError(f"unknown normalization {normalization!r}; known: sigmoid, log, cap", field="normalization")


def temporal_term(age_days: float | None, experience: float, *, half_life_days: float) -> float:
    """T: a decaying boost in [0, 1]. Experience stretches the half-life (up to 5x), so a
    foundational decision outlives routine chatter of the same age."""
    if age_days is None:
        return 0.0
    stretched = half_life_days * (1.0 + 4.0 * max(0.0, experience - 0.5) * 2.0)
    return 0.5 ** (max(0.0, age_days) / stretched)


def authority_term(
    source_key: str, *, exact_wording: bool = False, table: Mapping[str, float] = DEFAULT_AUTHORITY
) -> float:
    """A: source authority from a table users can change. When exact wording is asked for, the raw transcript
    outranks every derived source: it takes 1.0 and each derived source half its row (an approved memory's 1.0
    would otherwise only tie it); a peer agent's words are verbatim too, and keep their own row, below the user's."""
    if exact_wording:
        if source_key in ("transcript", PEER_AGENT_AUTHORITY):
            return 1.0 if source_key == "transcript" else float(table.get(source_key, 0.0))
        return EXACT_WORDING_DERIVED_SHARE * float(table.get(source_key, 0.0))
    return float(table.get(source_key, 0.0))


EXACT_WORDING_DERIVED_SHARE = 0.5  # a derived source's share of its authority when the exact words are asked for


def task_term(item_tags: set[str], context_tags: set[str]) -> float:
    """Q: the share of the active task's markers (role, project, channel, command) the item carries."""
    if not context_tags:
        return 0.0
    return len(item_tags & context_tags) / len(context_tags)


def risk_term(*, agent_words: float = 0.0, **flags: bool) -> tuple[float, list[str]]:
    """K in [0, 1] and the reasons, from the flags of ``risk_reasons``: a secret or a private fact in a public channel
    is maximal risk; a superseded or expired memory is maximal unless the query is about history. A reply to a
    decision a later one superseded is maximal too: it is about the replaced decision ("Hartley Lofts is a sound
    choice"). A reply to a detail an explicit event corrected is penalized, not filtered: it likely restates the
    detail, and may hold more (the plan built on a count that was later corrected).
    ``agent_words`` is the K of a turn the agent wrote (0: not such a turn, or the query asks for it): its own
    restatement of what the user said, where its errors would come back as history (``RecallConfig.agent_turn_risk``)."""
    reasons = risk_reasons(**flags)
    return risk_level(reasons, agent_words), reasons + ([AGENT_WORDS] if agent_words > 0 else [])


def risk_reasons(
    *,
    private_in_public: bool,
    secret: bool,
    superseded: bool,
    expired: bool,
    about_history: bool,
    conflict: bool = False,
    outside_role: bool = False,
    answers_replaced: bool = False,
    answers_superseded: bool = False,
    possibly_replaced: bool = False,
) -> list[str]:
    """The policy risks a candidate carries (``risk_term``), the agent's own words aside: they decide K, and the
    policy filters read them whatever K's weight."""
    reasons = []
    if secret:
        reasons.append("secret or credential")
    if private_in_public:
        reasons.append("private in a public channel")
    if (superseded or expired) and not about_history:
        reasons.append("superseded" if superseded else "expired")
    if conflict:
        reasons.append("unresolved conflict")
    if outside_role:
        reasons.append("outside the role's authority")
    if answers_replaced and not about_history:
        reasons.append(ANSWERS_REPLACED)
    if answers_superseded and not about_history:
        reasons.append(ANSWERS_SUPERSEDED)
    if possibly_replaced and not about_history:
        reasons.append(POSSIBLY_REPLACED)
    return reasons


def risk_level(reasons: Sequence[str], agent_words: float) -> float:
    """K from ``risk_reasons``: 1 for a secret, a private item in a public channel or one held for history; 0.5
    for any other reason; else the K of the agent's own words (0: none)."""
    if reasons:
        return 1.0 if _HARD_RISKS.intersection(reasons) else 0.5
    return agent_words if agent_words > 0 else 0.0


def replies_to_replaced(
    corrections: Callable[[], Mapping[str, Sequence[str]]] | None,
    reply_to: Callable[[str, str], str | None] | None,
    agent_turns: Callable[[str], frozenset[str]] | None = None,
) -> dict[str, str]:
    """reply -> the turn it answers, for each turn an explicit event corrected or superseded: the reply likely
    restates what was replaced ("That's a reasonable choice: Hartley Lofts can start on 13 April"), so K marks it
    (``risk_term``; the kind of event that replaced the turn decides how). Not the user's turn after an agent's turn
    the user corrected (``agent_turns``: a session's agent-written ids): the user's next words are their own, not a
    restatement of the agent's error ("Price: £8 a portion" after the agent wrongly called a filling vegan)."""
    if reply_to is None or corrections is None:
        return {}
    out = {}
    for target in corrections():
        session, _, entry = target.removeprefix("transcript:").partition("#")
        if not target.startswith("transcript:") or not (reply := reply_to(session, entry)):
            continue
        if agent_turns is not None and entry in (by_agent := agent_turns(session)) and reply not in by_agent:
            continue
        out[f"transcript:{session}#{reply}"] = target
    return out


AGENT_WORDS = "the agent's own words"
ANSWERS_REPLACED = "answers a replaced turn"
ANSWERS_SUPERSEDED = "answers a superseded turn"
POSSIBLY_REPLACED = (
    "possibly replaced by a later turn"  # an inference below the hold-back confidence: penalized, marked
)
# the reasons a policy filter holds a turn back until a question asks about history (K maximal with each)
HELD_FOR_HISTORY = frozenset({"superseded", "expired", ANSWERS_SUPERSEDED})
_HARD_RISKS = frozenset({"secret or credential", "private in a public channel", *HELD_FOR_HISTORY})  # K maximal
_ASKS_FOR_AGENT_WORDS = re.compile(  # the question is about what the agent said: its turns are the evidence
    r"\b(?:you (?:said|told|suggested|recommended|mentioned|proposed|advised|wrote|drafted|gave|listed|explained|"
    r"described|shared|provided|offered|came up with|pointed out|called|named|warned)|"
    r"did you (?:say|tell|suggest|recommend|mention|propose|advise|write|draft|give|list|explain|describe|call|name)|"
    r"your (?:\w+ )?(?:suggestions?|recommendations?|advice|answers?|repl(?:y|ies)|responses?|tips?|ideas?|"
    r"explanations?|words|drafts?|lists?))\b",
    re.IGNORECASE,
)


def asks_for_agent_words(query: str) -> bool:
    """Whether ``query`` asks what the agent itself said ("what did you suggest", "the list you gave me", "your
    recommendation"): then the agent's turns are the evidence and carry no risk for being its own."""
    return bool(_ASKS_FOR_AGENT_WORDS.search(query))


_PAST_TENSE = re.compile(  # the question's finite verb is in the past: a wh-word's clause, or its opening word
    r"(?:\b(?:who|whom|whose|what|which|when|where|why|how)\b[^?.,;:!]{0,60}?|(?:^|[.?!,;:]\s*))"
    r"\b(?:did|was|were|had)(?:n't)?\b",
    re.IGNORECASE,
)
_ASKS_OUTCOME = re.compile(  # ... but it asks how things ended up, or what holds now
    r"\b(?:in the end|end(?:ed|s)? up|finally|eventually|ultimately|settled?|actually|now|currently|these days|"
    r"at the moment|still|latest|current|final)\b",
    re.IGNORECASE,
)


_COMPARES_WITH_PAST = re.compile(  # now set against before: "than I did", "than before", "previously", "I used to"
    r"\bthan\s+(?:(?:i|we|you|he|she|they|it)\s+)?(?:did|was|were|had|used to|before|previously)\b|"
    r"\bpreviously\b|\b(?:i|we|you|he|she|they)\s+used\s+to\b|\bdid\s+(?:i|we|you|he|she|they)\s+use\s+to\b",
    re.IGNORECASE,
)


_SETS_OPTIONS_SIDE_BY_SIDE = re.compile(  # "the train instead of a taxi", "compared to my first order", "X versus Y"
    r"\b(?:instead\s+of|rather\s+than|compared\s+(?:to|with)|versus|vs\.?)\s",
    re.IGNORECASE,
)


def asks_about_past(query: str) -> bool:
    """Whether ``query`` is in the past tense ("when did ...", "what was ...") and asks what happened, not what
    holds now ("which bed did the garlic end up in" asks the outcome), or sets now against before ("do I go more
    often than I did", "what I used to"), or sets two options side by side ("how much will I save by taking the train
    instead of a taxi"), which needs the earlier state or the option left as much as the current one. A grammatical
    reading, not a list of one data set's questions: recall shows a turn a later decision superseded to it, marked
    (``RecallConfig.past_tense``)."""
    if _COMPARES_WITH_PAST.search(query) or _SETS_OPTIONS_SIDE_BY_SIDE.search(query):
        return True
    return bool(_PAST_TENSE.search(query)) and not _ASKS_OUTCOME.search(query)


def age_days(timestamp: str | None, as_of_utc: datetime) -> float | None:
    """Days from a stored timestamp to ``as_of_utc`` (None: no time, or one that does not parse)."""
    moment = _moment(timestamp) if timestamp else None
    return None if moment is None else (as_of_utc - moment).total_seconds() / 86400.0


@lru_cache(maxsize=16384)
def _moment(timestamp: str) -> datetime | None:
    """A stored timestamp in UTC, parsed once per process (a store's turns come back recall after recall)."""
    try:
        return as_utc(datetime.fromisoformat(timestamp))
    except ValueError:
        return None
