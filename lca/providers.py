"""Provider contracts: what a model, a tool or a channel declares it can do, checked before a side effect.

An agent that moves between hosts meets different providers. Each declares a ``ProviderContract``: its kind,
name and version, the capabilities it offers, the grants it holds (what it is allowed to touch), and how it
delivers an effect (``DELIVERY``), which decides what ``lca.intents`` may do with an effect whose fate a move
left unknown:

- ``reconcile``: the provider answers whether the effect with a given idempotency key happened (and its receipt);
- ``idempotent``: the provider deduplicates by key, so delivering again is safe;
- ``at-most-once``: neither; an effect left in flight cannot be finished safely and fails closed.

A store keeps the contracts it runs with, and the capabilities an operator authorized, in ``providers.json``
(shipped in a bundle's body: configuration, not private memory). ``select_provider`` picks a provider that offers
every capability a task requires and refuses, naming what is missing, when none does (fail closed: no side
effect with less than was asked). ``capability_changes`` compares two hosts' contracts for the migration check:
a capability lost is *reduced* (recorded and shown, never silent), one that appears only on the target is
*gained* and stays gated until an operator authorizes it (capability visibility, one of the continuity
invariants of runtime-independent agents).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from lca.fileio import atomic_write_bytes
from lca.layout import StoreLayout

KINDS = ("model", "tool", "channel")
DELIVERY = ("reconcile", "idempotent", "at-most-once")
PROVIDERS_FILE = "providers.json"


class ProviderUnavailable(LCAError):
    """No provider offers what a task requires (or the capability is gated): nothing was done."""


def _names(value: Any, field_name: str) -> frozenset[str]:
    if not isinstance(value, list | tuple | set | frozenset) or not all(isinstance(v, str) and v for v in value):
        raise RecordFormatError("must be a list of non-empty strings", field=field_name)
    return frozenset(value)


@dataclass(frozen=True)
class ProviderContract:
    """One provider's declaration: what it offers, what it may touch, how it delivers an effect."""

    name: str
    kind: str
    version: str = ""
    capabilities: frozenset[str] = field(default_factory=frozenset)
    grants: frozenset[str] = field(default_factory=frozenset)
    delivery: str = "at-most-once"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise RecordFormatError("must be a non-empty string", field="name")
        if self.kind not in KINDS:
            raise RecordFormatError(f"unknown kind {self.kind!r}; known: {', '.join(KINDS)}", field="kind")
        if self.delivery not in DELIVERY:
            raise RecordFormatError(
                f"unknown delivery {self.delivery!r}; known: {', '.join(DELIVERY)}", field="delivery"
            )
        object.__setattr__(self, "capabilities", _names(self.capabilities, "capabilities"))
        object.__setattr__(self, "grants", _names(self.grants, "grants"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "version": self.version,
            "capabilities": sorted(self.capabilities),
            "grants": sorted(self.grants),
            "delivery": self.delivery,
        }

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "provider") -> ProviderContract:
        if not isinstance(data, Mapping):
            raise RecordFormatError(f"{where}: a provider contract must be an object")
        unknown = set(data) - {"name", "kind", "version", "capabilities", "grants", "delivery"}
        if unknown:
            raise RecordFormatError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            return cls(
                name=data.get("name", ""),
                kind=data.get("kind", ""),
                version=str(data.get("version", "")),
                capabilities=data.get("capabilities", []),
                grants=data.get("grants", []),
                delivery=data.get("delivery", "at-most-once"),
            )
        except RecordFormatError as exc:
            raise RecordFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class ProviderSet:
    """The contracts a store runs with and the capabilities an operator authorized on it."""

    contracts: tuple[ProviderContract, ...] = ()
    authorized: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        names = [c.name for c in self.contracts]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise RecordFormatError(f"provider(s) declared twice: {', '.join(repeated)}", field="providers")

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset().union(*(c.capabilities for c in self.contracts)) if self.contracts else frozenset()

    def contract(self, name: str) -> ProviderContract | None:
        return next((c for c in self.contracts if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"providers": [c.to_dict() for c in self.contracts], "authorized": sorted(self.authorized)}

    @classmethod
    def from_dict(cls, data: Any, *, where: str = PROVIDERS_FILE) -> ProviderSet:
        if not isinstance(data, Mapping):
            raise RecordFormatError(f"{where}: must be an object with 'providers' and 'authorized'")
        raw = data.get("providers", [])
        if not isinstance(raw, list):
            raise RecordFormatError(f"{where}: 'providers' must be a list")
        contracts = tuple(ProviderContract.from_dict(c, where=f"{where}, providers[{i}]") for i, c in enumerate(raw))
        try:
            return cls(contracts, _names(data.get("authorized", []), "authorized"))
        except RecordFormatError as exc:
            raise RecordFormatError(f"{where}: {exc}") from None


def read_providers(root: Path | str) -> ProviderSet:
    """The store's declared providers (an empty set when it declares none)."""
    path = StoreLayout(root).root / PROVIDERS_FILE
    if not path.exists():
        return ProviderSet()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RecordFormatError(f"{path}: not valid JSON: {exc}") from None
    return ProviderSet.from_dict(data, where=str(path))


def write_providers(root: Path | str, providers: ProviderSet) -> None:
    path = StoreLayout(root).root / PROVIDERS_FILE
    atomic_write_bytes(path, (json.dumps(providers.to_dict(), indent=2, sort_keys=True) + "\n").encode())


def select_provider(
    providers: ProviderSet,
    requires: Iterable[str],
    *,
    kind: str | None = None,
    grant: str | None = None,
    gated: Collection[str] = (),
) -> ProviderContract:
    """The first declared provider (of ``kind``) that offers every required capability and holds ``grant``.
    A capability in ``gated`` (gained on this host and not yet authorized) counts as not offered. Refuses,
    naming what no provider offers, rather than acting with less."""
    needed = frozenset(requires)
    blocked = frozenset(gated) - providers.authorized
    candidates = [c for c in providers.contracts if kind is None or c.kind == kind]
    for contract in candidates:
        offered = contract.capabilities - blocked
        if needed <= offered and (grant is None or grant in contract.grants):
            return contract
    offered_any = frozenset().union(*(c.capabilities for c in candidates)) if candidates else frozenset()
    missing = sorted(needed - (offered_any - blocked))
    why = []
    if missing:
        why.append(f"no {kind or 'provider'} offers {', '.join(missing)}")
    if needed & blocked:
        why.append(f"gated until authorized: {', '.join(sorted(needed & blocked))}")
    if grant is not None:
        why.append(f"grant {grant!r} required")
    raise ProviderUnavailable(
        "no safe provider for this effect (" + "; ".join(why or ["no single provider offers all of it"]) + "); "
        "nothing was done"
    )


@dataclass(frozen=True)
class CapabilityChange:
    """One capability across a move: ``reduced`` (offered before, not after), ``gained`` (only after; gated
    until ``authorized``)."""

    capability: str
    change: str
    before: tuple[str, ...]  # the providers that offered it before the move
    after: tuple[str, ...]
    authorized: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "change": self.change,
            "before": list(self.before),
            "after": list(self.after),
            "authorized": self.authorized,
        }


def capability_changes(before: ProviderSet, after: ProviderSet) -> list[CapabilityChange]:
    """What a move did to the agent's capabilities: every one lost and every one gained, named with the
    providers that offered it (a capability kept by some provider is no change)."""

    def offering(providers: Sequence[ProviderContract], capability: str) -> tuple[str, ...]:
        return tuple(sorted(c.name for c in providers if capability in c.capabilities))

    out = []
    for capability in sorted(before.capabilities | after.capabilities):
        was, now = offering(before.contracts, capability), offering(after.contracts, capability)
        if was and not now:
            out.append(CapabilityChange(capability, "reduced", was, now))
        elif now and not was:
            out.append(CapabilityChange(capability, "gained", was, now, capability in after.authorized))
    return out


def gated_capabilities(changes: Iterable[CapabilityChange]) -> frozenset[str]:
    """The capabilities gained in a move that no operator has authorized yet."""
    return frozenset(c.capability for c in changes if c.change == "gained" and not c.authorized)
