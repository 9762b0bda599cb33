"""Peer-agent turns in scenarios (issue 53): a v2 turn of role ``peer_agent`` names its ``author``, loads and is
ingested as a ``peer_agent_turn`` the replay shows as that agent's observation; a missing or wrong author is
refused naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from lca.types import EntryKind
from protocols.harness.replay import history_sessions, make_probe, replay
from protocols.harness.scenario import load_scenarios, probe_context, scenario_history
from tests.fakes import FakeHashingEmbedder

PEER = {"role": "peer_agent", "author": "relay-bot", "content": "The staging build for the kiosk app is green."}


def scenario(**turn) -> dict:
    return {
        "schema_version": 2,
        "id": "ops",
        "sessions": [
            {
                "id": "s1",
                "started_at": "2026-03-02T09:00:00",
                "turns": [
                    {"role": "user", "content": "Ship the kiosk app once staging is green."},
                    PEER | turn,
                    {"role": "assistant", "content": "Noted."},
                ],
            }
        ],
        "probes": [
            {
                "id": "q1",
                "question": "Is the staging build for the kiosk app green?",
                "answer": "relay-bot reported it green",
                "evidence": [{"session": "s1", "turn": 2}],
            }
        ],
    }


def write(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_peer_turn_loads_and_is_ingested_as_a_peer_agent_turn_shown_as_an_observation(tmp_path):
    from conditions import ConditionRuntime, build_condition

    (loaded,), _ = load_scenarios(write(tmp_path, scenario()))
    peer = loaded.entries(loaded.sessions[0])[1]
    assert peer.kind is EntryKind.PEER_AGENT_TURN and peer.author == "relay-bot"
    sessions = history_sessions(scenario_history(loaded))  # through the sample's metadata, as a run reads it
    assert sessions[0].entries[1].author == "relay-bot"
    probe = loaded.probes[0]
    embedder = FakeHashingEmbedder()
    asked = make_probe(
        probe.id, probe.question, probe.asked_at, probe_context(loaded, probe), sessions, embedder=embedder
    )
    condition = build_condition("transcript-recall", floor=0.0)
    condition.attach(ConditionRuntime(workdir=tmp_path / "run", embedder=embedder))
    condition.reset()
    try:
        packet = replay(condition, sessions, asked)
    finally:
        condition.close()
    stored = [
        json.loads(line)
        for path in (tmp_path / "run").rglob("*.jsonl")
        if path.parent.name == "sessions"
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    (row,) = [r for r in stored if r.get("id") == "ops.s1:2"]
    assert row["kind"] == "peer_agent_turn" and row["author"] == "relay-bot"
    assert "observation from peer agent relay-bot" in "\n".join(m["content"] for m in packet.messages)


@pytest.mark.parametrize(
    ("turn", "field", "reason"),
    [
        ({"author": None}, "sessions.0.turns.1.author", "names the agent that sent it in 'author'"),
        ({"author": "user"}, "sessions.0.turns.1.author", "neither the user nor this agent"),
        ({"role": "user"}, "sessions.0.turns.1.author", "only a peer_agent turn takes 'author'"),
    ],
)
def test_a_peer_turn_without_its_author_is_refused_by_name(tmp_path, turn, field, reason):
    data = scenario(**turn)
    data["sessions"][0]["turns"][1] = {k: v for k, v in data["sessions"][0]["turns"][1].items() if v is not None}
    path = write(tmp_path, scenario() | {"id": "fine"}, data)
    with pytest.raises(RecordFormatError) as info:
        load_scenarios(path)
    message = str(info.value)
    assert str(path) in message and "line 2" in message and reason in message and info.value.field == field


def test_a_version_1_file_may_not_hold_a_peer_turn(tmp_path):
    with pytest.raises(RecordFormatError, match="peer_agent turns and events need schema_version 2"):
        load_scenarios(write(tmp_path, scenario() | {"schema_version": 1}))
