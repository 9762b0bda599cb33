"""The unfinished task a migration carries: one external effect left in flight on the source, and the scripted
provider that performs it and counts every delivery.

Before the move the agent has begun an effect (an outbox message) as a durable intent (``lca.intents``) and its
process stopped at a point chosen per sample: before the effect was delivered, or after it was delivered but
before the intent was finished (the window that makes a retry dangerous). After the move the target's harness
resumes the work in flight through the product's own ``IntentLog.resume``; the provider's count says whether the
effect happened exactly once. The provider is this evaluation's instrument: a scripted stand-in for an external
service, declared as a ``reconcile`` provider (it answers "did key K happen?"), so it never judges the intent log
it measures."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.authority import FencedWriteError
from lca.intents import IntentLog
from lca.providers import ProviderContract, ProviderSet, read_providers, write_providers

OUTBOX = "outbox"
CRASH_POINTS = ("before-effect", "after-effect")
"""Where the source's process stopped: the effect not yet delivered, or delivered and not yet finished."""


class CountingOutbox:
    """A scripted external service behind a ``reconcile`` provider contract: every delivery is counted by key,
    duplicates included (a real service would have acted twice)."""

    contract = ProviderContract(OUTBOX, "tool", "1", frozenset({"send"}), frozenset({"outbox"}), "reconcile")

    def __init__(self) -> None:
        self.deliveries: dict[str, int] = {}

    def deliver(self, key: str, effect: Mapping[str, Any]) -> str:
        self.deliveries[key] = self.deliveries.get(key, 0) + 1
        return f"sent-{key}"

    def status(self, key: str) -> str | None:
        return f"sent-{key}" if self.deliveries.get(key) else None


def crash_point(sample_id: str, seed: int) -> str:
    """The sample's crash point, fixed by its id and the seed (the same on every run, balanced over samples)."""
    digest = hashlib.sha256(f"{seed}|{sample_id}".encode()).digest()
    return CRASH_POINTS[digest[0] % len(CRASH_POINTS)]


@dataclass
class PendingEffect:
    """An effect begun on the source and left in flight; ``stale`` is the log of the process the move leaves
    behind (it holds the source's epoch)."""

    key: str
    intent_id: str
    crash: str
    outbox: CountingOutbox
    stale: IntentLog
    notes: dict[str, Any] = field(default_factory=dict)

    def stale_finish_refused(self) -> bool:
        """After the move the stopped process wakes and tries to finish its intent: the fence must refuse it."""
        try:
            self.stale.finish(self.intent_id, f"late-{self.key}")
        except FencedWriteError:
            return True
        return False

    def outcome(self, target: Path | str) -> dict[str, Any]:
        """What became of the effect on the target: deliveries counted by the provider, the intent's state."""
        intent = IntentLog(target).intents().get(self.intent_id)
        deliveries = self.outbox.deliveries.get(self.key, 0)
        state = intent.state if intent is not None else None
        return {
            "key": self.key,
            "crash": self.crash,
            "deliveries": deliveries,
            "state": state,
            "exactly_once": deliveries == 1 and state == "done",
            **self.notes,
        }


def leave_pending(source: Path | str, key: str, crash: str) -> PendingEffect:
    """Declare the outbox among the source's providers, begin the effect as an intent and stop at ``crash``."""
    if crash not in CRASH_POINTS:
        raise ValueError(f"crash point must be one of {', '.join(CRASH_POINTS)}, got {crash!r}")
    declared = read_providers(source)
    if declared.contract(OUTBOX) is None:
        write_providers(source, ProviderSet((*declared.contracts, CountingOutbox.contract), declared.authorized))
    outbox = CountingOutbox()
    log = IntentLog(source)
    effect = {"to": "team", "body": f"status update {key}"}
    intent = log.begin(key, OUTBOX, effect)
    if crash == "after-effect":
        outbox.deliver(key, effect)  # the process died here: delivered, never finished
    return PendingEffect(key, intent.id, crash, outbox, log)
