"""Reading the writer's and the reviewer's answers, and the mechanical checks beside them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lca.consolidation.records import CANDIDATE_TYPES
from lca.ledger import key_terms

REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|i won't|as an ai)\b", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+")
_FIELD = re.compile(r"^\s*\**\s*(REASONING|SUPPORTED|CONTRADICTS|VERDICT)\s*\**\s*:\s*(.*)$", re.IGNORECASE)


def parse_writer_output(text: str) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, int, str]], int]:
    """Candidate lines (type, statement, line numbers), prevented lines (memory id, line, what), and
    the count of non-empty lines that fit neither form."""
    candidates: list[tuple[str, str, list[int]]] = []
    prevented: list[tuple[str, str, int, str]] = []
    unparsed = 0
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*0123456789.) ").strip()
        if not line or line.upper().strip(".") == "NONE":
            continue
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


def parse_review(text: str) -> dict[str, Any] | None:
    """The reviewer's fields, or None when SUPPORTED or VERDICT is missing or unreadable."""
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


def lexical_support(claim: str, lines: Sequence[str]) -> float:
    """Share of the claim's key terms found in the cited lines: a mechanical floor under the reviewer."""
    terms = key_terms(claim)
    if not terms:
        return 0.0
    source = key_terms(" ".join(lines))
    return len(terms & source) / len(terms)


def failure_kind(exc: Exception) -> str:
    """How a generator call failed, for the cycle's record."""
    name = type(exc).__name__.lower()
    return "timeout" if "timeout" in name or isinstance(exc, TimeoutError) else "error"


def slug(text: str, limit: int = 40) -> str:
    """A file-name-safe stem from a claim's words."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "memory"
