"""Hard truncation: the agent keeps only the most recent turns of the conversation that fit its budget.

The baseline a long task falls back on when its context is cut and nothing was kept elsewhere (inspect's
``CompactionTrim`` does the same to a live message list): no identity, no summary, no recall; the newest
turns of the history, verbatim, oldest first and newest last, as many as the budget holds.
"""

from __future__ import annotations

from conditions.base import Condition, ContextPacket, InjectedItem, Probe, Session, register_condition, render_items
from lca.types import EntryKind, TranscriptEntry

_CONVERSATION = {EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN, EntryKind.TOOL_CALL, EntryKind.TOOL_RESULT}
_SPEAKER = {"user_turn": "user", "assistant_turn": "assistant"}


@register_condition
class Truncation(Condition):
    """The most recent turns of the history that fit the budget, verbatim, newest last."""

    name = "truncation"

    def __init__(self, budget_tokens: int = 1200) -> None:
        self.budget_tokens = budget_tokens

    def reset(self) -> None:
        super().reset()
        self.entries: list[TranscriptEntry] = []

    def ingest(self, session: Session) -> None:
        self.entries.extend(e for e in session.entries if e.kind in _CONVERSATION and e.content.strip())

    def build_context(self, probe: Probe) -> ContextPacket:
        count = self.runtime.count_tokens
        kept: list[InjectedItem] = []  # newest first while choosing
        used = 0
        for entry in reversed(self.entries):
            item = _item(entry, count)
            if used + item.tokens > self.budget_tokens:
                break
            kept.append(item)
            used += item.tokens
        items = kept[::-1]
        while items and count(render_items(items)) > self.budget_tokens:  # labels and separators cost tokens too
            items.pop(0)  # the oldest goes first: truncation keeps the tail
        return self._packet(probe, items, notes={"turns_kept": len(items), "turns_in_history": len(self.entries)})


def _item(entry: TranscriptEntry, count) -> InjectedItem:
    speaker = _SPEAKER.get(entry.kind.value, entry.kind.value)
    text = f"{speaker}: {' '.join(entry.content.split())}"
    pointer = f"{entry.session_id}#{entry.id}"
    return InjectedItem("transcript", pointer, text, count(text), pointers=(pointer,))
