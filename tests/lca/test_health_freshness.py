"""lca.health_checks on real stores: every code version that wrote the index since it was built (a stale writer stays
visible after the current build writes again, until `lca reindex`), and whether pruned turns were consolidated before
they left the live window (the prune log against the ledger's cycle spans)."""

from __future__ import annotations

import json

import pytest

from lca.consolidation import ConsolidationConfig
from lca.context import ContextWindow, LiveContextManager
from lca.ingest import WRITERS_META, record_writer, writer_versions
from lca.provenance import code_version
from lca.recall import RecallConfig
from lca.substrate import Substrate
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

OLDER = "0.0.1+g000000000000"  # an older release than any this code runs as


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        yield s


def write(store: Substrate, first: int, n: int = 2, session: str = "s1") -> None:
    store.append(
        [make_entry(session, i, f"turn {i} about the parser job, batch {i * 7}") for i in range(first, first + n)]
    )


# ---- writer versions ------------------------------------------------------------------------------------
def test_a_store_written_by_the_running_code_alone_is_ok_and_counts_its_ingests(store):
    write(store, 1)
    write(store, 3)
    check = store.health().check("code_version")
    assert check.status is HealthStatus.OK and check.data["stale"] == []
    assert list(check.data["writers"]) == [code_version()] and check.data["writers"][code_version()]["ingests"] >= 2


def test_a_stale_writer_stays_visible_after_the_running_code_writes_again(store):
    write(store, 1)
    with store.writer_lock():
        record_writer(store.index.catalog_, OLDER)
        store.index.catalog_.set_meta("last_writer_version", OLDER)
    write(store, 3)  # the running build writes last: last_writer_version no longer names the stale one
    report = store.health()
    check = report.check("code_version")
    assert check.data["last_writer"] == code_version()
    assert check.status is HealthStatus.WARN and check.data["stale"] == [OLDER]
    assert OLDER in check.detail and "lca reindex" in check.detail


def test_an_upgrade_is_not_stale(tmp_path):
    """An older build wrote the store, then only the running one did: an upgrade, not a stale writer."""
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as fresh:
        with fresh.writer_lock():
            record_writer(fresh.index.catalog_, OLDER, at=1.0)
        write(fresh, 1)
        check = fresh.health().check("code_version")
        assert check.status is HealthStatus.OK and check.data["stale"] == [] and OLDER in check.data["writers"]


def test_the_running_build_writing_after_a_later_one_is_itself_the_stale_writer(store):
    write(store, 1)
    with store.writer_lock():
        record_writer(store.index.catalog_, "999.0.0")
    write(store, 3)  # an older process (the running one) writes after the upgrade had
    check = store.health().check("code_version")
    assert check.status is HealthStatus.WARN and check.data["stale"] == [code_version()]


def test_a_rebuild_from_the_transcript_clears_the_stale_writer(store):
    write(store, 1)
    with store.writer_lock():
        record_writer(store.index.catalog_, OLDER)
    assert store.health().check("code_version").status is HealthStatus.WARN
    store.reindex()
    check = store.health().check("code_version")
    assert check.status is HealthStatus.OK and list(check.data["writers"]) == [code_version()]


def test_an_unreadable_writer_record_reads_as_none(store):
    write(store, 1)
    store.index.catalog_.set_meta(WRITERS_META, "{not json")
    assert writer_versions(store.index.catalog_) == {}
    assert store.health().check("code_version").status is HealthStatus.OK


# ---- compaction: consolidated before the prune ---------------------------------------------------------
NO_WRITER = FakeScriptedGenerator([], model_id="never-called")  # cycles with max_candidates=0 ask no writer


def cycle(store: Substrate, trigger: str) -> None:
    store.checkpoint(NO_WRITER, trigger=trigger, config=ConsolidationConfig(max_candidates=0), session_id="live")


def live(store: Substrate, *, hooked: bool) -> LiveContextManager:
    window = ContextWindow(total_tokens=120, reserve_output=16, critical_budget=0, recall_budget=0)
    return LiveContextManager(
        store,
        window,
        session_id="live",
        agent_id="agent",
        identity="",
        consolidate=(lambda trigger: cycle(store, trigger)) if hooked else None,
    )


def add_and_build(manager: LiveContextManager, first: int, n: int = 4) -> int:
    for i in range(first, first + n):
        manager.add(make_entry("live", i, " ".join(f"w{i}x{k}" for k in range(30))))
    pruned = manager.build("status").pruned
    manager.substrate.ingest()
    return len(pruned)


def test_no_prunes_and_prunes_after_a_pre_compaction_cycle_are_ok(store):
    assert store.health().check("compaction").status is HealthStatus.OK
    manager = live(store, hooked=True)
    assert add_and_build(manager, 1) and add_and_build(manager, 5)
    check = store.health().check("compaction")
    assert check.status is HealthStatus.OK, check.detail
    assert check.data["pruned"] >= 2 and check.data["read_after_prune"] == check.data["not_read"] == 0
    assert manager.triggers_fired.count("pre_compaction") >= 2


def test_a_pre_compaction_cycle_run_after_the_prune_warns(store):
    manager = live(store, hooked=False)
    assert add_and_build(manager, 1)
    off = store.health().check("compaction")  # pruned, and the store has never consolidated: nothing was due
    assert off.status is HealthStatus.OK and off.data["pruned"] > 0 and "has not consolidated" in off.detail
    cycle(store, "pre_compaction")  # the host's trigger, set after compaction
    late = store.health().check("compaction")
    assert late.status is HealthStatus.WARN and late.data["read_after_prune"] == late.data["pruned"]
    assert late.data["not_read"] == 0 and "pre_compaction" in late.detail
    assert {p["trigger"] for p in late.data["late"]} == {"pre_compaction"}


def test_a_store_that_consolidates_warns_when_a_prune_took_turns_no_cycle_read(store):
    write(store, 1)
    cycle(store, "session_end")  # the store consolidates; its cycles simply never ran before the prunes below
    manager = live(store, hooked=False)
    assert add_and_build(manager, 1)
    unread = store.health().check("compaction")
    assert unread.status is HealthStatus.WARN and unread.data["not_read"] == unread.data["pruned"] > 0


def test_prunes_in_time_after_a_late_one_keep_the_late_one_on_record(store):
    manager = live(store, hooked=False)
    assert add_and_build(manager, 1)
    cycle(store, "pre_compaction")
    late = store.health().check("compaction").data["read_after_prune"]
    manager.consolidate = lambda trigger: cycle(store, trigger)  # the host fixes its trigger
    assert add_and_build(manager, 5)
    check = store.health().check("compaction")
    assert check.data["pruned"] > late and check.data["read_after_prune"] == late and check.data["not_read"] == 0
    assert check.status is HealthStatus.WARN  # the log still shows turns that left before consolidation


def test_an_unreadable_prune_log_line_is_named_not_fatal(store):
    manager = live(store, hooked=True)
    assert add_and_build(manager, 1)
    with open(store.layout.prune_log, "a", encoding="utf-8") as handle:
        handle.write('{"entry_id": "x"\n' + json.dumps({"no": "fields"}) + "\n")
    check = store.health().check("compaction")
    assert check.status is HealthStatus.OK and len(check.data["unreadable_log_lines"]) == 2
    assert "line" in check.detail and str(store.layout.prune_log) in check.detail
