"""Reading the writer's and the reviewer's answers, and the mechanical checks beside them.

Answers are JSON (``prompts``: the schemas the generator is held to); the older line format
(``TYPE | statement | line numbers``; ``REASONING: ... VERDICT: ...``) is still read, for models
without constrained decoding and for earlier records. Either way the answer is untrusted text: what does
not fit is counted, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from lca.consolidation.prompts import RELATIONS
from lca.consolidation.records import CANDIDATE_TYPES
from lca.ledger import key_terms

REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|i won't|as an ai)\b", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+")
_FIELD = re.compile(r"^\s*\**\s*(REASONING|SUPPORTED|CONTRADICTS|VERDICT)\s*\**\s*:\s*(.*)$", re.IGNORECASE)
# strict=False: a raw newline or tab inside a string is read (a grammar's string rule lets a model write one)
_DECODER = json.JSONDecoder(strict=False)
# "corrects | later line | earlier line | why" (and replaces, adds to): a relation in the line format
_RELATION_LINE = re.compile(r"^(replaces?|corrects?|adds?\s+to)\s*\|", re.IGNORECASE)
_RELATION_START = re.compile(r"\{\s*\"(?:later|earlier|relation)\"")


def parse_writer_output(text: str) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, int, str]], int]:
    """Candidates (type, statement, line numbers), prevented claims (memory id, what, line, what), and
    the count of parts that fit neither form: JSON items, or lines of the line format."""
    if _looks_like_json(text):
        return _parse_writer_json(text)
    candidates: list[tuple[str, str, list[int]]] = []
    prevented: list[tuple[str, str, int, str]] = []
    unparsed = 0
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*0123456789.) ").strip()
        if not line or line.upper().strip(".") == "NONE" or _RELATION_LINE.match(line):
            continue  # a relation line is read by parse_writer_relations
        parts = [p.strip() for p in line.split("|")]
        head = parts[0].lower().rstrip("s:") if parts else ""
        number = _NUMBERS.search(parts[2]) if head == "prevented" and len(parts) >= 4 else None
        if number is not None:
            prevented.append((parts[1], parts[3], int(number.group()), parts[3]))
            continue
        if len(parts) >= 3 and (head in CANDIDATE_TYPES or head.rstrip("e") + "e" in CANDIDATE_TYPES):
            kind = head if head in CANDIDATE_TYPES else head.rstrip("e") + "e"
            statement = parts[1].strip().strip('"')
            numbers = [int(n) for n in _NUMBERS.findall(parts[2])]
            if statement:
                candidates.append((kind, statement, numbers))
                continue
        unparsed += 1
    return candidates, prevented, unparsed


def writer_said_nothing(text: str) -> bool:
    """The writer's explicit "nothing worth remembering": ``NONE``, or JSON with an empty list of memories."""
    if text.strip().upper().strip(".") == "NONE":
        return True
    answer = _json_object(text) if _looks_like_json(text) else None
    return answer is not None and answer.get("memories") == [] and not answer.get("prevented")


def _looks_like_json(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("{") or stripped.startswith("```")


def _json_object(text: str) -> dict[str, Any] | None:
    """The answer as a JSON object (a Markdown code fence around it is allowed), or None."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").strip()
        stripped = stripped[len("json") :] if stripped.lower().startswith("json") else stripped
    try:
        value = _DECODER.decode(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_ITEM_START = re.compile(r"\{\s*\"(?:type|memory)\"")


def _json_items(text: str) -> tuple[list[Any], list[Any], int]:
    """The ``memories`` and ``prevented`` items of a writer answer. An answer cut short (the token
    budget ends inside the JSON) keeps the items that were complete; the cut tail counts as one part
    not read."""
    answer = _json_object(text)
    if answer is not None:
        memories, prevented = answer.get("memories", []), answer.get("prevented", [])
        extra = len(set(answer) - {"memories", "prevented", "replaces"})
        if not isinstance(memories, list) or not isinstance(prevented, list):
            return [], [], 1 + extra
        return memories, prevented, extra
    memories, prevented = [], []
    position = 0
    while (match := _ITEM_START.search(text, position)) is not None:
        try:
            item, end = _DECODER.raw_decode(text, match.start())
        except ValueError:
            break
        (prevented if isinstance(item, dict) and "memory" in item else memories).append(item)
        position = end
    return memories, prevented, 1


def _parse_writer_json(text: str) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, int, str]], int]:
    memories, prevented_items, unparsed = _json_items(text)
    candidates: list[tuple[str, str, list[int]]] = []
    prevented: list[tuple[str, str, int, str]] = []
    for item in memories:
        kind = str(item.get("type", "")).strip().lower() if isinstance(item, dict) else ""
        claim = item.get("claim") if isinstance(item, dict) else None
        lines = item.get("lines") if isinstance(item, dict) else None
        if (
            kind in CANDIDATE_TYPES
            and isinstance(claim, str)
            and claim.strip()
            and isinstance(lines, list)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        ):
            candidates.append((kind, " ".join(claim.split()), list(lines)))  # one line, as the line format gives
        else:
            unparsed += 1
    for item in prevented_items:
        memory = item.get("memory") if isinstance(item, dict) else None
        line = item.get("line") if isinstance(item, dict) else None
        what = item.get("what") if isinstance(item, dict) else None
        if isinstance(memory, str) and isinstance(line, int) and not isinstance(line, bool) and isinstance(what, str):
            prevented.append((memory, what, line, what))
        else:
            unparsed += 1
    return candidates, prevented, unparsed


def parse_writer_relations(text: str) -> tuple[list[tuple[str, int, int, str]], int]:
    """The relations the writer proposed between two of its lines, as (relation, later line, earlier line, why),
    and the count of relation items that did not fit: JSON ``replaces`` items (those complete in an answer cut
    short), or lines ``corrects | later | earlier | why`` of the line format."""
    out: list[tuple[str, int, int, str]] = []
    unparsed = 0
    if _looks_like_json(text):
        answer = _json_object(text)
        if answer is not None:
            items = answer.get("replaces", [])
            items = items if isinstance(items, list) else [items]
        else:
            items, position = [], 0
            while (match := _RELATION_START.search(text, position)) is not None:
                try:
                    item, position = _DECODER.raw_decode(text, match.start())
                except ValueError:
                    break
                items.append(item)
        for item in items:
            fields = [item.get(k) for k in ("relation", "later", "earlier", "why")] if isinstance(item, dict) else []
            relation = _relation(fields[0]) if fields else None
            numbers = [n for n in fields[1:3] if isinstance(n, int) and not isinstance(n, bool)]
            if relation in RELATIONS and len(numbers) == 2 and isinstance(fields[3], str):
                out.append((relation, numbers[0], numbers[1], " ".join(fields[3].split())))
            else:
                unparsed += 1
        return out, unparsed
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*0123456789.) ").strip()
        match = _RELATION_LINE.match(line)
        if match is None:
            continue
        parts = [p.strip() for p in line.split("|")]
        relation = _relation(match.group(1))
        later, earlier = (_NUMBERS.search(p) for p in (parts + ["", ""])[1:3])
        if relation is None or later is None or earlier is None:
            unparsed += 1
            continue
        out.append((relation, int(later.group()), int(earlier.group()), parts[3] if len(parts) > 3 else ""))
    return out, unparsed


def _relation(said: Any) -> str | None:
    """A relation as ``RELATIONS`` names it ("corrected", "replace", "add to" are read too), or None."""
    word = said.strip().lower() if isinstance(said, str) else ""
    prefixes = {"correct": "corrects", "replace": "replaces", "supersede": "replaces", "add": "adds to"}
    found = next((relation for prefix, relation in prefixes.items() if word.startswith(prefix)), None)
    return found if found in RELATIONS else None


def parse_review(text: str) -> dict[str, Any] | None:
    """The reviewer's fields, or None when SUPPORTED or VERDICT is missing or unreadable (JSON or
    the line format)."""
    if _looks_like_json(text):
        return _parse_review_json(text)
    fields: dict[str, str] = {}
    order: list[str] = []
    current = None
    for line in text.splitlines():
        match = _FIELD.match(line)
        if match:
            current = match.group(1).upper()
            if current not in fields:
                fields[current] = match.group(2).strip()
                order.append(current)
        elif current == "REASONING" and line.strip():
            fields["REASONING"] += " " + line.strip()
    said = fields.get("VERDICT", "").lower()
    verdict = next((v for v in ("supersede", "reject", "accept") if said.startswith(v)), None)
    answer = fields.get("SUPPORTED", "").lower()
    supported = True if answer.startswith("yes") else False if answer.startswith("no") else None
    if verdict is None or supported is None:
        return None
    contradicts: str | None = fields.get("CONTRADICTS", "none").strip().strip("`'\".")
    if contradicts is not None and contradicts.lower() in ("", "none", "no", "n/a", "-"):
        contradicts = None
    reasoning_first = bool(order) and order[0] == "REASONING"
    return {
        "verdict": verdict,
        "supported": supported,
        "contradicts": contradicts,
        "reasoning": fields.get("REASONING", ""),
        "reasoning_first": reasoning_first,
    }


def _parse_review_json(text: str) -> dict[str, Any] | None:
    answer = _json_object(text)
    if answer is None:
        return None
    said = answer.get("verdict")
    verdict = said.strip().lower() if isinstance(said, str) else None
    supported = answer.get("supported")
    if isinstance(supported, str):  # "yes"/"no", as the line format says it
        supported = {"yes": True, "true": True, "no": False, "false": False}.get(supported.strip().lower())
    if verdict not in ("accept", "reject", "supersede") or not isinstance(supported, bool):
        return None
    contradicts = answer.get("contradicts")
    contradicts = contradicts.strip().strip("`'\".") if isinstance(contradicts, str) else None
    if contradicts is not None and contradicts.lower() in ("", "none", "no", "n/a", "-"):
        contradicts = None
    reasoning = answer.get("reasoning")
    return {
        "verdict": verdict,
        "supported": supported,
        "contradicts": contradicts,
        "reasoning": " ".join(reasoning.split()) if isinstance(reasoning, str) else "",
        "reasoning_first": next(iter(answer)) == "reasoning",
    }


def lexical_support(claim: str, lines: Sequence[str]) -> float:
    """Share of the claim's key terms found in the cited lines: a mechanical floor under the reviewer."""
    terms = key_terms(claim)
    if not terms:
        return 0.0
    source = key_terms(" ".join(lines))
    return len(terms & source) / len(terms)


def echoes_example(claim: str, window: Sequence[str], example_claims: Sequence[str]) -> bool:
    """Whether a candidate repeats the prompt's worked example rather than the conversation: at least half
    of its key terms come from an example claim and appear nowhere in the window it was written from."""
    terms = key_terms(claim)
    if not terms:
        return False
    absent = terms - key_terms(" ".join(window))
    return any(len(absent & key_terms(example)) * 2 >= len(terms) for example in example_claims)


def failure_kind(exc: Exception) -> str:
    """How a generator call failed, for the cycle's record."""
    name = type(exc).__name__.lower()
    return "timeout" if "timeout" in name or isinstance(exc, TimeoutError) else "error"


def slug(text: str, limit: int = 40) -> str:
    """A file-name-safe stem from a claim's words."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "memory"
