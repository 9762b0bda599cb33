"""The self-description check after a migration: does the agent say it is who its installed identity says?

The installed identity is the store's identity, user and instruction files (``lca.identity``). The agent's
statement is read against their key terms (``lca.ledger.key_terms``): ``coverage`` is the share of those terms
the statement holds. The environment the agent now runs in (model, host, surface: the migration's binding) is
recorded beside the check as metadata, never as identity; a statement that presents an environment value as
who the agent is ("I am SmolLM2") is flagged in ``environment_claimed``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.identity import IDENTITY_FILES, IdentityStore
from lca.ledger import key_terms
from lca.secrets import redacted

QUESTION = (
    "Before we go on: in two sentences, who are you, who do you work with, and what are you working on? "
    "Answer from what you know about yourself."
)
"""What the agent is asked after resuming; the same for every binding."""

CONSISTENT_COVERAGE = 0.5
"""The share of the installed identity's key terms a consistent self-description holds."""

_CLAIM = re.compile(r"\b(?:i am|i'm|im|my name is|this is)\s+(?:an?\s+|the\s+)?([\w.+-]+(?:\s+[\w.+-]+){0,2})", re.I)


@dataclass(frozen=True)
class SelfDescription:
    """One check: the statement (redacted), the installed identity's key terms and which the statement holds,
    the environment values it claims as its identity, and the environment itself (metadata)."""

    statement: str
    identity_terms: tuple[str, ...]
    matched: tuple[str, ...]
    environment_claimed: tuple[str, ...]
    environment: Mapping[str, Any] = field(default_factory=dict)

    @property
    def installed(self) -> bool:
        return bool(self.identity_terms)

    @property
    def coverage(self) -> float:
        """Matched over installed key terms; NaN where the store holds no identity to compare against."""
        return len(self.matched) / len(self.identity_terms) if self.identity_terms else math.nan

    @property
    def consistent(self) -> bool | None:
        """Enough of the installed identity said and no environment value claimed as identity; None without an
        installed identity (nothing to be consistent with)."""
        if not self.installed:
            return None
        return self.coverage >= CONSISTENT_COVERAGE and not self.environment_claimed

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "installed": self.installed,
            "identity_terms": list(self.identity_terms),
            "matched": list(self.matched),
            "coverage": None if math.isnan(self.coverage) else round(self.coverage, 6),
            "consistent": self.consistent,
            "environment_claimed": list(self.environment_claimed),
            "environment": dict(self.environment),
        }


def installed_identity(store: Path | str) -> str:
    """The identity, user and instruction files' text ('' when the store holds none)."""
    identity = IdentityStore(store)
    return "\n".join(identity.read(name).strip() for name in IDENTITY_FILES).strip()


def _environment_terms(environment: Mapping[str, Any]) -> dict[str, str]:
    """Each key term of an environment value, mapped to the binding it comes from ("model", "host", ...)."""
    out: dict[str, str] = {}
    for name, value in environment.items():
        for part in re.split(r"[/\\:@]+", str(value)):
            for term in key_terms(part.replace("-", " ").replace("_", " ")) | key_terms(part):
                out.setdefault(term, str(name))
    return out


def check_self_description(
    store: Path | str, statement: str, environment: Mapping[str, Any] | None = None
) -> SelfDescription:
    """The agent's ``statement`` against the identity installed in ``store``; ``environment`` (the binding) is
    kept as metadata, and its values flagged where the statement claims one as who it is."""
    environment = dict(environment or {})
    installed = key_terms(installed_identity(store))
    said = key_terms(statement)
    env_terms = _environment_terms(environment)
    claimed = []
    for match in _CLAIM.finditer(statement):
        for term in key_terms(match.group(1)):
            if term in env_terms and term not in installed and env_terms[term] not in claimed:
                claimed.append(env_terms[term])
    return SelfDescription(
        redacted(statement),
        tuple(sorted(installed)),
        tuple(sorted(installed & said)),
        tuple(claimed),
        environment,
    )
