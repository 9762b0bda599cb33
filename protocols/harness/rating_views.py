"""What a rater of a registered judged measure is shown for one sample, written by the scorer that knows it.

A judged measure that a protocol's ``eval.yaml`` declares (``kind: judged``) names the scorer that prepares its
items: that scorer puts, in its Score's metadata under ``RATING_VIEWS``, one view per judged measure that applies
to the sample: ``shown`` (what the rater reads before the answer: the rule in force and the request, the
assistant's earlier replies and the question, where the work stood before a cut) and, where the answer to rate is
not the sample's final output, ``answer``. A sample without a view for a measure is not rated for it.
``protocols.study.rubrics.judged_items`` reads the views back from the logs; the condition is never in a view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lca.secrets import redacted

RATING_VIEWS = "rating_views"
EXCERPT_WORDS = 80  # an excerpt of a turn shown to a rater: its first words, then an ellipsis


def rating_view(shown: str, answer: str | None = None) -> dict[str, str]:
    """One view; secret-shaped strings are masked (``lca.secrets.redacted``), as in every explanation."""
    view = {"shown": redacted(shown)}
    if answer is not None:
        view["answer"] = redacted(answer)
    return view


def excerpt(text: str, words: int = EXCERPT_WORDS) -> str:
    parts = str(text).split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def quoted(texts: Iterable[str], words: int = EXCERPT_WORDS) -> str:
    """Turns as a rater reads them: each excerpted on its own line, in quotation marks."""
    return "\n".join(f'- "{excerpt(t, words)}"' for t in texts if str(t).strip()) or "- (nothing)"


def history_turns(history: Mapping[str, Any], kind: str = "assistant_turn") -> list[str]:
    """The contents of a sample's history entries of one kind (``assistant_turn``, ``user_turn``), in order."""
    return [
        str(entry.get("content", ""))
        for session in history.get("sessions") or ()
        for entry in session.get("entries") or ()
        if entry.get("kind") == kind
    ]
