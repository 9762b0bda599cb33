"""What of a chosen candidate recall shows: the passage of a long turn the query is about, and the turn a reply
answers.

A long turn (an assistant's answer runs to a page) would take a quarter of the budget whole, so it is shown
within ``RecallConfig.item_char_cap``: its opening sentence (what it is about) and the sentences that hold the
query's terms, in their order, with "[...]" where text was left out; with no query term in it, its opening.
The pointer still names the whole verbatim turn. A reply read without what it answers ("make those £20") says
less than it did, so a turn brings the turn right before it in its session (``RecallConfig.exchanges``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from lca.recall.records import ScoredCandidate

GAP = " [...] "
_SEGMENT = re.compile(r"[^\n]*?(?:[.!?]+(?=\s|$)[ \t]*\n?|\n|$)")  # a sentence, or a line (a list item, a table row)
TermReader = Callable[[Sequence[str]], list[np.ndarray]]  # texts -> each one's indexed term ids


def trim(text: str, cap: int) -> tuple[str, bool]:
    """Shorten to ``cap`` characters at a word boundary, marked, so a trimmed item never reads as whole."""
    if len(text) <= cap:
        return text, False
    cut = text.rfind(" ", 0, cap - 6)
    cut = cut if cut > cap // 2 else cap - 6
    return text[:cut].rstrip() + " [...]", True


def segments(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence or line of ``text``, in order."""
    return [(m.start(), m.end()) for m in _SEGMENT.finditer(text) if m.group(0).strip()]


def excerpt(text: str, cap: int, query_terms: set[int], read_terms: TermReader | None) -> tuple[str, bool]:
    """``text`` within ``cap`` characters: whole if it fits; else its opening sentence and then the sentences
    holding the most distinct query terms (ties: the earlier), shown in their order with gaps marked; a text no
    sentence of which holds a query term, or one recall cannot read terms of, is trimmed from its start."""
    if len(text) <= cap:
        return text, False
    spans = segments(text)
    if not (query_terms and read_terms and len(spans) > 1):
        return trim(text, cap)
    terms = read_terms([text[a:b] for a, b in spans])
    hits = [len(query_terms.intersection(t.tolist())) for t in terms]
    if not any(hits[1:]):
        return trim(text, cap)
    kept = {0} if spans[0][1] - spans[0][0] <= cap // 3 else set()
    for i in sorted(range(1, len(spans)), key=lambda i: (-hits[i], i)):
        if not hits[i]:
            break
        if _length(text, spans, kept | {i}) <= cap:
            kept.add(i)
    if not kept - {0}:  # not one query sentence fits the cap whole: the opening it is
        return trim(text, cap)
    return _join(text, spans, kept), True


def _join(text: str, spans: list[tuple[int, int]], kept: set[int]) -> str:
    """The kept sentences in their order; a line break kept where the text had one, "[...]" where text was cut."""
    order = sorted(kept)
    out = GAP.lstrip() if order[0] > 0 else ""
    for n, i in enumerate(order):
        if n:
            before = order[n - 1]
            out += (
                ("\n" if text[spans[before][0] : spans[before][1]].endswith("\n") else " ") if i == before + 1 else GAP
            )
        out += text[spans[i][0] : spans[i][1]].strip()
    return out + (GAP.rstrip() if order[-1] < len(spans) - 1 else "")


def _length(text: str, spans: list[tuple[int, int]], kept: set[int]) -> int:
    return len(_join(text, spans, kept))


def span_start(source: str) -> int:
    """Where a chunk starts in its turn, from its pointer key's span ("...#e1[812:1600]" -> 812; none: 0)."""
    span = source.rpartition("[")[2]
    head = span.split(":", 1)[0]
    return int(head) if "]" in span and head.isdigit() else 0


def turn_of(source: str) -> tuple[str, str]:
    """(session, entry) of a transcript candidate's pointer key."""
    session, _, entry = source.split(":", 1)[-1].split("[", 1)[0].partition("#")
    return session, entry


def exchange_prompts(
    scored: Sequence[ScoredCandidate], turn_before: Callable[[str, str], str | None], offerable: Callable[[str], bool]
) -> Callable[[ScoredCandidate], ScoredCandidate | None]:
    """A candidate's prompt: the candidate chunk nearest before it of the turn right before its turn in its session
    (the turn it answers, or follows), where ``offerable`` (of a candidate's ``why_not``) lets that turn be shown.
    A turn's later chunks follow its own first one, so only a first chunk has a prompt. Asked of the picks alone,
    so a recall reads no session beyond theirs."""
    offered: dict[tuple[str, str], ScoredCandidate] = {}  # a turn -> its last chunk among the candidates
    for c in scored:
        if c.source_type == "transcript" and offerable(c.why_not or ""):
            turn = turn_of(c.source)
            held = offered.get(turn)
            if held is None or span_start(c.source) > span_start(held.source):
                offered[turn] = c

    def prompt(c: ScoredCandidate) -> ScoredCandidate | None:
        if not offered or c.source_type != "transcript" or span_start(c.source) > 0:
            return None
        session, entry = turn_of(c.source)
        before = turn_before(session, entry)
        return offered.get((session, before)) if before else None

    return prompt
