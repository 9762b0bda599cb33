"""A generated scenario while it is written: turns that carry labels instead of positions, the blocks of turns each
session holds, the probes by label, and the template filler. The generator (``protocols.scenarios.generator``) and
the behaviour probes it can add (``protocols.scenarios.behaviour``) both write into one ``Plan``; the generator
resolves the labels to (session, turn) once the history is assembled. The domain imprinting generator
(``protocols.evals.domain_imprinting.scenarios``) writes its turns and routine chatter with the same pieces."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.scenarios.vocabulary import Domain


@dataclass
class Turn:
    role: str
    content: str
    label: str | None = None
    event: tuple[str, str | None, str | None] | None = None  # type, label of the turn it is about, right


@dataclass
class Plan:
    """One scenario while it is written: its sessions' blocks of turns and its probes, by label."""

    blocks: dict[int, list[list[Turn]]] = field(default_factory=dict)
    probes: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)


def probe(
    category: str,
    question: str,
    answer: str,
    evidence: list[str],
    forbidden: list[str],
    required: list[str],
    forbidden_mentions: list[str],
) -> dict[str, Any]:
    """A probe with labels where its turns go; the generator's assembly resolves them."""
    return {
        "category": category,
        "question": question,
        "answer": answer,
        "evidence": evidence,
        "forbidden": forbidden,
        "required_mentions": required,
        "forbidden_mentions": forbidden_mentions,
    }


class Labels:
    def __init__(self) -> None:
        self.count = 0

    def new(self, kind: str) -> str:
        self.count += 1
        return f"{kind}-{self.count}"


def fill(rng: random.Random, templates: tuple[str, ...], **values: str) -> str:
    return capitalized(rng.choice(templates).format(**values))


def capitalized(text: str) -> str:
    return text[0].upper() + text[1:]


def chatter(rng: random.Random, domain: Domain, count: tuple[int, int], people: Sequence[str]) -> list[Turn]:
    """Routine turns between planted events, ``count`` exchanges at most and at least: distractors that mention the
    domain's services and ``people``."""
    turns = []
    for _ in range(rng.randint(*count)):
        user, assistant = rng.choice(domain.chatter)
        values = {"service": rng.choice(domain.services), "person": rng.choice(people)}
        turns += [
            Turn("user", capitalized(user.format(**values))),
            Turn("assistant", capitalized(assistant.format(**values))),
        ]
    return turns
