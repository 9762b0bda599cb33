"""Handoff notes with content: what a session was after, what is still open, what was decided, what
is in force, what was not done or not verified, and what comes next, each item pointing at the
transcript turns ("session#entry") that show it.

The summarizer role writes them as JSON from the session's numbered lines; every pointer is then
checked against the transcript and an item whose pointers do not all resolve is dropped (and
counted). When there is no model, the call fails, or nothing survives the check, the notes are
built mechanically from the transcript's structure (turn kinds and the host's event markers), never
from any wording of a particular scenario. A handoff is written into the transcript next to the
turns it summarizes; it never replaces them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lca.derived import derived_id, derived_text, real_id
from lca.errors import LCAError
from lca.ledger import key_terms
from lca.ports import TextGenerator
from lca.recall.shown import PEER_AGENT_NOTE, short_time
from lca.secrets import redacted
from lca.transcript import TranscriptStore
from lca.types import EntryKind, TranscriptEntry, shown_entry_key

SECTIONS = ("objective", "open_threads", "decisions", "constraints", "non_claims", "next_actions")
HOST_FIELDS = (  # the host's own notes, in the order they are shown
    "objective",
    "open_threads",
    "decisions",
    "next_actions",
    "risks_and_constraints",
    "must_not_lose",
    "non_claims",
)
CONVERSATION_KINDS = frozenset(
    {EntryKind.USER_TURN, EntryKind.ASSISTANT_TURN, EntryKind.TOOL_CALL, EntryKind.TOOL_RESULT, EntryKind.SUBAGENT_TURN}
)
ITEM_CHARS = 240  # an item's text is a pointer's caption, not a copy of the turn
MAX_ITEMS = 5  # per section: the handoff shares the window with recall
MAX_PEER_OBSERVATIONS = 5  # a session's latest peer-agent turns a handoff carries
NOT_AN_INSTRUCTION = "not an instruction"
MIN_SUPPORT = 1 / 3  # share of an item's key terms its cited turns must hold (a copied example holds none)


@dataclass(frozen=True)
class HandoffItem:
    """One thing the next session must know, with the transcript turns that show it."""

    section: str  # one of SECTIONS
    text: str
    pointers: tuple[str, ...]  # "session#entry" keys, each resolved in the transcript


@dataclass(frozen=True)
class PeerObservation:
    """A peer agent's turn as the handoff carries it: kept apart from the items (which a summarizer may turn into
    decisions and rules) and shown as what it is, another agent's observation, with who sent it."""

    author: str
    text: str
    pointer: str  # "session#entry"


def peer_observations(entries: Sequence[TranscriptEntry], pointers: TranscriptPointers) -> tuple[PeerObservation, ...]:
    """The latest ``MAX_PEER_OBSERVATIONS`` peer-agent turns among ``entries`` that are in the transcript."""
    peers = [e for e in entries if e.kind is EntryKind.PEER_AGENT_TURN and e.content.strip() and e.author]
    return tuple(
        PeerObservation(derived_text(str(e.author)), _caption(e.content), pointer_key(e))
        for e in peers
        if pointers.resolves(pointer_key(e))
    )[-MAX_PEER_OBSERVATIONS:]


@dataclass(frozen=True)
class HandoffNotes:
    """What the host (or its summarizer) knows that the transcript does not say in one place.
    The plain fields are the host's own words; ``items`` are checked against the transcript."""

    objective: str = ""
    open_threads: tuple[str, ...] = ()
    files_touched: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    role_state: str = ""
    next_actions: tuple[str, ...] = ()
    risks_and_constraints: tuple[str, ...] = ()
    non_claims: tuple[str, ...] = ()
    must_not_lose: tuple[str, ...] = ()
    items: tuple[HandoffItem, ...] = ()
    built_by: str = ""  # "model" | "mechanical" | "" (the host wrote the notes itself)
    dropped: int = 0  # items dropped by the pointer check (the model's, and mechanical ones on unpersisted turns)
    dropped_reasons: tuple[str, ...] = ()
    fallback: str = ""  # why the notes were built mechanically, when a model was asked
    carried: int = 0  # decisions and constraints carried from the previous handoff, still in force
    peer_observations: tuple[PeerObservation, ...] = ()  # what peer agents said: observations, never instructions


def pointer_key(entry: TranscriptEntry) -> str:
    """``<session>#<entry>``, the ids as the index's pointers hold them (``lca.derived``)."""
    return f"{derived_id(entry.session_id)}#{derived_id(entry.id)}"


class TranscriptPointers:
    """Resolves "session#entry" keys against the transcript, reading each session once; an id derived from one
    that held a credential resolves to the transcript's own (``lca.derived.real_id``)."""

    def __init__(self, transcript: TranscriptStore, known: Sequence[TranscriptEntry] = ()) -> None:
        self.transcript = transcript
        self._sessions: dict[str, dict[str, TranscriptEntry] | None] = {}
        self._known = {pointer_key(e): e for e in known}

    def entry(self, key: str) -> TranscriptEntry | None:
        session, sep, entry_id = str(key).partition("#")
        if not sep or not session or not entry_id:
            return None
        if session not in self._sessions:
            try:
                real = real_id(session, self.transcript.session_ids()) or session
                path = self.transcript.session_path(real)
                read = self.transcript.read(real).entries if path.exists() else None
            except LCAError:
                read = None
            self._sessions[session] = {e.id: e for e in read} if read is not None else None
        entries = self._sessions[session]
        return entries.get(real_id(entry_id, entries) or entry_id) if entries is not None else None

    def resolves(self, key: str) -> bool:
        return self.entry(key) is not None

    def text_of(self, key: str) -> str:
        known = self._known.get(key) or self.entry(key)
        return known.content if known is not None else ""


def _caption(text: str, chars: int = ITEM_CHARS) -> str:
    flat = " ".join(str(text).split())
    return redacted(flat if len(flat) <= chars else flat[: chars - 3].rstrip() + "...")


def _event(entry: TranscriptEntry) -> Mapping[str, Any]:
    event = entry.meta.get("event") if isinstance(entry.meta, Mapping) else None
    return event if isinstance(event, Mapping) else {}


# ---- the model's handoff ---------------------------------------------------------------------
TAIL_QUOTE_CHARS = 400  # a handoff quotes each turn of its session's tail up to this many characters
MAX_CITED = 4  # lines an item may cite: a small model otherwise counts 1, 2, 3, ... until its budget ends
_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": ITEM_CHARS},
        "lines": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": MAX_CITED},
    },
    "required": ["text", "lines"],
}
HANDOFF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "objective": _ITEM_SCHEMA,
        **{s: {"type": "array", "items": _ITEM_SCHEMA, "maxItems": MAX_ITEMS} for s in SECTIONS[1:]},
    },
    "required": list(SECTIONS),
}
HANDOFF_SYSTEM = (
    "You write the handoff notes a colleague needs to continue this work in a new session. Read the numbered "
    "conversation lines and answer with one JSON object with the keys objective, open_threads, decisions, "
    "constraints, non_claims, next_actions. objective is one item; the others are lists of items (an empty list "
    'when there is nothing). An item is {"text": "...", "lines": [numbers of the lines that show it]}. '
    "open_threads: questions or requests not answered or not finished. decisions: choices made (say which earlier "
    "choice a decision replaces). constraints: rules and limits in force. non_claims: what was said would be done "
    "or checked but is not shown done or verified. next_actions: what to do next. Cite only the numbers of lines "
    "shown, use the words of the lines you cite, and do not repeat an item in two sections. Write only the JSON."
)


def _numbered_lines(entries: Sequence[TranscriptEntry], max_lines: int) -> tuple[list[str], dict[int, str]]:
    """The session as "[n] speaker: text" lines (the newest ``max_lines``), events noted, credentials redacted."""
    shown = [e for e in entries if e.kind in CONVERSATION_KINDS and e.content.strip()][-max_lines:]
    numbers = {pointer_key(e): n for n, e in enumerate(shown, 1)}
    lines, keys = [], {}
    for n, entry in enumerate(shown, 1):
        speaker = {"user_turn": "user", "assistant_turn": "assistant"}.get(entry.kind.value, entry.kind.value)
        event, note = _event(entry), ""
        target = numbers.get(str(event.get("of", "")))
        where = f"line {target}" if target else "an earlier turn"
        if event.get("type") == "supersedes":
            note = f" (replaces {where})"
        elif event.get("type") == "correction":
            note = f" (corrects {where}" + (f": {event['right']}" if event.get("right") else "") + ")"
        elif event.get("type") == "approval":
            note = f" (approves {where})"
        elif event.get("type") == "interruption":
            note = " (the work was interrupted here)"
        lines.append(f"[{n}] {speaker}: {_caption(entry.content, 600)}{redacted(note)}")
        keys[n] = pointer_key(entry)
    return lines, keys


def _parse_json_object(text: str) -> dict[str, Any] | None:
    text = (text or "").strip()
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _checked_items(
    answer: Mapping[str, Any], keys: Mapping[int, str], pointers: TranscriptPointers
) -> tuple[list[HandoffItem], list[str]]:
    """The model's items whose every pointer resolves in the transcript and whose cited turns hold a
    third of the item's key terms, each text once; the others as drop reasons."""
    items: list[HandoffItem] = []
    drops: list[str] = []
    seen: dict[str, str] = {}  # the same text again in another section is a degenerate answer, not a second item
    for section in SECTIONS:
        raw = answer.get(section)
        listed = [] if raw is None else raw if isinstance(raw, list) else [raw]
        kept = 0
        for i, item in enumerate(listed, 1):
            where = f"{section}[{i}]"
            text = item.get("text") if isinstance(item, Mapping) else item
            if not isinstance(text, str) or not text.strip():
                drops.append(f"{where}: no text")
                continue
            cited: list[str] = []
            bad = None
            lines = item.get("lines", []) if isinstance(item, Mapping) else []
            keys_given = item.get("pointers", []) if isinstance(item, Mapping) else []
            for line in lines if isinstance(lines, list) else [lines]:
                number = line if isinstance(line, int) and not isinstance(line, bool) else None
                if number is None and isinstance(line, str) and line.strip().isdigit():
                    number = int(line)
                if number is None or number not in keys:
                    bad = f"line {line!r} is not a shown line"
                    break
                cited.append(keys[number])
            for key in keys_given if isinstance(keys_given, list) else [keys_given]:
                if bad is None and not (isinstance(key, str) and pointers.resolves(key)):
                    bad = f"pointer {str(key)[:80]!r} is not in the transcript"
                cited.append(str(key))
            if bad is None and not cited:
                bad = "cites no line"
            if bad is None and any(not pointers.resolves(k) for k in cited):
                bad = "a cited line is not in the transcript"
            if bad is None:
                terms = key_terms(text)
                held = key_terms(" ".join(pointers.text_of(k) for k in cited))
                support = len(terms & held) / len(terms) if terms else 0.0
                if support < MIN_SUPPORT:
                    bad = f"its cited lines hold {support:.0%} of its key terms"
                else:  # a cited line sharing no key term with the item does not show it: not a pointer
                    cited = [k for k in cited if key_terms(pointers.text_of(k)) & terms]
            said = " ".join(text.lower().split())
            if bad is None and said in seen:
                bad = f"repeats the {seen[said]} item"
            if bad is not None:
                drops.append(redacted(f"{where}: {bad}"))
                continue
            if kept >= (1 if section == "objective" else MAX_ITEMS):
                drops.append(f"{where}: over the {MAX_ITEMS}-item limit")
                continue
            kept += 1
            seen[said] = section
            items.append(HandoffItem(section, _caption(text), tuple(dict.fromkeys(cited))))
    return items, drops


def _ask_model(generator: TextGenerator, messages: list[dict[str, str]], max_tokens: int) -> str:
    """With the JSON schema when the generator takes one (constrained decoding), else without it."""
    try:
        return generator.generate(messages, max_tokens=max_tokens, json_schema=HANDOFF_SCHEMA)
    except TypeError:
        return generator.generate(messages, max_tokens=max_tokens)


# ---- the mechanical handoff ------------------------------------------------------------------
_PROMISE = re.compile(
    r"\b(?:I(?:'ll| will| am going to|'m going to| shall)|we(?:'ll| will| are going to)|let me|"
    r"will (?:be )?(?:do|check|verif|test|run|confirm|send|fix|update|look)\w*)\b",
    re.IGNORECASE,
)


def mechanical_items(
    entries: Sequence[TranscriptEntry],
    pointers: TranscriptPointers,
    *,
    constraint: Callable[[TranscriptEntry], bool] | None = None,
    filler: Callable[[TranscriptEntry], bool] | None = None,
) -> list[HandoffItem]:
    """Items from the transcript's structure: the last user request, user turns no assistant turn
    followed, the host's event markers (supersedes, approval, correction, interruption), turns the
    host or the ``constraint`` rule marks as standing rules, and assistant turns that said something
    would be done (nothing in a transcript shows it verified, so they are non-claims)."""
    turns = [e for e in entries if e.kind in CONVERSATION_KINDS and e.content.strip()]

    def substantive(e: TranscriptEntry) -> bool:
        return not (filler and filler(e)) and _event(e).get("type") not in ("approval", "interruption")

    def of(e: TranscriptEntry) -> tuple[str | None, str]:
        key = str(_event(e).get("of", ""))
        return (key, pointers.text_of(key)) if key and pointers.resolves(key) else (None, "")

    out: dict[str, list[HandoffItem]] = {s: [] for s in SECTIONS}
    users = [e for e in turns if e.kind is EntryKind.USER_TURN]
    requests = [e for e in users if substantive(e)] or users
    if requests:
        out["objective"].append(HandoffItem("objective", _caption(requests[-1].content), (pointer_key(requests[-1]),)))
    last_reply = max((i for i, e in enumerate(turns) if e.kind is EntryKind.ASSISTANT_TURN), default=-1)
    for e in turns[last_reply + 1 :]:
        if e.kind is EntryKind.USER_TURN and substantive(e):
            out["open_threads"].append(
                HandoffItem("open_threads", "unanswered: " + _caption(e.content), (pointer_key(e),))
            )
            out["next_actions"].append(
                HandoffItem("next_actions", "answer: " + _caption(e.content, 160), (pointer_key(e),))
            )
    # what is no longer in force: a handoff carries what holds now, and points only at that (the replaced
    # decision and the corrected turn stay in the transcript, for a question about history)
    replaced_keys = {of(e)[0] for e in turns if _event(e).get("type") in ("supersedes", "correction")} - {None}
    for e in turns:
        event, key = _event(e), pointer_key(e)
        target, target_text = of(e)
        kind = event.get("type")
        if kind == "supersedes":
            replaced = (
                f" (replaces the earlier decision {shown_entry_key(target)})"
                if target
                else " (replaces an earlier decision)"
            )
            out["decisions"].append(HandoffItem("decisions", _caption(e.content) + replaced, (key,)))
        elif kind == "approval" and target and target not in replaced_keys:
            out["decisions"].append(HandoffItem("decisions", "approved: " + _caption(target_text), (key, target)))
        elif kind == "correction":
            right = event.get("right") or e.content
            out["constraints"].append(HandoffItem("constraints", "corrected: " + _caption(str(right)), (key,)))
        elif kind == "interruption":
            out["open_threads"].append(HandoffItem("open_threads", "interrupted after: " + _caption(e.content), (key,)))
            cut = shown_entry_key(key)
            out["next_actions"].append(HandoffItem("next_actions", f"resume the work cut after {cut}", (key,)))
        if key in replaced_keys:  # a rule or a promise a later event corrected or superseded no longer holds
            continue
        if e.kind is EntryKind.USER_TURN and kind is None and constraint is not None and constraint(e):
            out["constraints"].append(HandoffItem("constraints", _caption(e.content), (key,)))
        if e.kind is EntryKind.ASSISTANT_TURN and _PROMISE.search(e.content):
            text = "said it would, not shown done or verified: " + _caption(e.content, 180)
            out["non_claims"].append(HandoffItem("non_claims", text, (key,)))
    return [item for s in SECTIONS for item in out[s][-MAX_ITEMS:]]


# ---- the builder -----------------------------------------------------------------------------
def build_handoff(
    entries: Sequence[TranscriptEntry],
    *,
    transcript: TranscriptStore,
    generator: TextGenerator | None = None,
    constraint: Callable[[TranscriptEntry], bool] | None = None,
    filler: Callable[[TranscriptEntry], bool] | None = None,
    max_lines: int = 60,
    max_tokens: int = 600,
) -> HandoffNotes:
    """The summarizer's notes over ``entries`` (a session's turns), checked against ``transcript``;
    the mechanical notes when there is no generator, it fails, its answer holds no JSON object, or
    fewer of its items pass the check than fail it (none passing included)."""
    pointers = TranscriptPointers(transcript, entries)
    peers = peer_observations(entries, pointers)
    drops: list[str] = []
    fallback = "no summarizer"
    if generator is not None:
        lines, keys = _numbered_lines(entries, max_lines)
        if not lines:
            fallback = "no conversation lines to summarize"
        else:
            messages = [
                {"role": "system", "content": HANDOFF_SYSTEM},
                {"role": "user", "content": "Conversation lines:\n" + "\n".join(lines) + "\n\nWrite the handoff JSON."},
            ]
            try:
                reply = _ask_model(generator, messages, max_tokens)
            except Exception as exc:  # a failed summarizer must not lose the handoff
                reply, fallback = "", redacted(f"the summarizer failed: {type(exc).__name__}: {exc}")[:200]
            else:
                fallback = "no JSON object in the summarizer's output"
            answer = _parse_json_object(reply)
            if answer is not None:
                items, drops = _checked_items(answer, keys, pointers)
                items, stale = _in_force(items, entries)
                drops += stale
                if items and len(drops) <= len(items):
                    return HandoffNotes(
                        items=tuple(items),
                        built_by="model",
                        dropped=len(drops),
                        dropped_reasons=tuple(drops),
                        peer_observations=peers,
                    )
                # an answer that fails the check more often than it passes is not trusted for what passed
                fallback = f"{len(items)} of the summarizer's items passed the check, {len(drops)} failed"
    items = []
    for item in mechanical_items(entries, pointers, constraint=constraint, filler=filler):
        if all(pointers.resolves(p) for p in item.pointers):  # a turn the host never persisted is no evidence
            items.append(item)
        else:
            drops.append(
                redacted(f"{item.section} (mechanical): a pointer of {item.pointers} is not in the transcript")
            )
    return HandoffNotes(
        items=tuple(items),
        built_by="mechanical",
        dropped=len(drops),
        dropped_reasons=tuple(drops),
        fallback=fallback,
        peer_observations=peers,
    )


def _replaced_keys(entries: Sequence[TranscriptEntry]) -> set[str]:
    """The pointer keys of the turns an event among ``entries`` corrected or superseded."""
    return {str(_event(e).get("of")) for e in entries if _event(e).get("type") in ("supersedes", "correction")}


def _in_force(items: Sequence[HandoffItem], entries: Sequence[TranscriptEntry]) -> tuple[list[HandoffItem], list[str]]:
    """The items with their pointers to turns a later event corrected or superseded removed (a handoff carries
    what holds now); an item left pointing at nothing is dropped, with its reason."""
    replaced = _replaced_keys(entries)
    kept, drops = [], []
    for item in items:
        live = tuple(p for p in item.pointers if p not in replaced)
        if live:
            kept.append(HandoffItem(item.section, item.text, live) if live != item.pointers else item)
        else:
            drops.append(redacted(f"{item.section}: rests only on a turn a later event corrected or superseded"))
    return kept, drops


CARRIED_SECTIONS = ("decisions", "constraints")  # what holds until an event replaces it


def carry_in_force(
    notes: HandoffNotes, previous: TranscriptEntry | None, entries: Sequence[TranscriptEntry]
) -> HandoffNotes:
    """``notes`` with the ``previous`` handoff's decisions and constraints that still hold. A rule set sessions ago
    ("never call the yarn organic") binds a task that shares no word with it, and a decision that replaced
    another ("change of plan: the River Room") answers "where was it held in the end?" in words it does not
    use, so similarity may not bring either back; each handoff passes them on until an event in ``entries``
    (this session's turns) corrects or supersedes them. Per section the carried items come first and this
    session's after; past ``MAX_ITEMS`` the oldest are dropped, with their reason."""
    if previous is None:
        return notes
    try:
        body = json.loads(previous.content)
    except ValueError:
        return notes
    held = {p for item in notes.items for p in item.pointers}
    earlier = [
        HandoffItem(str(i["section"]), str(i.get("text", "")), tuple(str(p) for p in i.get("pointers", [])))
        for i in body.get("items", [])
        if isinstance(i, Mapping) and i.get("section") in CARRIED_SECTIONS and i.get("pointers")
    ]
    # an item carried as written holds only while all it rests on does ("approved: path prefixes" stops holding
    # when the approved choice is replaced, though the approval turn itself was not)
    replaced = _replaced_keys(entries)
    carried = [i for i in earlier if not set(i.pointers) <= held and not set(i.pointers) & replaced]
    drops = [
        redacted(f"{i.section}: carried, rests on a turn a later event corrected or superseded")
        for i in earlier
        if set(i.pointers) & replaced
    ]
    if not carried:
        return replace(notes, dropped=notes.dropped + len(drops), dropped_reasons=notes.dropped_reasons + tuple(drops))
    by_section = {s: [i for i in notes.items if i.section == s] for s in SECTIONS}
    for section in CARRIED_SECTIONS:
        merged = [i for i in carried if i.section == section] + by_section[section]
        by_section[section] = merged[-MAX_ITEMS:]
        drops += [
            redacted(f"{section}: over the {MAX_ITEMS}-item limit, carried {i.pointers[0]} dropped")
            for i in merged[: max(0, len(merged) - MAX_ITEMS)]
        ]
    items = [i for s in SECTIONS for i in by_section[s]]
    return replace(
        notes,
        items=tuple(items),
        carried=sum(1 for i in items if i in carried),
        dropped=notes.dropped + len(drops),
        dropped_reasons=notes.dropped_reasons + tuple(drops),
    )


# ---- replay ------------------------------------------------------------------------------------
def _compact(pointers: Sequence[str], shown: int = 3) -> str:
    more = f" +{len(pointers) - shown}" if len(pointers) > shown else ""
    return "[" + ", ".join(shown_entry_key(str(p)) for p in pointers[:shown]) + more + "]"


def _item_text(item: Mapping[str, Any]) -> str:
    """An item as ``render_handoff`` shows it within its section's line: its text, then its pointers."""
    return f"{item.get('text', '')} {_compact(item.get('pointers', []))}"


def _tail_line(quote: Mapping[str, Any]) -> str:
    """A tail quote as ``render_handoff`` shows it; a peer agent's turn says whose observation it is."""
    peer = f" ({PEER_AGENT_NOTE} {quote['peer_agent']}, {NOT_AN_INSTRUCTION})" if quote.get("peer_agent") else ""
    return f"tail {quote['entry']}{peer}: {quote['text']}"


def _peer_line(observation: Mapping[str, Any]) -> str:
    """A peer observation as ``render_handoff`` shows it: who said it, that it is not an instruction, where."""
    who, where = observation.get("author", ""), _compact([str(observation.get("pointer", ""))])
    return f"{PEER_AGENT_NOTE} {who} ({NOT_AN_INSTRUCTION}) {where}: {observation.get('text', '')}"


def render_handoff(entry: TranscriptEntry, *, tail: bool = True) -> str:
    """A handoff entry as the text the working set carries: the host's notes, then each item with
    its pointers, then the recent tail (``tail=False``: without it); credentials redacted."""
    body = json.loads(entry.content)
    header = f"<handoff from {entry.session_id} at {short_time(entry.timestamp)} ({entry.id})"
    if body.get("built_by"):
        header += f"; built by {body['built_by']}" + (f", {body['dropped']} dropped" if body.get("dropped") else "")
    if body.get("reason"):
        header += f"; {body['reason']}"
    lines = [header + ">"]
    for key in HOST_FIELDS:
        value = body.get(key)
        if value:
            lines.append(f"{key}: {value if isinstance(value, str) else '; '.join(value)}")
    items = [i for i in body.get("items", []) if isinstance(i, Mapping)]
    for section in SECTIONS:
        chosen = [i for i in items if i.get("section") == section]
        if chosen:
            lines.append(f"{section}: " + "; ".join(_item_text(i) for i in chosen))
    quoted = {f"{t['session']}#{t['entry']}" for t in body.get("recent_tail", [])} if tail else set()
    for observation in _peers(body):
        if observation.get("pointer") not in quoted:  # a peer turn the tail quotes is labelled there
            lines.append(_peer_line(observation))
    for item in body.get("recent_tail", []) if tail else []:
        lines.append(_tail_line(item))
    lines.append("</handoff>")
    return redacted("\n".join(lines))  # the handoff quotes turns verbatim; what the model is shown does not


def whole_tail_quotes(entry: TranscriptEntry) -> dict[str, str]:
    """The tail turns a handoff quotes whole (not cut at ``TAIL_QUOTE_CHARS``), by "session#entry", each with
    the line ``render_handoff`` shows for it: what a context holding the rendered handoff need not recall again."""
    tail = json.loads(entry.content).get("recent_tail", [])
    return {f"{t['session']}#{t['entry']}": _tail_line(t) for t in tail if len(t.get("text", "")) < TAIL_QUOTE_CHARS}


def whole_item_quotes(entry: TranscriptEntry, transcript: TranscriptStore) -> dict[str, str]:
    """The turns a handoff's items hold whole (an item pointing at one turn whose text, as a caption, is within
    it: a short request, a standing rule), by "session#entry", each with the item as ``render_handoff`` shows
    it; with ``whole_tail_quotes``, what a context holding the rendered handoff need not recall again."""
    pointers = TranscriptPointers(transcript)
    out: dict[str, str] = {}
    for item in json.loads(entry.content).get("items", []):
        keys = item.get("pointers", []) if isinstance(item, Mapping) else []
        if len(keys) != 1 or not (said := pointers.text_of(keys[0])) or len(" ".join(said.split())) > ITEM_CHARS:
            continue
        if _caption(said) in str(item.get("text", "")):
            out[keys[0]] = _item_text(item)
    return out


def handoff_pointers(entry: TranscriptEntry, shown: str | None = None) -> tuple[str, ...]:
    """The turns an injected handoff rests on: its items' pointers, then its recent tail's. With ``shown`` (the
    rendered handoff as fitted into a context), only those of the items and tail lines the text still holds."""
    body = json.loads(entry.content)
    items = [i for i in body.get("items", []) if isinstance(i, Mapping)]
    tail = body.get("recent_tail", [])
    if shown is not None:
        shown = " ".join(shown.split())
        items = [i for i in items if _shown(_item_text(i), shown)]
        tail = [t for t in tail if _shown(_tail_line(t), shown)]
    peers = _peers(body)
    if shown is not None:
        peers = [o for o in peers if _shown(_peer_line(o), shown)]
    keys = [p for i in items for p in i.get("pointers", [])]
    keys += [str(o.get("pointer")) for o in peers]
    keys += [f"{t['session']}#{t['entry']}" for t in tail]
    return tuple(dict.fromkeys(keys))


def _peers(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [o for o in body.get("peer_observations", []) if isinstance(o, Mapping)]


def _shown(line: str, text: str) -> bool:
    return " ".join(redacted(line).split()) in text
