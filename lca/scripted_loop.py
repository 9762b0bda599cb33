"""A plain scripted agent loop: the smallest host a substrate runs under, with no evaluation harness around it.

A persistent agent is meant to outlive the harness that drives it (docs/bundles.md). inspect's agent loop (a task,
its solvers, inspect's model API) is one harness; this is another, a few lines a host could write itself: on
start, settle the work left in flight (``lca.intents``: a move or a crash may have left an effect pending); then,
for each user turn, recall from the substrate, answer with the model (any ``TextGenerator``, called directly), and
append the turn and the answer to the transcript. The migration evaluation moves an agent from the inspect loop to
this one (its ``harness`` binding) to show that what continues is the substrate, not the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.intents import EffectProvider, IntentLog, Resumed
from lca.ports import TextGenerator
from lca.recall import RecallContext
from lca.recall.shown import item_label
from lca.substrate import Substrate
from lca.types import EntryKind, TranscriptEntry

ContextBuilder = Callable[[str], Sequence[Mapping[str, str]]]
"""The messages the model is given for a user's question (a host's own context: the default is recall's items)."""


@dataclass(frozen=True)
class LoopTurn:
    """One turn the loop served: what the model was given, what it answered, and what went into the transcript."""

    question: str
    answer: str
    messages: tuple[Mapping[str, str], ...]
    appended: tuple[str, ...]  # the transcript entry ids written (the user's turn, then the answer)
    seconds: float


def recalled_messages(substrate: Substrate, question: str) -> list[dict[str, str]]:
    """The default context: what ``Substrate.recall`` returns for the question, each item under the header recall
    counted it with, as a system message, then the question."""
    result = substrate.recall(RecallContext(query=question))
    shown = "\n\n".join(f"{item_label(n, item)}\n{item.text}" for n, item in enumerate(result.items, 1))
    return ([{"role": "system", "content": shown}] if shown else []) + [{"role": "user", "content": question}]


class ScriptedLoop:
    """Drives one agent over ``substrate``: ``resume`` the work in flight, then ``turn`` per user message.
    ``context`` builds the model's messages for a question (default ``recalled_messages``); turns are appended to
    ``session_id`` as the user's and the agent's entries."""

    def __init__(
        self,
        substrate: Substrate,
        generator: TextGenerator,
        *,
        session_id: str,
        agent_id: str = "agent",
        context: ContextBuilder | None = None,
        max_tokens: int = 160,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        self.substrate = substrate
        self.generator = generator
        self.session_id = session_id
        self.agent_id = agent_id
        self.context = context or (lambda question: recalled_messages(substrate, question))
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.turns: list[LoopTurn] = []

    def resume(self, providers: Mapping[str, EffectProvider]) -> list[Resumed]:
        """Settle every intent left in flight, by each provider's contract (``IntentLog.resume``), before serving."""
        return IntentLog(Path(self.substrate.home)).resume(providers)

    def _entry(self, entry_id: str, kind: EntryKind, content: str, at: str, **fields: Any) -> TranscriptEntry:
        return TranscriptEntry(
            id=entry_id,
            session_id=self.session_id,
            agent_id=self.agent_id,
            kind=kind,
            timestamp=at,
            content=content,
            **fields,
        )

    def turn(self, question: str, *, at: str | None = None) -> LoopTurn:
        """Recall, answer, append: one user turn served. ``at``: the turn's timestamp (default now, UTC)."""
        started = time.perf_counter()
        messages = tuple(dict(m) for m in self.context(question))
        answer = self.generator.generate(
            messages, max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed
        )
        stamp = at or datetime.now(UTC).isoformat(timespec="seconds")
        transcript = self.substrate.transcript
        known = self.session_id in transcript.session_ids()
        n = len(transcript.read(self.session_id).entries) if known else 0
        asked, answered = f"{self.session_id}:{n + 1}", f"{self.session_id}:{n + 2}"
        entries = [
            self._entry(asked, EntryKind.USER_TURN, question, stamp, author="user"),
            self._entry(
                answered,
                EntryKind.ASSISTANT_TURN,
                answer,
                stamp,
                author="assistant",
                parent_id=asked,
                meta={"model": self.generator.model_id},
            ),
        ]
        self.substrate.append(entries)
        served = LoopTurn(
            question, answer, messages, tuple(e.id for e in entries), round(time.perf_counter() - started, 6)
        )
        self.turns.append(served)
        return served
