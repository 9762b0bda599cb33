"""LoCoMo's retrieval units (dialog turns, observations, session summaries) and what each covers, and the
speakers' names in a question. Evidence ids and the category table are the LoCoMo protocol's
(``protocols.evals.locomo.dataset``)."""

from __future__ import annotations

import re

from protocols.evals.locomo.dataset import parse_evidence_ids

LOCOMO_UNITS = ("turns", "observations", "summaries")


def session_keys(conversation: dict) -> list[str]:
    """The sessions that exist, in order (some records carry more ``_date_time`` keys than sessions)."""
    return sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))


def name_pattern(name: str) -> str:
    """A speaker named by first name, with or without a possessive ("Caroline", "Caroline's")."""
    return rf"\b{re.escape(name.split()[0])}(?:'s)?\b"


def without_names(question: str, names) -> str:
    """The question with the speakers' first names taken out, for the embedded (dense) query."""
    for name in names:
        question = re.sub(name_pattern(name), "", question, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", question).strip()


def locomo_units(record: dict, units: str = "turns") -> dict[str, list]:
    """One conversation's retrieval units, as the LoCoMo paper's RAG study used them.

    ``turns``: each dialog turn ("speaker: text", with the image caption when the turn shares a photo);
    ``asks`` marks a turn that only asks (its text ends in "?" and it shares no photo);
    ``observations``: each fact of the record's ``observation`` view, covering the turns it cites;
    ``summaries``: each session summary, covering every turn of its session. ``covers`` holds the
    dialog ids a unit retrieves; evidence recall counts an evidence id found once any top-k unit covers it.
    """
    if units not in LOCOMO_UNITS:
        raise ValueError(f"unknown LoCoMo retrieval unit {units!r}; known: {', '.join(LOCOMO_UNITS)}")
    conversation = record["conversation"]
    sessions = session_keys(conversation)
    out: dict[str, list] = {"texts": [], "dates": [], "covers": [], "session": [], "speaker": [], "asks": []}

    def add(text: str, when: str, covers: list[str], session: str, speaker: str, asks: bool = False) -> None:
        out["texts"].append(text)
        out["dates"].append(when)
        out["covers"].append(covers)
        out["session"].append(session)
        out["speaker"].append(speaker)
        out["asks"].append(asks)

    for key in sessions:
        when = conversation.get(f"{key}_date_time", "")
        if units == "turns":
            for turn in conversation[key]:
                caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                asks = str(turn["text"]).rstrip().endswith("?") and not caption  # a photo is content however asked
                add(f"{turn['speaker']}: {turn['text']}{caption}", when, [turn["dia_id"]], key, turn["speaker"], asks)
        elif units == "observations":
            facts = (record.get("observation") or {}).get(f"{key}_observation") or {}
            for speaker, items in facts.items():
                for item in items:
                    add(f"{item[0]}", when, parse_evidence_ids(item[1]) if len(item) > 1 else [], key, speaker)
        else:
            summary = (record.get("session_summary") or {}).get(f"{key}_summary")
            if summary:
                add(str(summary), when, [turn["dia_id"] for turn in conversation[key]], key, "")
    return out
