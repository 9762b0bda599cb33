"""LoCoMo's own scorer: the official QA score per item (``qa_metrics.locomo_score``), reported as the
micro-average and per category by LoCoMo's own ids and names."""

from __future__ import annotations

from protocols.evals.locomo.qa_metrics import locomo_score


def locomo_qa():
    from inspect_ai.scorer import Score, grouped, mean, scorer

    @scorer(metrics=[mean(), grouped(mean(), "category_name", all=False)], name="locomo_qa")
    def _make():
        async def score(state, target):
            response = state.output.completion if state.output else ""
            value = locomo_score(response, target.text, int(state.metadata["category"]))
            return Score(value=value, answer=response, explanation=f"gold: {target.text}")

        return score

    return _make()
