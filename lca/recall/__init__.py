"""Resonance-weighted recall: what comes back into the working set, why, and at what cost.

    R(m, c) = alpha*S + beta*E + gamma*T + delta*A + epsilon*Q - lambda*K

Every term is its own function and lies in [0, 1] (K in [0, 1] too); ``RESONANCE_TERMS``
(``lca.recall.resonance``) declares each one: its function, default weight, bounds, meaning and sign. The
bound that matters most, *relevance dominates and learned signals only tilt*: the
tilt a candidate can earn from E, T, A and Q is at most ``beta + gamma + delta +
epsilon`` (the weights' ``tilt_bound``), so a candidate whose similarity is lower
by more than ``tilt_bound / alpha`` can never outrank a more relevant one, however
much history it has accumulated. The defaults give a bound of 0.20 on S in [0, 1].

After scoring: a similarity floor, risk filters, per-source quotas, a per-item
character cap, MMR diversification, and fitting to a token budget without cutting
an item mid-text. Every candidate is logged with each term, whether it was
injected, and why not.
"""

from lca.recall.config import DEFAULT_AUTHORITY, POLICIES, TERMS, RecallConfig, ResonanceWeights
from lca.recall.recaller import Recaller
from lca.recall.records import RecallContext, RecallResult, ScoredCandidate
from lca.recall.resonance import RESONANCE_TERMS, Term, resonance_score
from lca.recall.terms import (
    EXPERIENCE_EVENT_WEIGHTS,
    authority_term,
    experience_term,
    risk_term,
    similarity_terms,
    task_term,
    temporal_term,
)
from lca.secrets import SECRET_PATTERNS, contains_secret

__all__ = [
    "DEFAULT_AUTHORITY",
    "EXPERIENCE_EVENT_WEIGHTS",
    "POLICIES",
    "RecallConfig",
    "RecallContext",
    "RESONANCE_TERMS",
    "RecallResult",
    "Recaller",
    "ResonanceWeights",
    "SECRET_PATTERNS",
    "ScoredCandidate",
    "TERMS",
    "Term",
    "authority_term",
    "contains_secret",
    "experience_term",
    "resonance_score",
    "risk_term",
    "similarity_terms",
    "task_term",
    "temporal_term",
]
