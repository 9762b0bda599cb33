"""The resonance score's terms as one declared table, their weights, and the score that weighs them.

    R = alpha*S + beta*E + gamma*T + delta*A + epsilon*Q + zeta*activation - lambda*K

Each row of ``RESONANCE_TERMS`` names a term, the function that reads it off the candidates, its default weight,
its bounds, what it means and whether it adds or is subtracted. The recaller gathers what it knows of each candidate
once (``CandidateFacts``) and reads every term through the table (``term_columns``, ``signed_weights``), so adding a
term is a row here, its function, and its field in ``ResonanceWeights`` (checked against the table on import).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from lca.activation import Access, activation_term, base_level_activation
from lca.errors import RecordFormatError
from lca.recall.terms import (
    DEFAULT_AUTHORITY,
    authority_term,
    experience_term,
    risk_level,
    similarity_terms,
    task_term,
    temporal_term,
)


class CandidateFacts(NamedTuple):
    """What recall knows of one candidate before it is scored: everything a term reads (a tuple: one is made per
    candidate on the hot path)."""

    key: str  # the pointer key ("memory:<id>", "transcript:<session>#<entry>")
    fused: float  # the store's ranking score (``lca.retrieval``)
    counts: Mapping[str, int]  # its experience events by kind
    age_days: float | None  # from when it was said or written to the moment asked (None: no time)
    authority_key: str  # its row of the authority table
    tags: set[str]  # the task markers it carries (a memory's tags and projects; a turn's channel and scope)
    risk_reasons: Sequence[str]  # the policy risks it carries (``lca.recall.terms.risk_reasons``)
    agent_words: float  # the K of a turn the agent wrote (0: not one, or the question asks for it)


@dataclass(frozen=True)
class TermScope:
    """What every candidate's terms are read against in one recall. ``columns`` fills in table order as the terms
    are read, so a term may read the terms above it (T reads E)."""

    weights: ResonanceWeights
    half_life_days: float
    authority_table: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_AUTHORITY))
    exact_wording: bool = False
    markers: set[str] = field(default_factory=set)
    history: Mapping[str, Sequence[Access]] | None = None  # past retrievals by target; None: activation is not read
    now_s: float = 0.0  # the moment activation decays to (seconds since the epoch)
    columns: dict[str, list[float]] = field(default_factory=dict)


TermFunction = Callable[[Sequence[CandidateFacts], TermScope], list[float]]


def _similarity(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    return similarity_terms([c.fused for c in candidates])


def _experience(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    return [experience_term(c.counts) for c in candidates]


def _temporal(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    # ablating E (weight 0) also removes its modulation of T: no learned signal leaks through
    learned = scope.columns["experience"] if scope.weights.experience > 0 else [0.5] * len(candidates)
    days = scope.half_life_days
    return [temporal_term(c.age_days, e, half_life_days=days) for c, e in zip(candidates, learned, strict=True)]


def _authority(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    exact, table = scope.exact_wording, scope.authority_table
    return [authority_term(c.authority_key, exact_wording=exact, table=table) for c in candidates]


def _task(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    return [task_term(c.tags, scope.markers) for c in candidates]


def _activation(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    history = scope.history
    if history is None:
        return [0.0] * len(candidates)
    return [activation_term(base_level_activation(history.get(c.key, []), scope.now_s)) for c in candidates]


def _risk(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[float]:
    return [risk_level(c.risk_reasons, c.agent_words) for c in candidates]


@dataclass(frozen=True)
class Term:
    """One term of the resonance score. ``role``: ``relevance`` (S, what the store's ranking says), ``tilt`` (a
    learned or task signal that may only tilt relevance: its weights make ``tilt_bound``) or ``penalty``
    (subtracted)."""

    name: str
    symbol: str  # its weight's name in the formula
    function: TermFunction  # the term's value for each candidate of a recall
    default: float  # the default weight
    role: str
    description: str
    bound: tuple[float, float] = (0.0, 1.0)  # every value the function returns lies in it
    weight_bound: tuple[float, float] = (0.0, math.inf)  # the weights a config may set (inclusive)

    @property
    def sign(self) -> int:
        """+1: the term adds to the score; -1: it is subtracted."""
        return -1 if self.role == "penalty" else 1


ROLES = ("relevance", "tilt", "penalty")

RESONANCE_TERMS: tuple[Term, ...] = (
    Term(
        "similarity",
        "alpha",
        _similarity,
        1.0,
        "relevance",
        "S: the store's ranking score, standardized over the candidates and passed through the logistic, so with the "
        "other weights at 0 recall ranks as search does",
    ),
    Term(
        "experience",
        "beta",
        _experience,
        0.05,
        "tilt",
        "E: what happened to the item (used, approved, corrected, superseded), never its content; 0.5 for no history",
    ),
    Term(
        "temporal",
        "gamma",
        _temporal,
        0.05,
        "tilt",
        "T: a boost that halves every half_life_days of age; experience stretches the half-life up to 5x",
    ),
    Term("authority", "delta", _authority, 0.05, "tilt", "A: the source's row of the authority table"),
    Term(
        "task",
        "epsilon",
        _task,
        0.05,
        "tilt",
        "Q: the share of the active task's markers (role, project, channel, command) the item carries",
    ),
    Term(
        "activation",
        "zeta",
        _activation,
        0.0,
        "tilt",
        "living memory's ACT-R base-level activation from past retrievals, off unless the variant asks",
    ),
    Term(
        "risk",
        "lambda",
        _risk,
        1.0,
        "penalty",
        "K: a secret or a private item in a public channel, a superseded or expired one (unless asked about history), "
        "a conflict, one outside the role, the agent's own words",
    ),
)

TERMS = tuple(t.name for t in RESONANCE_TERMS)


@dataclass(frozen=True)
class ResonanceWeights:
    """alpha..lambda of the resonance score, one per row of ``RESONANCE_TERMS`` (checked on import); any may be set
    to zero to ablate its term."""

    similarity: float = 1.0  # alpha
    experience: float = 0.05  # beta
    temporal: float = 0.05  # gamma
    authority: float = 0.05  # delta
    task: float = 0.05  # epsilon
    activation: float = 0.0  # zeta: living-memory base-level activation, off unless the variant asks
    risk: float = 1.0  # lambda

    def __post_init__(self) -> None:
        for term in RESONANCE_TERMS:
            value = getattr(self, term.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RecordFormatError(f"weight must be a number, got {value!r}", field=term.name)
            low, high = term.weight_bound
            if not math.isfinite(value) or not low <= value <= high:
                bound = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
                raise RecordFormatError(f"weight must be finite and {bound}, got {value!r}", field=term.name)

    @property
    def tilt_bound(self) -> float:
        """The most the tilt terms (E, T, A, Q and activation) together can add to a candidate's score."""
        return sum(getattr(self, t.name) * t.bound[1] for t in RESONANCE_TERMS if t.role == "tilt")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str | None = None) -> ResonanceWeights:
        unknown = set(data) - set(TERMS)
        if unknown:
            raise RecordFormatError(
                f"unknown term(s) {sorted(unknown)}; known: {', '.join(TERMS)}", path=source, field=sorted(unknown)[0]
            )
        try:
            return cls(**{k: data[k] for k in data})
        except RecordFormatError as exc:
            raise RecordFormatError(exc.reason, path=source, field=exc.field) from None

    def with_overrides(self, overrides: Mapping[str, float]) -> ResonanceWeights:
        return ResonanceWeights.from_mapping({**asdict(self), **overrides})


def _check_weights_match_the_table() -> None:
    """The weights record and the table name the same terms in the same order, with the same defaults."""
    declared = [(f.name, f.default) for f in fields(ResonanceWeights)]
    if declared != [(t.name, t.default) for t in RESONANCE_TERMS]:
        raise TypeError(f"ResonanceWeights {declared} does not match RESONANCE_TERMS: one field per row, its default")


_check_weights_match_the_table()


def signed_weights(weights: ResonanceWeights) -> list[float]:
    """Each term's weight with its sign, in table order: a candidate's score is their sum against its terms."""
    return [t.sign * getattr(weights, t.name) for t in RESONANCE_TERMS]


def term_columns(candidates: Sequence[CandidateFacts], scope: TermScope) -> list[list[float]]:
    """Every term's value for every candidate, one column per row of the table, in its order."""
    for term in RESONANCE_TERMS:
        scope.columns[term.name] = term.function(candidates, scope)
    return [scope.columns[name] for name in TERMS]


def weighted_sum(values: Sequence[float], signed: Sequence[float]) -> float:
    """R for one candidate: its terms (table order) against ``signed_weights``, summed in table order."""
    score = 0.0
    for weight, value in zip(signed, values, strict=True):
        score += weight * value
    return score


def resonance_score(terms: Mapping[str, float], weights: ResonanceWeights) -> float:
    """R = alpha*S + beta*E + gamma*T + delta*A + epsilon*Q + zeta*activation - lambda*K (a missing term is 0)."""
    return weighted_sum([terms.get(name, 0.0) for name in TERMS], signed_weights(weights))
