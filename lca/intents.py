"""Durable intents: an external effect is written down before it happens and finalized after, so a move in the
middle of a task can finish it, or refuse to, without doing it twice.

An agent's work in flight (a message sent, a ticket filed, a payment made) is a side effect outside the store. If
the agent moves between the effect and its record, the new host cannot know whether it happened. So every effect
goes through an **intent**: an id, an idempotency key, the provider that delivers it, the effect itself, a state,
and the fencing epoch that claimed it (``lca.authority``). The log is ``events/intents.jsonl``: append-only, each
line one transition, read as the latest state per intent; it ships in a bundle's memory part with the rest of the
event logs, so pending work travels with the checkpoint. Provider cursors (how far the agent has read a channel)
are lines of the same log.

- ``begin`` writes the intent (``pending``) before the effect; a key already known returns its intent (a retry
  never makes a second one, and a finished one hands back its receipt).
- ``finish`` records the receipt (``done``); ``abandon`` records an effect known not to have happened.
- Every write passes the store's writer fence under its write lock: after a migration advanced the epoch, a stale
  process can neither claim nor finalize an intent (``FencedWriteError``, logged, nothing written).
- ``resume`` (the target after a move, or a restart) takes each intent still in flight, claims it at the current
  epoch, and settles it by its provider's contract (``lca.providers.DELIVERY``): ``reconcile`` asks the provider
  whether the effect with that key happened and delivers only if not; ``idempotent`` delivers again with the same
  key; ``at-most-once`` (or a provider this host lacks, or an effect whose payload had to be redacted) fails
  closed: ``blocked``, shown by health, for an operator to decide.

What is written passes the secret detector (``lca.secrets``): a payload that held a credential is stored redacted
and marked not ``replayable``, so it is reconciled or blocked, never delivered again from the redacted copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from lca.authority import WriterFence
from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes, exclusive_lock, numbered_json_lines
from lca.layout import StoreLayout
from lca.providers import ProviderContract
from lca.secrets import redact_tree
from lca.types import HealthCheck, HealthStatus

STATES = ("pending", "claimed", "done", "abandoned", "blocked")
IN_FLIGHT = frozenset({"pending", "claimed"})
SETTLED = frozenset({"done", "abandoned"})
INTENTS_FILE = "intents.jsonl"


class IntentError(LCAError):
    """An intent that cannot move to the asked state (unknown id, already settled)."""


class EffectProvider(Protocol):
    """What delivers an effect: its contract, and (for ``reconcile``) the answer to "did key K happen?"."""

    contract: ProviderContract

    def deliver(self, key: str, effect: Mapping[str, Any]) -> str:
        """Perform the effect; return the provider's receipt."""
        ...

    def status(self, key: str) -> str | None:
        """The receipt of the effect delivered under ``key``, or None when none was."""
        ...


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def intent_id(key: str) -> str:
    """One intent per idempotency key, whichever host writes it."""
    return "intent-" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Intent:
    """The latest state of one intent, as the log reads."""

    id: str
    key: str
    provider: str
    effect: Mapping[str, Any]
    state: str
    epoch: int  # the fencing epoch that last claimed it
    replayable: bool = True  # False: the payload was redacted, so it cannot be delivered again from the log
    receipt: str | None = None
    note: str = ""
    at: str = ""
    history: tuple[str, ...] = field(default=(), compare=False)  # the states it passed through, oldest first

    def to_line(self) -> dict[str, Any]:
        return {
            "record": "intent",
            "id": self.id,
            "key": self.key,
            "provider": self.provider,
            "effect": dict(self.effect),
            "state": self.state,
            "epoch": self.epoch,
            "replayable": self.replayable,
            "receipt": self.receipt,
            "note": self.note,
            "at": self.at,
        }


def _intent_from(data: Mapping[str, Any], where: str) -> Intent:
    for name, kind in (("id", str), ("key", str), ("provider", str), ("state", str), ("epoch", int)):
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            raise RecordFormatError(f"{where}: field {name!r} must be a {kind.__name__}")
    if data["state"] not in STATES:
        raise RecordFormatError(f"{where}: unknown state {data['state']!r}; known: {', '.join(STATES)}")
    if not isinstance(data.get("effect", {}), Mapping):
        raise RecordFormatError(f"{where}: field 'effect' must be an object")
    return Intent(
        data["id"],
        data["key"],
        data["provider"],
        dict(data.get("effect") or {}),
        data["state"],
        data["epoch"],
        bool(data.get("replayable", True)),
        data.get("receipt"),
        str(data.get("note", "")),
        str(data.get("at", "")),
    )


@dataclass(frozen=True)
class Resumed:
    """What ``resume`` did with one intent in flight."""

    intent: str
    provider: str
    outcome: str  # reconciled (it had happened), delivered (again, or for the first time), blocked
    note: str = ""


class IntentLog:
    """The intents of one store. A process holds the epoch it found when it opened the store (its fence)."""

    def __init__(self, root: Path | str, *, lock_timeout: float = 600.0) -> None:
        self.layout = StoreLayout(root)
        self.path = self.layout.events / INTENTS_FILE
        self.fence = WriterFence(root)
        self.lock_timeout = lock_timeout

    # ---- reading -----------------------------------------------------------------------------------------
    def _lines(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        for number, data in numbered_json_lines(self.path.read_text(encoding="utf-8"), str(self.path)):
            if not isinstance(data, dict) or data.get("record") not in ("intent", "cursor"):
                raise RecordFormatError(f"{self.path}, line {number}: not an intent or cursor record")
            yield {**data, "_line": number}

    def intents(self) -> dict[str, Intent]:
        """Every intent at its latest state, in the order they were begun."""
        out: dict[str, Intent] = {}
        for data in self._lines():
            if data["record"] != "intent":
                continue
            intent = _intent_from(data, f"{self.path}, line {data['_line']}")
            earlier = out.get(intent.id)
            out[intent.id] = replace(intent, history=(*(earlier.history if earlier else ()), intent.state))
        return out

    def in_flight(self) -> list[Intent]:
        return [i for i in self.intents().values() if i.state in IN_FLIGHT]

    def cursors(self) -> dict[str, str]:
        """Each provider's latest cursor (how far the agent has read it)."""
        return {d["provider"]: str(d["cursor"]) for d in self._lines() if d["record"] == "cursor"}

    # ---- writing (fenced) --------------------------------------------------------------------------------
    @contextmanager
    def _writing(self, what: str) -> Iterator[int]:
        """Under the store's write lock, with this process's epoch still current: yields the epoch."""
        with exclusive_lock(self.layout.write_lock, timeout=self.lock_timeout, what=f"store {self.layout.root}"):
            yield self.fence.check(what).epoch

    def _put(self, intent: Intent, epoch: int) -> Intent:
        stamped = replace(intent, epoch=epoch, at=_now())
        append_bytes(self.path, (json.dumps(stamped.to_line(), sort_keys=True) + "\n").encode())
        return stamped

    def _begin(self, key: str, provider: str, effect: Mapping[str, Any]) -> tuple[Intent, bool]:
        if not isinstance(key, str) or not key.strip():
            raise RecordFormatError("must be a non-empty string", field="idempotency key")
        try:
            plain = json.loads(json.dumps(dict(effect)))
        except (TypeError, ValueError) as exc:
            raise RecordFormatError(f"must be JSON (an object of plain values): {exc}", field="effect") from None
        stored = redact_tree(plain)
        new = Intent(intent_id(key), key, provider, stored, "pending", 0, replayable=stored == plain)
        with self._writing(f"begin intent {new.id}") as epoch:
            known = self.intents().get(new.id)  # read under the lock: two writers of one key make one intent
            if known is not None:
                if dict(known.effect) != stored or known.provider != provider:
                    raise IntentError(
                        f"{self.path}: idempotency key {key!r} was used for another effect ({known.id}); "
                        "a key names one effect"
                    )
                return known, False
            return self._put(new, epoch), True

    def begin(self, key: str, provider: str, effect: Mapping[str, Any]) -> Intent:
        """Record the intent before its effect. A known key returns the intent as it stands (no second one)."""
        return self._begin(key, provider, effect)[0]

    def _move(self, intent_id_: str, state: str, *, receipt: str | None = None, note: str = "") -> Intent:
        with self._writing(f"{state} intent {intent_id_}") as epoch:
            current = self.intents().get(intent_id_)
            if current is None:
                raise IntentError(f"{self.path}: no intent {intent_id_!r}")
            if current.state in SETTLED:
                raise IntentError(f"{self.path}: intent {intent_id_} is already {current.state}")
            clean_note = redact_tree(note)
            return self._put(replace(current, state=state, receipt=redact_tree(receipt), note=clean_note), epoch)

    def finish(self, intent_id_: str, receipt: str) -> Intent:
        return self._move(intent_id_, "done", receipt=receipt)

    def abandon(self, intent_id_: str, note: str) -> Intent:
        return self._move(intent_id_, "abandoned", note=note)

    def set_cursor(self, provider: str, cursor: str) -> None:
        with self._writing(f"cursor of {provider}") as epoch:
            line = {
                "record": "cursor",
                "provider": provider,
                "cursor": redact_tree(cursor),
                "epoch": epoch,
                "at": _now(),
            }
            append_bytes(self.path, (json.dumps(line, sort_keys=True) + "\n").encode())

    def run(self, key: str, provider: EffectProvider, effect: Mapping[str, Any]) -> Intent:
        """An effect done exactly once under ``key``: begun, delivered, finished. A key already settled (or
        blocked) returns as it stands without delivering; one left in flight by an earlier attempt is settled
        as ``resume`` would, never delivered blindly."""
        intent, new = self._begin(key, provider.contract.name, effect)
        if not new:
            if intent.state in IN_FLIGHT:
                self._settle_in_flight(intent, {provider.contract.name: provider})
            return self.intents()[intent.id]
        return self.finish(intent.id, provider.deliver(key, effect))

    # ---- after a move or a restart -----------------------------------------------------------------------
    def resume(self, providers: Mapping[str, EffectProvider]) -> list[Resumed]:
        """Settle every intent still in flight by its provider's contract (see the module docstring)."""
        return [self._settle_in_flight(intent, providers) for intent in self.in_flight()]

    def _settle_in_flight(self, intent: Intent, providers: Mapping[str, EffectProvider]) -> Resumed:
        claimed = self._move(intent.id, "claimed")
        provider = providers.get(intent.provider)
        if provider is None:
            return self._block(claimed, f"provider {intent.provider!r} is not available on this host")
        delivery = provider.contract.delivery
        if delivery == "reconcile":
            receipt = provider.status(intent.key)
            if receipt is not None:
                self.finish(intent.id, receipt)
                return Resumed(intent.id, intent.provider, "reconciled", "the provider had done it")
        elif delivery != "idempotent":
            return self._block(
                claimed,
                f"{intent.provider} ({delivery}) neither reconciles nor deduplicates: the effect may have happened",
            )
        if not intent.replayable:
            return self._block(claimed, "the stored effect was redacted: it cannot be delivered again from the log")
        self.finish(intent.id, provider.deliver(intent.key, intent.effect))
        return Resumed(intent.id, intent.provider, "delivered", f"delivered under its key ({delivery})")

    def _block(self, intent: Intent, why: str) -> Resumed:
        self._move(intent.id, "blocked", note=why)
        return Resumed(intent.id, intent.provider, "blocked", why)


def intents_check(root: Path | str) -> HealthCheck:
    """Work in flight as health sees it: a blocked intent needs an operator (warn); one still pending from an
    earlier epoch was left by a move or a crash and waits for ``resume`` (warn); an unreadable log fails."""
    log = IntentLog(root)
    try:
        intents = list(log.intents().values())
    except RecordFormatError as exc:
        return HealthCheck("intents", HealthStatus.FAIL, str(exc), {})
    current = log.fence.epoch
    by_state = {state: sum(1 for i in intents if i.state == state) for state in STATES}
    left = [i for i in intents if i.state in IN_FLIGHT and current is not None and i.epoch < current]
    blocked = [i for i in intents if i.state == "blocked"]
    data = {"by_state": by_state, "left_by_earlier_epoch": len(left), "blocked": [i.id for i in blocked]}
    detail = ", ".join(f"{n} {state}" for state, n in by_state.items() if n) or "no intents"
    problems = []
    if blocked:
        problems.append(f"{len(blocked)} blocked, for an operator to settle ({blocked[-1].id}: {blocked[-1].note})")
    if left:
        problems.append(f"{len(left)} in flight from an earlier epoch: run resume with this host's providers")
    status = HealthStatus.WARN if problems else HealthStatus.OK
    return HealthCheck("intents", status, detail + "".join(f"; {p}" for p in problems), data)
