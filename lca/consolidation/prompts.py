"""The writer's and the reviewer's prompts and answer schemas (versioned: a change here changes PROMPT_VERSION).

Each prompt carries a worked example as a prior exchange: small local models follow a shown
format far more reliably than a described one (SmolLM2-135M ignores the description alone).
Both answers are JSON, and each call passes its JSON schema to the generator (``json_schema``), so a
runtime with constrained decoding cannot answer in another shape. The schemas are built per call:
the writer may cite only the line numbers of its window and name only the memories it was shown in
use; the reviewer may name as contradicted only the memories it was shown. The parsers
(``lca.consolidation.parsing``) still read the older line format, for models and records without JSON.

The writer may also say which of its window's lines replace earlier ones (``replaces``: a later line
corrects or replaces an earlier one, or merely adds to it); a separate reviewer call checks each
(``REPLACEMENT_*``, ``lca.consolidation.replacements``). The worked example shows none: a small model
copies what it is shown, and a copied replacement would hold a turn back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

PROMPT_VERSION = "consolidation-prompts/4"

WRITER_TYPES = ("fact", "decision", "lesson", "preference", "rule")
REVIEWER_VERDICTS = ("accept", "reject", "supersede")
NO_CONTRADICTION = "none"
MAX_CANDIDATES_PER_WINDOW = 5  # with MAX_CLAIM_CHARS, what fits the writer's token budget
MAX_CLAIM_CHARS = 160
MAX_CITED_LINES = 4
MAX_REASONING_CHARS = 200
MAX_REPLACEMENTS_PER_WINDOW = 3
RELATIONS = ("replaces", "corrects", "adds to")  # as the writer names them; "adds to" replaces nothing

WRITER_SYSTEM = (
    "You extract memories from conversations: facts about the user or the work, decisions, lessons "
    "learned, preferences, and rules the assistant must follow. Answer only with JSON: "
    '{"memories": [{"type": TYPE, "claim": one sentence that stands alone, "lines": [line numbers that say it]}]}. '
    "TYPE is one of: fact, decision, lesson, preference, rule. "
    'Answer {"memories": []} if nothing is worth remembering.'
)
WRITER_PREVENTED = (
    ' If a memory in use changed what the assistant did, also add "prevented": '
    '[{"memory": memory id, "line": line number, "what": what changed}].'
)
WRITER_REPLACES = (
    " If a later line corrects or replaces what an earlier line said (a wrong detail put right, a decision, "
    'plan or preference changed), also add "replaces": [{"later": line number, "earlier": line number, '
    '"relation": "corrects", "replaces" or "adds to", "why": what changed}]. "adds to" means the later line '
    "only adds detail and leaves the earlier one true."
)
WRITER_DEMO = (
    (
        "Conversation lines:\n[1] user: My daughter Mia starts school in Porto in September.\n"
        "[2] assistant: Congratulations to Mia!\n[3] user: From now on, always answer me in French.\n\n"
        "List what is worth remembering."
    ),
    json.dumps(
        {
            "memories": [
                {
                    "type": "fact",
                    "claim": "Mia, the user's daughter, starts school in Porto in September.",
                    "lines": [1],
                },
                {"type": "rule", "claim": "Always answer the user in French.", "lines": [3]},
            ]
        }
    ),
)
WRITER_TASK = "List what is worth remembering."
# the claims of the worked example: a small model with nothing to say copies them (cycle: dropped as echoes)
WRITER_DEMO_CLAIMS = tuple(item["claim"] for item in json.loads(WRITER_DEMO[1])["memories"])
REVIEWER_SYSTEM = (
    "You are a strict reviewer of memory writes. Your job is to find reasons to reject a candidate memory, "
    "not to agree with it. You see only the candidate, the source lines it cites, and existing memories."
)
REVIEWER_INSTRUCTIONS = """Answer only with JSON, its fields in this order: REASONING first, then SUPPORTED, CONTRADICTS, VERDICT last:
{"reasoning": why the candidate might be wrong, unsupported, or in conflict,
 "supported": true only if the source lines say the candidate, else false,
 "contradicts": "none", or the id of an existing memory that says something incompatible,
 "verdict": "accept", "reject", or "supersede" (supersede: the candidate is newer and replaces the memory it contradicts)}"""
REVIEWER_DEMOS = (
    (
        "Candidate (fact): Mia starts school in Lisbon.\nSource lines it cites:\n[1] user: My daughter Mia starts "
        "school in Porto in September.\nExisting memories:\n(none)\n\nAnswer with JSON: reasoning, supported, "
        "contradicts, verdict.",
        json.dumps(
            {
                "reasoning": "The source says Porto, not Lisbon.",
                "supported": False,
                "contradicts": NO_CONTRADICTION,
                "verdict": "reject",
            }
        ),
    ),
    (
        "Candidate (preference): The user likes green tea.\nSource lines it cites:\n[4] user: I always drink green "
        "tea, I love it.\nExisting memories:\nm-coffee: The user drinks coffee every morning.\n\nAnswer with JSON: "
        "reasoning, supported, contradicts, verdict.",
        json.dumps(
            {
                "reasoning": "The source says the user loves green tea. Drinking coffee does not exclude it.",
                "supported": True,
                "contradicts": NO_CONTRADICTION,
                "verdict": "accept",
            }
        ),
    ),
)


REPLACEMENT_SYSTEM = (
    "You are a strict reviewer of claims that a later line of a conversation corrects or replaces an earlier "
    "one. Your job is to find reasons to reject the claim, not to agree with it. You see only the claim and "
    "the two lines it names."
)
REPLACEMENT_INSTRUCTIONS = """Answer only with JSON, its fields in this order: REASONING first, then SUPPORTED, CONTRADICTS, VERDICT last:
{"reasoning": why the later line might not replace the earlier one (it may only add to it, or be about something else),
 "supported": true only if the later line makes the earlier one wrong or no longer current, else false,
 "contradicts": "none",
 "verdict": "accept" or "reject"}"""
REPLACEMENT_DEMOS = (
    (
        "Claim (corrects): line [3] corrects what line [1] said: the export runs on the 25th, not the 20th.\n"
        "Earlier line:\n[1] user: The payroll export runs on the 20th of each month.\nLater line:\n[3] user: "
        "Sorry, my mistake: the payroll export runs on the 25th.\n\nAnswer with JSON: reasoning, supported, "
        "contradicts, verdict.",
        json.dumps(
            {
                "reasoning": "The later line says the earlier date was a mistake and gives another one.",
                "supported": True,
                "contradicts": NO_CONTRADICTION,
                "verdict": "accept",
            }
        ),
    ),
    (
        "Claim (replaces): line [4] replaces what line [2] said: the user now drinks tea.\nEarlier line:\n[2] "
        "user: I drink coffee every morning.\nLater line:\n[4] user: I also like green tea in the afternoon."
        "\n\nAnswer with JSON: reasoning, supported, contradicts, verdict.",
        json.dumps(
            {
                "reasoning": "Liking tea in the afternoon adds to the coffee in the morning; both stay true.",
                "supported": False,
                "contradicts": NO_CONTRADICTION,
                "verdict": "reject",
            }
        ),
    ),
)


def writer_schema(
    line_numbers: Sequence[int], memories_in_use: Sequence[str] = (), *, replacements: bool = True
) -> dict[str, Any]:
    """The writer's answer for one window: candidates citing only that window's lines; ``prevented``
    (optional) only when memories were in use, naming only those; ``replaces`` (optional, unless
    ``replacements`` is off) relating two of the window's lines."""
    lines = {"enum": sorted(set(line_numbers))}
    candidate = {
        "type": "object",
        "properties": {
            "type": {"enum": list(WRITER_TYPES)},
            "claim": {"type": "string", "minLength": 8, "maxLength": MAX_CLAIM_CHARS},
            "lines": {"type": "array", "items": lines, "minItems": 1, "maxItems": MAX_CITED_LINES},
        },
        "required": ["type", "claim", "lines"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {
        "memories": {"type": "array", "items": candidate, "maxItems": MAX_CANDIDATES_PER_WINDOW}
    }
    if memories_in_use:
        properties["prevented"] = {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "memory": {"enum": sorted(set(memories_in_use))},
                    "line": lines,
                    "what": {"type": "string", "minLength": 3, "maxLength": MAX_CLAIM_CHARS},
                },
                "required": ["memory", "line", "what"],
                "additionalProperties": False,
            },
        }
    if replacements:
        properties["replaces"] = {
            "type": "array",
            "maxItems": MAX_REPLACEMENTS_PER_WINDOW,
            "items": {
                "type": "object",
                "properties": {
                    "later": lines,
                    "earlier": lines,
                    "relation": {"enum": list(RELATIONS)},
                    "why": {"type": "string", "minLength": 3, "maxLength": MAX_CLAIM_CHARS},
                },
                "required": ["later", "earlier", "relation", "why"],
                "additionalProperties": False,
            },
        }
    return {"type": "object", "properties": properties, "required": ["memories"], "additionalProperties": False}


def reviewer_schema(shown_memories: Sequence[str]) -> dict[str, Any]:
    """The reviewer's verdict, reasoning first; it can name as contradicted only a memory it was shown,
    and without any shown there is nothing to supersede."""
    verdicts = list(REVIEWER_VERDICTS) if shown_memories else [v for v in REVIEWER_VERDICTS if v != "supersede"]
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": MAX_REASONING_CHARS},
            "supported": {"type": "boolean"},
            "contradicts": {"enum": [NO_CONTRADICTION, *sorted(set(shown_memories))]},
            "verdict": {"enum": verdicts},
        },
        "required": ["reasoning", "supported", "contradicts", "verdict"],
        "additionalProperties": False,
    }


def with_demos(system: str, demos: Sequence[tuple[str, str]], task: str) -> list[dict[str, str]]:
    """The system prompt, each demo as a prior user/assistant exchange, then the task."""
    messages = [{"role": "system", "content": system}]
    for user, assistant in demos:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return messages + [{"role": "user", "content": task}]
