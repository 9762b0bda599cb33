"""Scenario format v2 (docs/scenario-format.md): where sessions happen, tool turns, explicit events, memories and
program-checked gold; version 1 files still load; bad files are refused by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from lca.types import EntryKind
from protocols.harness.replay import history_sessions, make_probe, replay
from protocols.harness.scenario import (
    load_scenarios,
    memory_from_dict,
    probe_context,
    scenario_history,
    scenario_samples,
)
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "data" / "scenarios").glob("*.jsonl"))


def v2(**over):
    scenario = {
        "schema_version": 2,
        "id": "ops",
        "sessions": [
            {
                "id": "s1",
                "started_at": "2026-03-02T09:00:00",
                "channel": "private",
                "project": "atlas",
                "role": "sre",
                "turns": [
                    {"role": "user", "content": "The payroll export runs on the 25th."},
                    {"role": "assistant", "content": "It runs on the 20th."},
                    {
                        "role": "user",
                        "content": "No, the 25th.",
                        "event": {"type": "correction", "of": {"session": "s1", "turn": 2}, "right": "the 25th"},
                    },
                    {"role": "tool_call", "content": "grep payroll crontab"},
                    {"role": "tool_result", "content": "0 6 25 * * payroll-export"},
                ],
            },
            {
                "id": "s2",
                "started_at": "2026-03-09T09:00:00",
                "channel": "public",
                "turns": [{"role": "user", "content": "The office closes early on Friday."}],
            },
        ],
        "memories": [
            {
                "id": "payroll-day",
                "body": "The payroll export runs on the 25th.",
                "sources": [{"session": "s1", "turn": 3}],
            }
        ],
        "probes": [
            {
                "id": "q1",
                "question": "When does the payroll export run?",
                "answer": "the 25th",
                "evidence": [{"session": "s1", "turn": 3}],
                "forbidden": [{"session": "s1", "turn": 2}],
                "channel": "public",
                "required_mentions": ["25th"],
                "forbidden_mentions": ["20th"],
                "source_type": "transcript",
            }
        ],
    }
    scenario.update(over)
    return scenario


def write(tmp_path, *records) -> Path:
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_scenario_file_loads(path):
    scenarios, digest = load_scenarios(path)
    assert scenarios and len(digest) == 64


def test_a_v2_history_becomes_entries_that_say_where_and_what_happened(tmp_path):
    (scenario,), _ = load_scenarios(write(tmp_path, v2()))
    first, second = (scenario.entries(s) for s in scenario.sessions)
    assert [e.kind for e in first][3:] == [EntryKind.TOOL_CALL, EntryKind.TOOL_RESULT]
    assert first[0].meta == {"visibility": "private", "project": "atlas", "role": "sre"}
    assert first[2].meta["event"] == {"type": "correction", "of": "ops.s1#ops.s1:2", "right": "the 25th"}
    assert second[0].meta == {"visibility": "public"}
    history = scenario_history(scenario)
    assert [len(s["memories"]) for s in history["sessions"]] == [1, 0]  # it exists once s1 has ended
    record, body = memory_from_dict(history["sessions"][0]["memories"][0])
    assert body.startswith("The payroll export") and record.sources[0].entries == ("ops.s1:3",)
    (sample,) = scenario_samples(write(tmp_path, v2()))[0]
    assert sample.metadata["probe_context"] == {"channel": "public", "project": None, "role": None, "continues": False}
    gold = sample.metadata["gold"]
    assert gold["forbidden"] == ["ops.s1#ops.s1:2"] and gold["required_mentions"] == ["25th"]
    assert gold["source_type"] == "transcript" and gold["abstain"] is False


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (lambda d: d["sessions"][0].update(channel="secret"), "sessions.0.channel", "private"),
        (
            lambda d: d["sessions"][0]["turns"][2]["event"].pop("right"),
            "sessions.0.turns.2.event",
            "says what is right",
        ),
        (
            lambda d: d["sessions"][0]["turns"][0].update(
                event={"type": "approval", "of": {"session": "s1", "turn": 3}}
            ),
            None,
            "of an earlier turn",
        ),
        (lambda d: d["memories"][0].update(sources=[{"session": "s9", "turn": 1}]), None, "memory 'payroll-day'"),
        (lambda d: d["memories"][0].update(conflicts_with=["nope"]), None, "names no other memory"),
        (lambda d: d["probes"][0].update(forbidden=[{"session": "s2", "turn": 5}]), None, "forbidden"),
        (lambda d: d["probes"][0].update(source_type="rumour"), "probes.0.source_type", "transcript"),
        (lambda d: d.update(schema_version=1), None, "needs schema_version 2"),
    ],
)
def test_a_bad_v2_file_is_refused_naming_file_line_and_field(tmp_path, mutate, field, reason):
    data = v2()
    mutate(data)
    path = write(tmp_path, v2(id="fine"), data)
    with pytest.raises(RecordFormatError) as info:
        load_scenarios(path)
    message = str(info.value)
    assert str(path) in message and "line 2" in message and reason in message
    if field:
        assert info.value.field == field


def test_where_a_probe_is_asked_reaches_recall(tmp_path):
    """A probe asked in a public channel never gets a private session's turn; the same probe asked privately does."""
    from conditions import ConditionRuntime, build_condition

    (scenario,), _ = load_scenarios(write(tmp_path, v2()))
    probe = scenario.probes[0]
    embedder = FakeHashingEmbedder()
    injected = {}
    for channel in ("public", "private"):
        context = probe_context(scenario, probe) | {"channel": channel}
        sessions = history_sessions(scenario_history(scenario))
        asked = make_probe(probe.id, probe.question, probe.asked_at, context, sessions, embedder=embedder)
        condition = build_condition("transcript-recall", floor=0.0)
        condition.attach(ConditionRuntime(workdir=tmp_path / channel, embedder=embedder))
        condition.reset()
        try:
            packet = replay(condition, sessions, asked)
        finally:
            condition.close()
        injected[channel] = {p for item in packet.items for p in item.pointers}
    assert not any(p.startswith("ops.s1#") for p in injected["public"])
    assert "ops.s1#ops.s1:3" in injected["private"]


def test_a_probe_that_continues_leaves_the_last_session_open(tmp_path):
    data = v2()
    data["probes"][0]["continues"] = True
    (scenario,), _ = load_scenarios(write(tmp_path, data))
    history = scenario_history(scenario)
    live = history_sessions(history, continues=True)
    assert [len(s.memories) for s in live] == [1, 0]
    asked = make_probe("q1", "And is the office closed on Friday too?", None, {"continues": True}, live)
    assert asked.continues and asked.signals.follow_up  # it shares the live session's topic

    class Recorder:
        def __init__(self):
            self.calls = []

        def ingest(self, session):
            self.calls.append(("ingest", session.id))

        def end_session(self):
            self.calls.append(("end",))

        def build_context(self, probe):
            self.calls.append(("build", probe.id))
            return None

    recorder = Recorder()
    replay(recorder, live, asked)
    assert recorder.calls == [("ingest", "ops.s1"), ("end",), ("ingest", "ops.s2"), ("build", "q1")]
