"""LongMemEval QA accuracy: a grader model answers yes or no, one prompt per question type, as the
official evaluation judges (temperature 0, at most 10 output tokens, correct when the reply holds
"yes"). The prompts below are our wording of the official criteria (data README); the scorer that
asks them is ``scorer.longmemeval_judge``."""

from __future__ import annotations

_BASE = (
    "I will give you a question, a correct answer, and a response from a model. Answer yes if the response "
    "contains the correct answer, or is equivalent to it, or contains all the intermediate steps needed to "
    "reach it; answer no if the response only contains a subset of the information required."
)
_RULES = {
    "temporal-reasoning": _BASE
    + (
        " Do not penalize off-by-one errors in the number of days, weeks or months: "
        "if the question asks for a count and the response is off by one, answer yes."
    ),
    "knowledge-update": _BASE
    + (
        " If the response contains some previous information together with the updated "
        "answer, it is correct as long as the updated answer is the required one."
    ),
    "single-session-preference": (
        "I will give you a question, a rubric describing the desired personalized "
        "response, and a response from a model. Answer yes if the response satisfies the "
        "rubric: it recalls and uses the user's personal information correctly. It does "
        "not need to reflect every point of the rubric."
    ),
}
_ABSTENTION = (
    "I will give you an unanswerable question, an explanation of why it is unanswerable, and a response "
    "from a model. Answer yes if the model correctly identifies the question as unanswerable (it says "
    "the information is missing or incomplete), and no otherwise."
)


def judge_prompt(question_type: str, question: str, answer: str, response: str, *, abstention: bool) -> str:
    rule = _ABSTENTION if abstention else _RULES.get(question_type, _BASE)
    label = (
        "Explanation"
        if abstention
        else ("Rubric" if question_type == "single-session-preference" else "Correct Answer")
    )
    return (
        f"{rule}\n\nQuestion: {question}\n\n{label}: {answer}\n\nModel Response: {response}\n\n"
        "Is the model response correct? Answer yes or no only."
    )
