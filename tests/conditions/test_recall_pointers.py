"""What a recalled item rests on: a transcript turn rests on itself; a recalled handoff entry also rests on
the tail turns it quotes, but only those whose text the injected item holds whole."""

from __future__ import annotations

import json
from types import SimpleNamespace

from conditions.recall import _handoff_tail, _pointers
from lca.recall import ScoredCandidate


def candidate(source: str, text: str) -> ScoredCandidate:
    return ScoredCandidate("c1", source, "transcript", "transcript", text, None, 0.5, {}, 0.5)


def transcript_with(entry_id: str, tail: list[dict]) -> SimpleNamespace:
    entry = SimpleNamespace(id=entry_id, content=json.dumps({"recent_tail": tail, "reason": "session end"}))
    return SimpleNamespace(read=lambda session: SimpleNamespace(entries=[entry]))


def test_a_recalled_turn_rests_on_itself():
    assert _pointers(candidate("transcript:s1#s1:3", "hello"), {}) == ("s1#s1:3",)


def test_a_recalled_handoff_rests_on_the_tail_turns_it_holds_whole():
    tail = [
        {"session": "s1", "entry": "s1:1", "text": 'the key is under the "blue" pot'},
        {"session": "s1", "entry": "s1:2", "text": "a turn the trimmed item lost"},
    ]
    handoff = "s1#s1:handoff:abc"
    text = json.dumps({"recent_tail": tail})[: json.dumps({"recent_tail": tail}).index("a turn")]
    assert _handoff_tail(handoff, text, transcript_with("s1:handoff:abc", tail)) == ("s1#s1:1",)
    pointers = _pointers(candidate(f"transcript:{handoff}", text), {}, transcript_with("s1:handoff:abc", tail))
    assert pointers == (handoff, "s1#s1:1")
    # no transcript to read, or not a handoff: only the entry itself
    assert _handoff_tail(handoff, text, None) == ()
    assert _handoff_tail("s1#s1:4", text, transcript_with("s1:4", tail)) == ()
