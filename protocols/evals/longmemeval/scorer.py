"""LongMemEval's own scorer: the judged QA accuracy (prompts in ``judge.py``)."""

from __future__ import annotations

from protocols.evals.longmemeval.judge import judge_prompt


def longmemeval_judge():
    """A grader model answers yes or no (temperature 0, at most 10 tokens), correct when the reply holds
    "yes"; reported overall, task-averaged over question types, and for abstention questions."""
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, grouped, scorer

    @scorer(
        metrics=[
            accuracy(),
            grouped(accuracy(), "question_type", all="groups", all_label="task_averaged"),
            grouped(accuracy(), "abstention", all=False, name_template="abstention={group_name}"),
        ],
        name="longmemeval_judge",
    )
    def _make():
        async def score(state, target):
            grader = get_model(role="grader", default=get_model())
            response = state.output.completion if state.output else ""
            prompt = judge_prompt(
                state.metadata.get("question_type", ""),
                state.input_text,
                target.text,
                response,
                abstention=bool(state.metadata.get("abstention")),
            )
            reply = await grader.generate(prompt, config=GenerateConfig(temperature=0.0, max_tokens=10))
            verdict = "yes" in reply.completion.lower()
            return Score(
                value=CORRECT if verdict else INCORRECT,
                answer=response,
                explanation=f"grader {grader}: {reply.completion.strip()!r}",
            )

        return score

    return _make()
