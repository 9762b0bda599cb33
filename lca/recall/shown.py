"""What of a chosen candidate recall shows: the passage of a long turn the query is about, and the turn a reply
answers.

A long turn (an assistant's answer runs to a page) would take a quarter of the budget whole, so it is shown
within ``RecallConfig.item_char_cap``: its opening sentence (what it is about) and the sentences that hold the
query's terms, in their order, with "[...]" where text was left out; with no query term in it, its opening.
The pointer still names the whole verbatim turn. A reply read without what it answers ("make those £20") says
less than it did, so a turn brings the turn indexed right before it in its session (``RecallConfig.exchanges``).
Each item is headed by ``item_label``, the one header recall counts against the budget and every host shows.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from lca.recall.records import RecallContext, ScoredCandidate
from lca.recall.terms import ANSWERS_REPLACED
from lca.types import shown_entry_key

GAP = " [...] "
_SEGMENT = re.compile(r"[^\n]*?(?:[.!?]+(?=\s|$)[ \t]*\n?|\n|$)")  # a sentence, or a line (a list item, a table row)
_WORD = re.compile(r"(?u)\b\w\w+\b")  # words as the lexical index splits them (bm25s's default pattern)
_STOPWORDS = frozenset(STOPWORDS_EN)  # ... and the stopwords it drops
_local = threading.local()  # a PyStemmer stemmer is not thread-safe: one per thread


def _stemmed(text: str) -> list[tuple[int, str]]:
    """(offset, stem) of each of the text's terms as the lexical index reads them: lower-cased words of two or more
    characters, stopwords dropped, English (Snowball) stems."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    words = [(m.start(), w) for m in _WORD.finditer(text) if (w := m.group().lower()) not in _STOPWORDS]
    return list(zip((at for at, _ in words), stemmer.stemWords([w for _, w in words]), strict=True))


def term_stems(text: str) -> frozenset[str]:
    """The text's terms as the lexical index reads them (``_stemmed``)."""
    return frozenset(stem for _, stem in _stemmed(text))


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


def excerpt(text: str, cap: int, query_terms: frozenset[str]) -> tuple[str, bool]:
    """``text`` within ``cap`` characters: whole if it fits; else its opening sentence and then the sentences
    holding the most distinct query terms (ties: the earlier), shown in their order with gaps marked; a text no
    sentence of which after the first holds a query term is trimmed from its start."""
    if len(text) <= cap:
        return text, False
    spans = segments(text)
    if not query_terms or len(spans) < 2:
        return trim(text, cap)
    found: list[set[str]] = [set() for _ in spans]  # the query's terms in each sentence, the text stemmed once
    starts = [a for a, _ in spans]
    for at, stem in _stemmed(text):
        if stem in query_terms:
            found[max(0, bisect_right(starts, at) - 1)].add(stem)
    hits = [len(f) for f in found]
    if not any(hits[1:]):
        return trim(text, cap)
    kept = {0} if spans[0][1] - spans[0][0] <= cap // 3 else set()
    size = [len(text[a:b].strip()) for a, b in spans]  # a sentence's own length: the join can only add to it
    used = sum(size[k] for k in kept)
    for i in sorted(range(1, len(spans)), key=lambda i: (-hits[i], i)):
        if not hits[i]:
            break
        if used + size[i] <= cap and len(_join(text, spans, kept | {i})) <= cap:
            kept.add(i)
            used += size[i]
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


def exchange_prompts(
    scored: Sequence[ScoredCandidate],
    before: Mapping[str, str],
    offerable: Callable[[str], bool],
) -> dict[str, ScoredCandidate]:
    """Each transcript candidate's prompt, by chunk id: the chunk indexed right before it in its session, of the
    turn before its own (the turn it answers, or follows; ``before``, as ``IndexStore.chunks_before`` reads it), where
    that chunk is a candidate too and ``offerable`` (of its ``why_not``) lets it be shown. A reply to a turn an
    explicit event replaced is never brought: K marks it for likely restating the replaced value (a reply to a
    superseded decision is filtered outright), and a prompt would come in on the pick's merit, past that mark."""
    offered = {
        c.chunk_id: c
        for c in scored
        if c.source_type == "transcript" and offerable(c.why_not or "") and ANSWERS_REPLACED not in c.risk_reasons
    }
    return {chunk_id: offered[b] for chunk_id, b in before.items() if b in offered}


WILDCARD_NOTE = "wildcard: dormant record offered for exploration"


def item_label(number: int, item: ScoredCandidate) -> str:
    """The header of a recalled item: its number, the turn or memory it comes from, who spoke where a subagent or a
    peer agent did (``speaker_note``), the authority row where the source does not already say it, when it was said
    (date and minute as recorded) and its weight. The character span is left to the result's pointer: a header costs
    budget on every item, and at about 55 tokens (a full ISO time, the span, three decimals, "transcript" twice) it
    took a third of a short turn's cost. A turn whose entry id names its session (``<session>:<n>``, as every importer
    and the harness write them) is named by its entry id alone (``shown_pointer``). A prompt brought by ``exchanges``
    shows neither time nor weight: it sits right before the turn that brought it, whose header gives the time, and it
    was brought for that turn, not for its own weight."""
    where = shown_pointer(item.source)
    parts = [WILDCARD_NOTE] if item.wildcard else []
    if item.marker:  # never silently: a turn a later one replaced says so, with what replaced it and when
        parts.append(item.marker)
    if item.said_in:  # a turn from another project or channel says where it belongs
        parts.append(item.said_in)
    if (speaker := speaker_note(item.subagent_id, item.peer_agent)) is not None:
        parts.append(speaker)
    if item.authority_key != item.source_type and item.peer_agent is None:  # a peer's note names its row
        parts.append(item.authority_key)
    if not item.prompt_of:
        if item.timestamp:
            parts.append(short_time(item.timestamp))
        parts.append(f"weight {item.score:.2f}")
    return f"[{number}] {where} ({', '.join(parts)})" if parts else f"[{number}] {where}"


PEER_AGENT_NOTE = "observation from peer agent"


def speaker_note(subagent_id: str | None, peer_agent: str | None) -> str | None:
    """Who spoke a recalled turn, as its header says it: a peer agent's message is shown as what it is, an observation
    to weigh and never an instruction ("observation from peer agent relay-bot"); a subagent's turn names the subagent
    ("subagent planner"); None for the user's and the agent's own turns."""
    if peer_agent:
        return f"{PEER_AGENT_NOTE} {peer_agent}"
    if subagent_id:
        return f"subagent {subagent_id}"
    return None


def shown_pointer(source: str) -> str:
    """A candidate's pointer key as its header shows it: without the span, and its transcript entry as
    ``shown_entry_key`` shows it (``transcript:s7#s7:3`` -> ``transcript:s7:3``); any other key whole."""
    where = source.split("[", 1)[0]
    kind, sep, key = where.partition(":")
    return f"{kind}:{shown_entry_key(key)}" if sep else where


def short_time(timestamp: str) -> str:
    """An ISO time to its date and minute as recorded ("2026-04-02T18:40:00+01:00" -> "2026-04-02 18:40"); any
    other form unchanged."""
    if len(timestamp) >= 16 and timestamp[10] == "T" and timestamp[13] == ":":
        return f"{timestamp[:10]} {timestamp[11:16]}"
    return timestamp


def elsewhere(meta: Mapping[str, Any], context: RecallContext) -> str | None:
    """Where a turn was said, when that is not where recall is asked: another project, or another kind of channel
    ("project elm-rd, team channel"); None when it was said here or where is not known."""
    parts = []
    project = meta.get("project")
    if context.project and project and str(project).lower() != context.project.lower():
        parts.append(f"project {project}")
    visibility = meta.get("visibility")
    if context.channel and visibility and str(visibility).lower() != context.channel.lower():
        parts.append(f"{visibility} channel")
    return ", ".join(parts) or None
