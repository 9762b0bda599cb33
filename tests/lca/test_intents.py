"""Durable intents and provider contracts (lca.intents, lca.providers): an external effect happens exactly once
across crashes and migrations, a stale process cannot finalize work after a move, and a move's capability
changes are recorded and checked."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lca.authority import FencedWriteError
from lca.bundle import migrate
from lca.errors import RecordFormatError
from lca.intents import IntentError, IntentLog, intents_check
from lca.migration_check import check_migration, history_fingerprint
from lca.providers import (
    ProviderContract,
    ProviderSet,
    ProviderUnavailable,
    capability_changes,
    gated_capabilities,
    read_providers,
    select_provider,
    write_providers,
)
from lca.transcript import TranscriptStore
from lca.types import HealthStatus
from tests.conftest import make_entry


class FakeService:
    """A fake external service (a mail or ticket API) that counts every effect it performs, by key."""

    def __init__(self) -> None:
        self.performed: list[str] = []  # every delivery it acted on, duplicates included

    def apply(self, key: str) -> str:
        self.performed.append(key)
        return f"receipt-{key}"


class FakeProvider:
    """A provider in front of ``FakeService`` with a declared delivery contract."""

    def __init__(self, service: FakeService, delivery: str, name: str = "mailer") -> None:
        self.service = service
        self.contract = ProviderContract(name, "tool", "1", frozenset({"send"}), frozenset({"outbox"}), delivery)
        self.delivered: set[str] = set()

    def deliver(self, key: str, effect: Mapping[str, Any]) -> str:
        if self.contract.delivery == "idempotent" and key in self.delivered:
            return f"receipt-{key}"  # the provider deduplicates: the service does not act twice
        self.delivered.add(key)
        return self.service.apply(key)

    def status(self, key: str) -> str | None:
        return f"receipt-{key}" if key in self.delivered else None


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    TranscriptStore(root).append([make_entry("s1", 1, "send the weekly report to the team")])
    return root


def test_run_delivers_once_and_a_retry_of_the_key_returns_the_receipt(store):
    service = FakeService()
    provider = FakeProvider(service, "at-most-once")
    log = IntentLog(store)
    first = log.run("report-week-3", provider, {"to": "team", "body": "weekly report"})
    again = IntentLog(store).run("report-week-3", provider, {"to": "team", "body": "weekly report"})
    assert first.state == again.state == "done" and again.receipt == "receipt-report-week-3"
    assert service.performed == ["report-week-3"]
    assert again.history == ("pending", "done")
    with pytest.raises(IntentError, match="used for another effect"):
        log.begin("report-week-3", "mailer", {"to": "someone else"})


def test_a_credential_in_an_effect_is_redacted_and_never_replayed_from_the_log(store):
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    log = IntentLog(store)
    intent = log.begin("deploy-1", "mailer", {"token": secret, "body": "deploy"})
    text = (store / "events" / "intents.jsonl").read_text()
    assert secret not in text and "REDACTED" in text and not intent.replayable
    service = FakeService()
    (resumed,) = IntentLog(store).resume({"mailer": FakeProvider(service, "idempotent")})
    assert resumed.outcome == "blocked" and "redacted" in resumed.note and service.performed == []


@pytest.mark.parametrize(
    ("delivery", "happened", "outcome", "performed"),
    [
        ("reconcile", True, "reconciled", 1),  # it had happened: finalized from the provider's answer
        ("reconcile", False, "delivered", 1),  # it had not: delivered once now
        ("idempotent", True, "delivered", 1),  # delivered again under its key: deduplicated
        ("at-most-once", True, "blocked", 1),  # unknown fate: fails closed, never delivered again
        ("at-most-once", False, "blocked", 0),
    ],
)
def test_resume_settles_work_in_flight_by_the_providers_contract(store, delivery, happened, outcome, performed):
    service = FakeService()
    provider = FakeProvider(service, delivery)
    log = IntentLog(store)
    intent = log.begin("ticket-9", "mailer", {"title": "disk full"})
    if happened:
        provider.deliver("ticket-9", intent.effect)  # the process died after the effect, before finish
    (resumed,) = IntentLog(store).resume({"mailer": provider})
    assert resumed.outcome == outcome
    assert len(service.performed) == performed
    state = IntentLog(store).intents()[intent.id].state
    assert state == ("blocked" if outcome == "blocked" else "done")
    check = intents_check(store)
    assert (check.status == HealthStatus.WARN) == (outcome == "blocked")


def test_a_provider_this_host_lacks_blocks_the_intent(store):
    IntentLog(store).begin("sms-1", "sms-gateway", {"to": "+44"})
    (resumed,) = IntentLog(store).resume({})
    assert resumed.outcome == "blocked" and "not available" in resumed.note
    assert "blocked" in intents_check(store).detail


def test_a_stale_process_cannot_claim_or_finalize_after_a_move(store, tmp_path):
    stale = IntentLog(store)  # opened before the move: holds epoch 1
    intent = stale.begin("invoice-7", "mailer", {"amount": 40})
    result = migrate(store, tmp_path / "target", bundle_dir=tmp_path / "b")
    assert result.ok
    before = (store / "events" / "intents.jsonl").read_bytes()
    with pytest.raises(FencedWriteError):
        stale.finish(intent.id, "receipt-invoice-7")
    with pytest.raises(FencedWriteError):
        stale.resume({"mailer": FakeProvider(FakeService(), "reconcile")})
    assert (store / "events" / "intents.jsonl").read_bytes() == before  # nothing it attempted was written
    carried = IntentLog(tmp_path / "target").intents()[intent.id]
    assert carried.state == "pending" and carried.epoch == 1  # the pending work travelled in the checkpoint
    assert intents_check(tmp_path / "target").data["left_by_earlier_epoch"] == 1


class Killed(Exception):
    """A process killed in the middle of a step (simulated)."""


class DiesAfterDelivering(FakeProvider):
    """The target's process dies right after the provider performed the effect, before the intent is finished."""

    def __init__(self, inner: FakeProvider) -> None:
        self.inner, self.contract = inner, inner.contract

    def deliver(self, key: str, effect: Mapping[str, Any]) -> str:
        self.inner.deliver(key, effect)
        raise Killed(key)

    def status(self, key: str) -> str | None:
        return self.inner.status(key)


def test_fifty_migrations_in_the_middle_of_work_perform_every_effect_exactly_once(tmp_path):
    """Each trial: an agent sends effects through a provider; the source process dies at a random point (before
    the effect, after it, after finishing); the migration itself may be killed at rehydration (rolled back, then
    retried); the stale process tries to finish after the move; the target may die in the middle of resuming
    (after the provider acted, before the intent was finished) and resume again. Every effect the service saw, it
    saw once; every intent ends done."""
    rng = random.Random(53)
    service = FakeService()
    provider = FakeProvider(service, "reconcile")
    store = tmp_path / "h0"
    TranscriptStore(store).append([make_entry("s1", 1, "start")])
    keys: list[str] = []
    outcomes: dict[str, int] = {}
    for trial in range(50):
        log = IntentLog(store)
        for n in range(rng.randint(0, 2)):  # effects finished normally before the crash
            keys.append(f"t{trial}-ok{n}")
            log.run(keys[-1], provider, {"n": n})
        key = f"t{trial}-crash"
        keys.append(key)
        intent = log.begin(key, "mailer", {"trial": trial})
        crash = rng.choice(["before effect", "after effect", "after finish"])
        if crash != "before effect":
            provider.deliver(key, intent.effect)
        if crash == "after finish":
            log.finish(intent.id, f"receipt-{key}")
        target = tmp_path / f"h{trial + 1}"
        if rng.random() < 0.3:  # the move is killed at rehydration: rolled back, the source authoritative again

            def killed(root: Path) -> None:
                raise Killed("rehydrate")

            failed = migrate(store, target, bundle_dir=tmp_path / f"b{trial}", rebuild=killed)
            assert failed.rolled_back and not target.exists()
            with pytest.raises(FencedWriteError):  # the rollback took a new epoch: the old process is stale too
                log.finish(intent.id, "late")
            outcomes["rolled back"] = outcomes.get("rolled back", 0) + 1
        before = history_fingerprint(store)
        result = migrate(store, target, bundle_dir=tmp_path / f"b{trial}")
        check = check_migration(store, target, result, before)
        assert check.ok and check.intents_lost == 0, check.problems
        with pytest.raises(FencedWriteError):  # the stale process wakes up and tries to finish
            log.finish(intent.id, "late")
        if crash == "before effect" and rng.random() < 0.6:  # the target dies in the middle of delivering it
            with pytest.raises(Killed):
                IntentLog(target).resume({"mailer": DiesAfterDelivering(provider)})
            outcomes["target killed"] = outcomes.get("target killed", 0) + 1
        resumed = IntentLog(target).resume({"mailer": provider})
        assert all(r.outcome in ("reconciled", "delivered") for r in resumed)
        store = target
    final = IntentLog(store).intents()
    assert sorted(service.performed) == sorted(keys)  # exactly once each: none lost, none twice
    assert {i.state for i in final.values()} == {"done"} and len(final) == len(keys)
    assert outcomes["rolled back"] >= 5 and outcomes["target killed"] >= 5  # the kills did happen


def test_a_malformed_intent_line_fails_health_naming_the_file_and_line(store):
    IntentLog(store).begin("a", "mailer", {})
    with (store / "events" / "intents.jsonl").open("a") as f:
        f.write('{"record": "intent", "id": 3}\n')
    check = intents_check(store)
    assert check.status == HealthStatus.FAIL and "intents.jsonl, line 2" in check.detail


def test_cursors_travel_with_the_store(store, tmp_path):
    log = IntentLog(store)
    log.set_cursor("inbox", "msg-120")
    log.set_cursor("inbox", "msg-121")
    assert migrate(store, tmp_path / "t", bundle_dir=tmp_path / "b").ok
    assert IntentLog(tmp_path / "t").cursors() == {"inbox": "msg-121"}


# ---- provider contracts -------------------------------------------------------------------------------------
MODEL = ProviderContract("local-llm", "model", "0.3", frozenset({"chat", "json_schema"}))
MAIL = ProviderContract("mailer", "tool", "2", frozenset({"send"}), frozenset({"outbox"}), "idempotent")


def test_selection_checks_requirements_and_fails_closed_naming_what_is_missing():
    providers = ProviderSet((MODEL, MAIL))
    assert select_provider(providers, {"chat"}, kind="model") is MODEL
    assert select_provider(providers, {"send"}, grant="outbox") is MAIL
    with pytest.raises(ProviderUnavailable, match="no model offers tools"):
        select_provider(providers, {"chat", "tools"}, kind="model")
    with pytest.raises(ProviderUnavailable, match="grant 'payments'"):
        select_provider(providers, {"send"}, grant="payments")
    with pytest.raises(ProviderUnavailable, match="gated until authorized: send"):
        select_provider(providers, {"send"}, gated={"send"})
    authorized = ProviderSet((MODEL, MAIL), frozenset({"send"}))
    assert select_provider(authorized, {"send"}, gated={"send"}) is MAIL


def test_contracts_refuse_bad_fields_by_name(tmp_path):
    with pytest.raises(RecordFormatError, match="delivery"):
        ProviderContract("x", "tool", delivery="exactly-once")
    with pytest.raises(RecordFormatError, match="kind"):
        ProviderContract("x", "robot")
    with pytest.raises(RecordFormatError, match="declared twice"):
        ProviderSet((MAIL, MAIL))
    (tmp_path / "providers.json").write_text(json.dumps({"providers": [{"name": "m", "kind": "tool", "cost": 1}]}))
    with pytest.raises(RecordFormatError, match=r"providers.json, providers\[0\]: unknown field\(s\) cost"):
        read_providers(tmp_path)


def test_a_move_records_capabilities_reduced_and_gained_and_the_check_verifies_it(store, tmp_path):
    write_providers(store, ProviderSet((MODEL, MAIL)))
    on_target = [
        ProviderContract("hosted-llm", "model", "1", frozenset({"chat", "tools"})).to_dict(),
        MAIL.to_dict(),
    ]
    before = history_fingerprint(store)
    target = tmp_path / "target"
    result = migrate(store, target, bundle_dir=tmp_path / "b", binding={"providers": on_target})
    changes = capability_changes(read_providers(store), read_providers(target))
    assert [(c.capability, c.change) for c in changes] == [("json_schema", "reduced"), ("tools", "gained")]
    assert gated_capabilities(changes) == {"tools"}
    resume = json.loads(TranscriptStore(target).read("lca-migrations").entries[-1].content)
    assert resume["migration_step"] == "resume" and len(resume["capabilities"]) == 2
    check = check_migration(store, target, result, before)
    assert check.ok and check.capabilities_visible

    write_providers(target, ProviderSet(tuple(ProviderContract.from_dict(c) for c in on_target[1:])))
    silent = check_migration(store, target, result, before)  # a capability lost that the move never recorded
    assert not silent.capabilities_visible and not silent.ok and any("capabilities" in p for p in silent.problems)


def test_the_check_counts_intents_the_target_lost(store, tmp_path):
    IntentLog(store).begin("k1", "mailer", {})
    before = history_fingerprint(store)
    result = migrate(store, tmp_path / "t", bundle_dir=tmp_path / "b")
    (tmp_path / "t" / "events" / "intents.jsonl").unlink()
    check = check_migration(store, tmp_path / "t", result, before)
    assert check.intents_lost == 1 and not check.ok
