"""The continuation signals a host reads off the conversation before it recalls.

Recall's adaptive policy and its risk and authority terms take a few facts about the turn being served
(``RecallContext``): is the question about the past, does it ask for exact wording, does it follow up the
live session's topic or shift away from it, and did the agent use what was injected at the previous turn.
A host computes them from the conversation itself, never from what the right answer is; this module is that
computation, so every host (and every experiment's harness) computes them the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lca.ledger import key_terms
from lca.types import EntryKind, TranscriptEntry

_ABOUT_HISTORY = re.compile(
    r"\b(?:used to|originally|at first|in the beginning|previous(?:ly)?|formerly|the old|the earlier|"
    r"before (?:we|i|you|that|this|the)|changed? (?:from|since)|history of|what did (?:i|we|you) "
    r"(?:say|decide|choose|pick|agree|plan)(?: on| in| at| before| first)?|what was (?:the|our|my) "
    r"(?:first|original|earlier|previous)|last (?:time|week|month|session|meeting))\b",
    re.IGNORECASE,
)
_EXACT_WORDING = re.compile(
    r"\b(?:exact(?:ly)? (?:words?|wording|phrase|phrasing|text)|verbatim|word for word|quote|what exactly did)\b",
    re.IGNORECASE,
)
_ANAPHORIC_START = re.compile(
    r"^\s*(?:and|also|then|so|but|ok(?:ay)?|what about|how about|and what|same for|one more|another)\b"
    r"|^\s*(?:it|that|this|those|these|they|them)\b",
    re.IGNORECASE,
)
_RESUME = re.compile(  # picking up interrupted work; each form names the break or the place work stood
    r"\b(?:where (?:did|do|were|are) (?:we|things|it) (?:stand|stop|leave off|left off|get to|break off)|"
    r"where (?:we|things|it) (?:stood|stand|left off|stopped)|(?:we|i|you) (?:left|leave|broke) off|"
    r"pick(?:ing)? (?:it |this |things )?(?:back )?up (?:where|after|from where)|(?:were|was|got) cut off|"
    r"(?:after|since|before) the (?:interruption|break)|(?:were|was|got) interrupted|"
    r"continue where|carry on where|resum(?:e|ing) (?:the|our|where|work)|"
    r"what (?:is|was) (?:left|still) to do|what (?:is|was) left|where were we|"
    r"(?:session|call|conversation|chat|meeting) (?:(?:ended|stopped) (?:abruptly|early|suddenly|unexpectedly)|"
    r"broke off|was cut short))\b",
    re.IGNORECASE,
)
FOLLOW_UP_COSINE = 0.35  # a question this close to a recent turn of the live session continues its topic
RECENT_TURNS = 4  # the live session's turns a follow-up is judged against
USED_SHARE = 0.5  # a reply that echoes this share of an injected item's key terms used it


@dataclass(frozen=True)
class ContinuationSignals:
    """What a host knows of the turn it serves, from the conversation alone."""

    about_history: bool = False  # asks what was so before (superseded or expired memories may answer it)
    exact_wording: bool = False  # asks for the words as said: the verbatim transcript outranks derived memory
    follow_up: bool = False  # asked in the live session, on its topic
    topic_shift: bool = False  # asked in the live session, on another topic
    resume: bool = False  # asks to pick up interrupted work: where it stood when the last session ended

    def to_dict(self) -> dict[str, bool]:
        return {
            "about_history": self.about_history,
            "exact_wording": self.exact_wording,
            "follow_up": self.follow_up,
            "topic_shift": self.topic_shift,
            "resume": self.resume,
        }


def continuation_signals(question: str, live: Sequence[TranscriptEntry] = (), *, embedder=None) -> ContinuationSignals:
    """The signals for ``question`` asked after the ``live`` session's turns (empty: a new session). A follow-up
    shares a content word with a recent turn, starts anaphorically ("and what about ..."), or is within
    ``FOLLOW_UP_COSINE`` of a recent turn by ``embedder``; any other question asked in a live session shifts
    its topic."""
    recent = [e for e in live if e.kind in (EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN)][-RECENT_TURNS:]
    follow_up = False
    if recent:
        words = key_terms(question)
        follow_up = bool(_ANAPHORIC_START.search(question)) or any(words & key_terms(e.content) for e in recent)
        if not follow_up and embedder is not None:
            query = np.asarray(embedder.embed_query(question), dtype=np.float32)
            turns = np.asarray(embedder.embed([e.content for e in recent]), dtype=np.float32)
            follow_up = bool((turns @ query).max() >= FOLLOW_UP_COSINE)
    return ContinuationSignals(
        about_history=bool(_ABOUT_HISTORY.search(question)),
        exact_wording=bool(_EXACT_WORDING.search(question)),
        follow_up=follow_up,
        topic_shift=bool(recent) and not follow_up,
        resume=bool(_RESUME.search(question)),
    )


def echoes(text: str, said: frozenset[str]) -> bool:
    """Whether ``said`` (the key terms of what the agent said) holds at least ``USED_SHARE`` of ``text``'s key
    terms: the one test of use, for an injected item (here) and for a memory in a consolidation span."""
    terms = key_terms(text)
    return bool(terms) and len(terms & said) / len(terms) >= USED_SHARE


def injection_used(injected: Sequence[str], reply: str) -> bool:
    """Whether a reply used what was injected before it: it echoes one injected item (``echoes``)."""
    said = key_terms(reply)
    return any(echoes(text, said) for text in injected)
