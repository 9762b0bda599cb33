"""The plain scripted agent loop (lca.scripted_loop): it recalls from the substrate, answers with the model it is
given and appends both turns to the transcript; it settles the work a move left in flight before serving; and a
loop left on the source after a move can no longer write."""

from __future__ import annotations

from pathlib import Path

import pytest

from lca.authority import FencedWriteError
from lca.bundle import migrate
from lca.intents import IntentLog
from lca.scripted_loop import ScriptedLoop, recalled_messages
from lca.substrate import Substrate
from lca.types import EntryKind
from protocols.evals.migration.effects import OUTBOX, leave_pending
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("s1", 1, "the staging database listens on port 6543"),
                make_entry("s1", 2, "lunch is at noon on fridays", kind=EntryKind.ASSISTANT_TURN),
            ]
        )
    return root


def test_a_turn_recalls_answers_and_appends_both_turns(store):
    model = FakeScriptedGenerator(lambda messages: "port 6543")
    with Substrate(store, embedder=FakeHashingEmbedder()) as s:
        loop = ScriptedLoop(s, model, session_id="live", max_tokens=40, seed=3)
        first = loop.turn("which port does the staging database listen on?")
        second = loop.turn("and on fridays?")
        entries = s.transcript.read("live").entries
    assert first.answer == "port 6543" and first.appended == ("live:1", "live:2")
    assert second.appended == ("live:3", "live:4")  # the next turn follows on in the same session
    assert [e.kind for e in entries] == [EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN] * 2
    assert entries[1].content == "port 6543" and entries[1].parent_id == "live:1"
    shown = model.calls[0]
    assert shown[0]["role"] == "system" and "6543" in shown[0]["content"]  # recall's item reached the model
    assert shown[-1] == {"role": "user", "content": "which port does the staging database listen on?"}
    assert model.settings[0] == {"max_tokens": 40, "temperature": 0.0, "seed": 3}


def test_the_context_can_be_the_hosts_own(store):
    model = FakeScriptedGenerator(lambda messages: "ok")
    with Substrate(store, embedder=FakeHashingEmbedder()) as s:
        loop = ScriptedLoop(s, model, session_id="live", context=lambda q: [{"role": "user", "content": "ctx " + q}])
        turn = loop.turn("hello")
        default = recalled_messages(s, "hello")
    assert turn.messages == ({"role": "user", "content": "ctx hello"},)
    assert default[-1] == {"role": "user", "content": "hello"}


def test_after_a_move_it_settles_the_work_in_flight_once_and_the_stale_loop_cannot_write(store, tmp_path):
    pending = leave_pending(store, "report-1", "after-effect")  # delivered, never finished, then the move
    stale = Substrate(store, embedder=FakeHashingEmbedder())
    stale_loop = ScriptedLoop(stale, FakeScriptedGenerator(lambda m: "late"), session_id="live")
    assert migrate(store, tmp_path / "target", bundle_dir=tmp_path / "b").ok
    with Substrate(tmp_path / "target", embedder=FakeHashingEmbedder()) as s:
        loop = ScriptedLoop(s, FakeScriptedGenerator(lambda m: "on it"), session_id="live")
        (resumed,) = loop.resume({OUTBOX: pending.outbox})
        again = loop.resume({OUTBOX: pending.outbox})  # a restart of the new host settles nothing twice
        loop.turn("status?")
    assert resumed.outcome == "reconciled" and again == []
    assert pending.outbox.deliveries == {"report-1": 1}
    assert IntentLog(tmp_path / "target").intents()[pending.intent_id].state == "done"
    with pytest.raises(FencedWriteError):
        stale_loop.turn("anyone there?")  # the loop the move left behind is fenced off
    assert not stale.transcript.read("live").entries  # and left nothing behind
    stale.close()
