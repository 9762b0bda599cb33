"""The shapes of a domain's vocabulary the scenario generator fills its templates from (protocols/scenarios/domains.py
holds the domains themselves)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    """A design decision: the first option is chosen, a later one may supersede it for one of the reasons."""

    topic: str
    options: tuple[str, ...]
    reasons: tuple[str, ...]
    asks: tuple[str, ...]  # probe phrasings: what is decided, without the topic's wording


@dataclass(frozen=True)
class Preference:
    topic: str
    values: tuple[str, ...]
    asks: tuple[str, ...]  # probe phrasings: a task the preference governs


@dataclass(frozen=True)
class Correction:
    """An agent mistake and the user's correction; ``fix`` names only the right value."""

    mistake: str
    fix: str
    wrong: str
    right: str
    asks: tuple[str, ...]  # a situation where the mistake would recur


@dataclass(frozen=True)
class Overclaim:
    """An agent claim the user corrects; ``phrase`` (the overclaim) is absent from ``fix``, which holds "not"."""

    claim: str
    phrase: str
    fix: str
    truth: str
    asks: tuple[str, ...]


@dataclass(frozen=True)
class PrivateFact:
    statement: str
    value: str


@dataclass(frozen=True)
class OpenThread:
    """Work left open when a session is interrupted; ``key`` is the word that says where it stood."""

    task: str
    done: str
    next: str
    key: str
    check: tuple[str, str]  # a tool call and its result made while working on it


@dataclass(frozen=True)
class FailedAttempt:
    call: str
    error: str
    reply: str


@dataclass(frozen=True)
class Domain:
    name: str
    short: str
    role: str  # the agent's role in the sessions
    projects: tuple[str, ...]
    services: tuple[str, ...]
    people: tuple[str, ...]
    decisions: tuple[Decision, ...]
    preferences: tuple[Preference, ...]
    corrections: tuple[Correction, ...]
    overclaims: tuple[Overclaim, ...]
    private_facts: tuple[PrivateFact, ...]
    secret_holders: tuple[str, ...]  # what a planted API key is for
    threads: tuple[OpenThread, ...]
    failures: tuple[FailedAttempt, ...]
    chatter: tuple[tuple[str, str], ...]  # user, assistant; may use {service} and {person}
    unknowns: tuple[str, ...]  # questions the history never answers (abstention probes)
    private_asks: tuple[str, ...]  # asked in a public channel
