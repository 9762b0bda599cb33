"""The migration matrix's measures without inspect: a move's timing (lca.bundle.migrate), its cost (bundle bytes,
tokens re-derived), the declared operator steps, and the unfinished task carried across a move exactly once from
either crash point and under either harness."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lca.bundle import MIGRATION_STEPS, migrate
from lca.intents import IntentLog
from lca.migration_check import check_migration, history_fingerprint
from lca.scripted_loop import ScriptedLoop
from lca.substrate import Substrate
from protocols.evals.migration.cost import bundle_bytes, move_cost, rederived_tokens
from protocols.evals.migration.effects import CRASH_POINTS, OUTBOX, CountingOutbox, crash_point, leave_pending
from protocols.evals.migration.operator import OPERATOR_STEPS, MoveFacts, move_facts, operator_steps
from protocols.evals.migration.report import binding_rows
from protocols.evals.migration.scorer import cost_values, work_values
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


def _store(root: Path, turns: int = 3) -> Path:
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s1", n, f"turn {n}: the release train leaves on thursday {n}") for n in range(turns)])
    return root


def _rebuild(root: Path) -> None:
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.reindex()


def test_a_move_times_each_step_and_its_downtime(tmp_path):
    source = _store(tmp_path / "a")
    result = migrate(source, tmp_path / "b", bundle_dir=tmp_path / "b.bundle", rebuild=_rebuild)
    assert result.ok and list(result.seconds) == list(MIGRATION_STEPS)
    assert all(s >= 0 for s in result.seconds.values()) and result.seconds["rehydrate"] > 0
    assert result.downtime_s == pytest.approx(sum(result.seconds.values()), abs=1e-5)
    other = _store(tmp_path / "c")

    def killed(root: Path) -> None:
        raise RuntimeError("rehydration killed")

    failed = migrate(other, tmp_path / "d", bundle_dir=tmp_path / "d.bundle", rebuild=killed)
    assert failed.rolled_back and failed.downtime_s is None and failed.seconds == {}  # no service resumed


def test_the_cost_grows_with_what_the_store_holds(tmp_path):
    costs = []
    for turns in (2, 40):
        source = _store(tmp_path / f"a{turns}", turns)
        result = migrate(source, tmp_path / f"b{turns}", bundle_dir=tmp_path / f"k{turns}", rebuild=_rebuild)
        with Substrate(tmp_path / f"b{turns}", embedder=FakeHashingEmbedder()) as target:
            costs.append(move_cost(result, tmp_path / f"k{turns}", target, reinjected=17))
            assert rederived_tokens(target) == costs[-1]["tokens_rederived"]
        files = [p for p in (tmp_path / f"k{turns}").rglob("*") if p.is_file()]
        assert costs[-1]["bundle_bytes"] == bundle_bytes(tmp_path / f"k{turns}") == sum(p.stat().st_size for p in files)
    small, large = costs
    assert large["bundle_bytes"] > small["bundle_bytes"] and large["tokens_rederived"] > small["tokens_rederived"]
    assert small["tokens_reinjected"] == 17 and small["move_seconds"] >= small["downtime_s"] - 1e-6
    values = cost_values({"cost": small, "operator": {"migrate": 1, "start": 1}})
    assert values["operator_steps"] == 2 and values["seconds_rehydrate"] == small["seconds"]["rehydrate"]
    assert math.isnan(cost_values({})["downtime_s"]) and math.isnan(cost_values({})["operator_steps"])


def test_operator_steps_are_counted_from_the_declared_table():
    assert [s.name for s in OPERATOR_STEPS] == [
        "migrate",
        "start",
        "choose-model",
        "choose-harness",
        "choose-surface",
        "settle",
        "authorize",
    ]
    assert operator_steps(MoveFacts(("host",))) == {"migrate": 1, "start": 1}
    combined = operator_steps(MoveFacts(("host", "model", "surface")))
    assert sum(combined.values()) == 4 and combined["choose-surface"] == 1
    facts = move_facts(
        ("host", "harness"),
        [{"outcome": "blocked"}, {"outcome": "reconciled"}, {"outcome": "blocked"}],
        [
            {"capability": "tools", "change": "gained", "authorized": False},
            {"capability": "send", "change": "gained", "authorized": True},
            {"capability": "json", "change": "reduced", "authorized": False},
        ],
    )
    assert facts == MoveFacts(("host", "harness"), blocked_intents=2, gated_capabilities=1)
    assert operator_steps(facts) == {"migrate": 1, "start": 1, "choose-harness": 1, "settle": 2, "authorize": 1}


@pytest.mark.parametrize("crash", CRASH_POINTS)
@pytest.mark.parametrize("harness", ["inspect", "scripted"])
def test_the_effect_left_in_flight_happens_exactly_once_across_the_move(tmp_path, crash, harness):
    source = _store(tmp_path / "a")
    pending = leave_pending(source, "ticket-7", crash)
    assert pending.outbox.deliveries.get("ticket-7", 0) == (1 if crash == "after-effect" else 0)
    before = history_fingerprint(source)
    result = migrate(source, tmp_path / "b", bundle_dir=tmp_path / "k", rebuild=_rebuild)
    check = check_migration(source, tmp_path / "b", result, before)
    assert check.ok and check.intents_lost == 0 and check.capabilities_visible
    assert pending.stale_finish_refused()  # the source's process wakes up and tries to finish: fenced
    with Substrate(tmp_path / "b", embedder=FakeHashingEmbedder()) as target:
        if harness == "scripted":
            resumed = ScriptedLoop(target, FakeScriptedGenerator(lambda m: "ok"), session_id="live").resume(
                {OUTBOX: pending.outbox}
            )
        else:
            resumed = IntentLog(tmp_path / "b").resume({OUTBOX: pending.outbox})
    assert [r.outcome for r in resumed] == ["reconciled" if crash == "after-effect" else "delivered"]
    outcome = pending.outcome(tmp_path / "b")
    assert outcome["deliveries"] == 1 and outcome["state"] == "done" and outcome["exactly_once"]
    assert work_values({"work": {**outcome, "stale_finish_refused": True}}) == {
        "effect_exactly_once": 1.0,
        "effect_deliveries": 1.0,
        "stale_finish_refused": 1.0,
    }


def test_a_provider_that_delivers_blindly_would_be_counted_twice(tmp_path):
    """The measure can fail: a host that re-sends the effect without asking the intent log delivers it twice."""
    source = _store(tmp_path / "a")
    pending = leave_pending(source, "ticket-8", "after-effect")
    assert migrate(source, tmp_path / "b", bundle_dir=tmp_path / "k").ok
    pending.outbox.deliver("ticket-8", {})  # a naive host retries on start
    IntentLog(tmp_path / "b").resume({OUTBOX: pending.outbox})
    outcome = pending.outcome(tmp_path / "b")
    assert outcome["deliveries"] == 2 and not outcome["exactly_once"]
    assert work_values({"work": outcome})["effect_exactly_once"] == 0.0


def test_the_outbox_is_a_reconciling_provider_and_crash_points_are_fixed_and_mixed():
    assert CountingOutbox.contract.delivery == "reconcile" and CountingOutbox.contract.name == OUTBOX
    points = [crash_point(f"s:{n}@host", 0) for n in range(40)]
    assert points == [crash_point(f"s:{n}@host", 0) for n in range(40)] and set(points) == set(CRASH_POINTS)
    with pytest.raises(ValueError, match="crash point"):
        leave_pending(Path("/nonexistent"), "k", "mid-air")


def test_the_report_gives_downtime_p50_and_p95_per_binding():
    import pandas as pd

    rows = []
    for binding, downtimes in (("host", [1.0, 2.0, 3.0]), ("model+harness", [4.0, 8.0])):
        for n, d in enumerate(downtimes):
            rows.append(
                {
                    "protocol": "migration",
                    "sample_id": f"sc:p{n}@{binding}",
                    "condition": "full-lca",
                    "error": None,
                    "migration_cost/downtime_s": d,
                    "migration_cost/operator_steps": 2.0 if binding == "host" else 4.0,
                    "work_carried/effect_exactly_once": 1.0,
                }
            )
    host, combined = binding_rows(pd.DataFrame(rows))
    assert (host["binding"], host["moves"], host["downtime_p50_s"]) == ("host", 3, 2.0)
    assert host["downtime_p95_s"] == pytest.approx(2.9)
    assert combined["downtime_p50_s"] == 6.0 and combined["operator_steps"] == 4.0
    assert math.isnan(host["tokens_rederived"])  # a measure the log lacks stays unknown, not zero


def test_a_study_report_carries_the_migration_section_and_no_other_protocol_gets_one():
    import pandas as pd

    from protocols.evals.sections import protocol_sections
    from protocols.report.render import _section_lines

    frame = pd.DataFrame(
        [
            {"protocol": "hollow_copy", "sample_id": "sc:p0", "condition": "full-lca", "error": None},
            {
                "protocol": "migration",
                "sample_id": "sc:p0@model+harness",
                "condition": "full-lca",
                "error": None,
                "migration_cost/downtime_s": 0.5,
            },
        ]
    )
    (section,) = protocol_sections(frame)
    assert section.title == "Moves by binding" and [r["binding"] for r in section.rows] == ["model+harness"]
    lines = _section_lines([section])
    assert lines[0] == "## Moves by binding" and any(
        line.startswith("| model+harness | full-lca | 1 |") for line in lines
    )
    assert section.to_dict()["rows"][0]["downtime_p50_s"] == 0.5
