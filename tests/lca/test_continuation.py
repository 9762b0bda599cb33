"""The continuation signals a host reads off the conversation (lca.continuation)."""

from __future__ import annotations

import pytest

from lca.continuation import ContinuationSignals, continuation_signals, injection_used
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def live(*texts: str):
    kinds = [EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN]
    return [make_entry("live", n, text, kind=kinds[n % 2]) for n, text in enumerate(texts)]


@pytest.mark.parametrize(
    ("question", "about_history", "exact"),
    [
        ("What did we decide before we moved to Postgres?", True, False),
        ("What was our original plan for the launch?", True, False),
        ("Which database do we use?", False, False),
        ("What were my exact words about the deadline?", False, True),
        ("Quote what I said about the budget, verbatim.", False, True),
    ],
)
def test_history_and_exact_wording_are_read_from_the_question(question, about_history, exact):
    signals = continuation_signals(question)
    assert (signals.about_history, signals.exact_wording) == (about_history, exact)
    assert not signals.follow_up and not signals.topic_shift  # no live session: a new one


def test_a_follow_up_shares_the_live_topic_and_a_shift_does_not():
    turns = live("The VPN gateway for Lisbon is vpn-lis-02.", "Noted: Lisbon uses vpn-lis-02.")
    assert continuation_signals("Is the Lisbon gateway in rack two?", turns).follow_up
    assert continuation_signals("And what about the second one?", turns).follow_up  # anaphoric start
    shifted = continuation_signals("Recommend a novel for my holiday.", turns)
    assert shifted.topic_shift and not shifted.follow_up
    # the embedder can see a follow-up that shares no word with the live turns
    embedder = FakeHashingEmbedder()
    same = continuation_signals("The VPN gateway for Lisbon is vpn-lis-02?", turns[:1], embedder=embedder)
    assert same.follow_up


def test_tool_turns_do_not_make_a_question_a_follow_up():
    turns = [make_entry("live", 0, "ls -la /srv/backups", kind=EntryKind.TOOL_CALL)]
    assert continuation_signals("ls the backups folder", turns) == ContinuationSignals()


def test_an_injection_is_used_when_the_reply_echoes_most_of_an_items_key_terms():
    injected = ["The staging database listens on port 6543.", "Lunch is at noon."]
    assert injection_used(injected, "Staging's database listens on port 6543, as noted.")
    assert not injection_used(injected, "I am not sure which port it is.")
    assert not injection_used([], "anything")


@pytest.mark.parametrize(
    ("question", "resume"),
    [
        ("We were cut off mid-task last time. Where did things stand?", True),
        ("Picking up after the interruption: what was left to do?", True),
        ("Where did we leave off?", True),
        ("Let's continue where we stopped yesterday.", True),
        ("Where were we?", True),
        ("The last session ended abruptly. What is the next step?", True),
        ("Our call was cut short yesterday; what remains?", True),
        ("Which database do we use?", False),
        ("Where do the backups go?", False),
        ("What did we decide about the launch?", False),
        ("Where did Caroline pick up her new hobby?", False),
        ("Is the bakery still open on Sundays?", False),
        ("Did the storm cut off the power?", False),
        ("What is the next step for the launch?", False),
        ("When the meeting ended, where did Melanie go?", False),
    ],
)
def test_a_question_that_resumes_interrupted_work_is_read_from_the_question(question, resume):
    assert continuation_signals(question).resume is resume
    assert continuation_signals(question).to_dict()["resume"] is resume
