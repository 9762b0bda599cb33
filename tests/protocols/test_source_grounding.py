"""The source-grounding scorer on hand-made answers and packets where the right grade is known, and the task end
to end with scripted models: a model that labels its claims right scores above one that labels them wrong."""

from __future__ import annotations

import pytest

import protocols.harness.solvers as solvers
from protocols.evals.source_grounding.scorer import INSTRUCTION, claims, confusion_matrix, grade
from tests.fakes import FakeHashingEmbedder

TURN = {"kind": "transcript", "text": "The staging database listens on port 6543, not the default 5432."}
MEMORY = {"kind": "memory", "text": "Releases go out on Thursdays."}
GOLD = {"required_mentions": ["6543"]}


def test_claims_are_sentences_with_the_label_they_end_in():
    found = claims("It is port 6543 [transcript]. I think it changed in March [Inference]\nNo idea why.")
    assert found == [
        ("It is port 6543", "transcript"),
        ("I think it changed in March", "inference"),
        ("No idea why", None),
    ]


@pytest.mark.parametrize(
    ("answer", "source_accuracy", "labeled_share", "answer_accuracy"),
    [
        ("The staging database listens on port 6543 [transcript].", 1.0, 1.0, 1.0),
        # the right answer under the wrong source: answer right, source wrong
        ("The staging database listens on port 6543 [memory].", 0.0, 1.0, 1.0),
        # a supported claim hedged as uncertain is a wrong label, not modesty
        ("The staging database listens on port 6543 [uncertain].", 0.0, 1.0, 1.0),
        # the port was injected: calling it an uncertain recollection under-claims
        ("I do not remember the port [uncertain].", 0.0, 1.0, 0.0),
        # an unsupported claim passed off as from the transcript
        ("The staging database listens on port 5555 behind the proxy [transcript].", 0.0, 1.0, 0.0),
        ("The staging database listens on port 6543.", 0.0, 0.0, 1.0),  # nothing labeled
        (
            "The staging database listens on port 6543 [transcript]. Releases go out on Thursdays [transcript].",
            0.5,
            1.0,
            1.0,
        ),
    ],
)
def test_answer_and_source_are_graded_apart(answer, source_accuracy, labeled_share, answer_accuracy):
    graded = grade(answer, [TURN, MEMORY], GOLD, "6543")
    assert graded["source_accuracy"] == source_accuracy
    assert graded["labeled_share"] == labeled_share
    assert graded["answer_accuracy"] == answer_accuracy
    assert graded["answer_in_context"] == 1.0  # the port turn was injected


def test_a_claim_nothing_injected_supports_is_rightly_labeled_uncertain_or_inference():
    for label in ("uncertain", "inference"):
        graded = grade(f"I do not remember the port [{label}].", [MEMORY], GOLD, "6543")
        assert graded["source_accuracy"] == 1.0 and graded["answer_in_context"] == 0.0


def test_the_confusion_matrix_counts_actual_source_by_label():
    rows = grade(
        "The staging database listens on port 6543 [memory]. Releases go out on Thursdays [memory]. "
        "Maybe the moon is cheese [inference]. The staging database listens on port 6543.",
        [TURN, MEMORY],
        GOLD,
        "6543",
    )["claims"]
    assert confusion_matrix(rows) == {
        "transcript": {"memory": 1, "unlabeled": 1},
        "memory": {"memory": 1},
        "unsupported": {"inference": 1},
    }
    assert grade("anything", [], GOLD, "6543")["answer_in_context"] == 0.0


def labeling_agent(label: str):
    """A scripted agent: repeats the first recalled line of its context and ends it with ``label``."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def respond(messages, tools, tool_choice, config):
        system = next((m.text for m in messages if m.role == "system"), "")
        user = messages[-1].text
        assert INSTRUCTION in user  # every condition's agent gets the labeling instruction
        lines = [ln for ln in system.splitlines() if ln.strip() and not ln.startswith(("[", "<"))]
        text = f"{lines[0].rstrip('.')} [{label}]." if lines else f"I do not know [{label}]."
        output = ModelOutput.from_content(model=f"label-{label}", content=text)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


def test_a_model_that_labels_right_scores_above_one_that_labels_wrong(tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.source_grounding.source_grounding import source_grounding

    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    scores = {}
    for label in ("transcript", "memory"):
        (log,) = inspect_eval(
            source_grounding(condition="transcript-recall", params="floor=0.0"),
            model=labeling_agent(label),
            limit=4,
            log_dir=str(tmp_path / label),
            display="none",
        )
        assert log.status == "success"
        result = next(r for r in log.results.scores if r.name == "source_accuracy")
        scores[label] = result.metrics["mean"].value
    assert scores["transcript"] > 0.5 > scores["memory"] == 0.0  # transcript-recall injects only the transcript
