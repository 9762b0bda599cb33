"""The compaction protocol's computed measures, at the substrate level (the injected context) and the behaviour
level (the answers), from a sample's gold (``protocols.harness.scenario.probe_gold``) and its category; and the
items the panel rates for the judged ``evaluator_continuity`` (``rating_views``: where the work stood before the cut,
and the conversation after it).

A mention is found when its normalized words (``normalize_answer``: lowercase, no punctuation or articles) occur
as whole words in the normalized text. A measure that does not apply to a sample (a constraint count on a resume
probe) is NaN there, which inspect leaves out of the key's mean, so categories never drag each other's means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from inspect_ai.scorer import Score, mean, scorer

from protocols.harness.rating_views import RATING_VIEWS, excerpt, quoted, rating_view
from protocols.harness.scorers import normalize_answer
from protocols.harness.solvers import PACKET_KEY

ANSWERS_KEY = "compaction_answers"  # every answer of the sample's conversation, in order (the resume sequence)
CONSTRAINT, CORRECTION, INTERRUPTION = "constraint", "correction", "interruption"
MEASURES = (
    "constraints_missing_context",
    "constraints_missing_answer",
    "repeated_mistakes_context",
    "repeated_mistakes_answer",
    "resume_context",
    "turns_to_resume",
)
NOT_APPLICABLE = math.nan
EVALUATOR_CONTINUITY = "evaluator_continuity"  # the judged measure whose items this scorer prepares


def mentioned(text: str, mention: str) -> bool:
    """``mention`` occurs in ``text`` as whole words, after both are normalized."""
    words = normalize_answer(mention)
    return bool(words) and f" {words} " in f" {normalize_answer(text)} "


def constraints_missing(text: str, required: Sequence[str]) -> int:
    """How many of the constraints in force (their key mentions) ``text`` does not hold."""
    return sum(1 for mention in required if not mentioned(text, mention))


def repeated_mistakes(text: str, right: Sequence[str], wrong: Sequence[str]) -> int:
    """How many corrected mistakes ``text`` holds as if current: the wrong value present while no right value is
    (a text that states the correction beside the old value has not repeated the mistake)."""
    if any(mentioned(text, mention) for mention in right):
        return 0
    return sum(1 for mention in wrong if mentioned(text, mention))


def turns_to_resume(answers: Sequence[str], thread: Sequence[str]) -> int:
    """The 1-based turn of the first answer naming the open thread (every one of its key mentions); one past the
    last turn when no answer does."""
    for turn, answer in enumerate(answers, 1):
        if thread and all(mentioned(answer, mention) for mention in thread):
            return turn
    return len(answers) + 1


def thread_in_context(packet: Mapping[str, Any], gold: Mapping[str, Any]) -> bool:
    """The open thread's turn is in the first context built: among the injected items' pointers, or, for items
    without pointers (summaries), named by the injected text (every key mention of the thread)."""
    if set(packet.get("pointers", [])) & set(gold.get("evidence", [])):
        return True
    required = gold.get("required_mentions", [])
    text = packet.get("injected_text", "")
    return bool(required) and all(mentioned(text, mention) for mention in required)


def compaction_values(
    category: str, gold: Mapping[str, Any], packet: Mapping[str, Any], answers: Sequence[str]
) -> dict[str, float]:
    """Every measure for one sample; NaN where the sample's category does not carry it."""
    values = dict.fromkeys(MEASURES, NOT_APPLICABLE)
    context = packet.get("injected_text", "")
    answer = answers[0] if answers else ""
    required, forbidden = gold.get("required_mentions", []), gold.get("forbidden_mentions", [])
    if category == CONSTRAINT:
        values["constraints_missing_context"] = float(constraints_missing(context, required))
        values["constraints_missing_answer"] = float(constraints_missing(answer, required))
    if forbidden:
        values["repeated_mistakes_context"] = float(repeated_mistakes(context, required, forbidden))
        values["repeated_mistakes_answer"] = float(repeated_mistakes(answer, required, forbidden))
    if category == INTERRUPTION:
        values["resume_context"] = float(thread_in_context(packet, gold))
        values["turns_to_resume"] = float(turns_to_resume(answers, required))
    return values


LAST_TURNS = 6  # the end of the interrupted session a rater of evaluator_continuity reads
_SPEAKERS = {"user_turn": "User", "assistant_turn": "Assistant", "tool_call": "Tool call", "tool_result": "Tool result"}


def continuity_view(history: Mapping[str, Any], gold: Mapping[str, Any], conversation: Sequence[tuple[str, str]]):
    """The panel's item for ``evaluator_continuity``: where the work stood when the context was cut (the last turns
    of the last session), the turns the probe rests on, and the conversation after the cut as the answer."""
    sessions = history.get("sessions") or ()
    entries = list(sessions[-1].get("entries") or ()) if sessions else []
    last = "\n".join(
        f"{_SPEAKERS.get(e.get('kind'), e.get('kind'))}: {excerpt(e.get('content', ''), 60)}"
        for e in entries[-LAST_TURNS:]
    )
    shown = (
        f"Where the work stood when the context was cut (the end of the last session):\n{last or '(nothing)'}\n\n"
        f"What the earlier work established that this question rests on:\n{quoted(gold.get('evidence_texts') or ())}"
        "\n\nAfter the cut, the assistant resumed with only what its memory gave it. The conversation after the "
        "cut is the answer below."
    )
    answer = "\n".join(f"{who}: {text}" for who, text in conversation)
    return {EVALUATOR_CONTINUITY: rating_view(shown, answer)}


def resumed_conversation(messages: Sequence[Any], question: str, answers: Sequence[str]) -> list[tuple[str, str]]:
    """The conversation after the cut: the question, each answer, and the follow-up user turns between them."""
    users = [m.text for m in messages if getattr(m, "role", None) == "user"]
    follow_ups = users[len(users) - (len(answers) - 1) :] if len(answers) > 1 else []
    turns = [("User", question)]
    for n, answer in enumerate(answers):
        if n and n - 1 < len(follow_ups):
            turns.append(("User", follow_ups[n - 1]))
        turns.append(("Assistant", answer))
    return turns


def compaction():

    @scorer(metrics={name: [mean()] for name in MEASURES}, name="compaction")
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            answers = state.store.get(ANSWERS_KEY) or [state.output.completion if state.output else ""]
            category = str(state.metadata.get("category", ""))
            values = compaction_values(category, state.metadata.get("gold", {}), packet, answers)
            return Score(
                value=values,
                answer=answers[-1],
                explanation=f"{category}: {len(answers)} answer(s); {len(packet.get('items', []))} item(s) injected",
                metadata={
                    "answers": list(answers),
                    RATING_VIEWS: continuity_view(
                        state.metadata.get("history") or {},
                        state.metadata.get("gold", {}),
                        resumed_conversation(state.messages, state.input_text, answers),
                    ),
                },
            )

        return score

    return _make()
