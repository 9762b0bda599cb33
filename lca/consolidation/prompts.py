"""The writer's and the reviewer's prompts (versioned: a change here changes PROMPT_VERSION).

Each prompt carries a worked example as a prior exchange: small local models follow a shown
format far more reliably than a described one (SmolLM2-135M ignores the description alone).
"""

from __future__ import annotations

from collections.abc import Sequence

PROMPT_VERSION = "consolidation-prompts/2"

WRITER_SYSTEM = (
    "You extract memories from conversations: facts about the user or the work, decisions, lessons "
    "learned, preferences, and rules the assistant must follow. Answer only with lines of the form: "
    "TYPE | statement | line numbers. TYPE is one of: fact, decision, lesson, preference, rule. "
    "Write NONE if nothing is worth remembering."
)
WRITER_PREVENTED = (
    " If a memory in use changed what the assistant did, add a line: prevented | memory id | line number | what changed"
)
WRITER_DEMO = (
    (
        "Conversation lines:\n[1] user: My daughter Mia starts school in Porto in September.\n"
        "[2] assistant: Congratulations to Mia!\n[3] user: From now on, always answer me in French.\n\n"
        "List what is worth remembering."
    ),
    "fact | Mia, the user's daughter, starts school in Porto in September. | 1\n"
    "rule | Always answer the user in French. | 3",
)
WRITER_TASK = "List what is worth remembering."
REVIEWER_SYSTEM = (
    "You are a strict reviewer of memory writes. Your job is to find reasons to reject a candidate memory, "
    "not to agree with it. You see only the candidate, the source lines it cites, and existing memories."
)
REVIEWER_INSTRUCTIONS = """Answer in exactly this form, reasoning first:
REASONING: <why the candidate might be wrong, unsupported, or in conflict>
SUPPORTED: yes or no (yes only if the source lines say the candidate)
CONTRADICTS: none, or the id of an existing memory that says something incompatible
VERDICT: accept, reject, or supersede (supersede: the candidate is newer and replaces the memory it contradicts)"""
REVIEWER_DEMOS = (
    (
        "Candidate (fact): Mia starts school in Lisbon.\nSource lines it cites:\n[1] user: My daughter Mia starts "
        "school in Porto in September.\nExisting memories:\n(none)\n\nAnswer with REASONING, SUPPORTED, CONTRADICTS, "
        "VERDICT.",
        "REASONING: The source says Porto, not Lisbon.\nSUPPORTED: no\nCONTRADICTS: none\nVERDICT: reject",
    ),
    (
        "Candidate (preference): The user likes green tea.\nSource lines it cites:\n[4] user: I always drink green "
        "tea, I love it.\nExisting memories:\nm-coffee: The user drinks coffee every morning.\n\nAnswer with "
        "REASONING, SUPPORTED, CONTRADICTS, VERDICT.",
        "REASONING: The source says the user loves green tea. Drinking coffee does not exclude it.\n"
        "SUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept",
    ),
)


def with_demos(system: str, demos: Sequence[tuple[str, str]], task: str) -> list[dict[str, str]]:
    """The system prompt, each demo as a prior user/assistant exchange, then the task."""
    messages = [{"role": "system", "content": system}]
    for user, assistant in demos:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return messages + [{"role": "user", "content": task}]
