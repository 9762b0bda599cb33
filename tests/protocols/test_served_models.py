"""Provenance of a served model: a task summary (``lca run``'s JSON, a study's run.json) records the tokens each
model used and, per model string, the names its API answered with; run.json merges them with the raters'."""

from __future__ import annotations

from types import SimpleNamespace

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import generate

from protocols.harness.planning import task_summary
from protocols.providers.structured import StructuredStats
from protocols.study.manifest import served_models


def served_as(name: str):
    def respond(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model=name, content="an answer")
        output.usage = ModelUsage(input_tokens=12, output_tokens=3, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


def test_a_task_summary_names_what_answered_and_counts_its_tokens(tmp_path):
    task = Task(dataset=[Sample(input="one?"), Sample(input="two?")], solver=generate())
    (log,) = inspect_eval(task, model=served_as("qwen2.5:1.5b"), log_dir=str(tmp_path), display="none")
    summary = task_summary(log)
    assert summary["served_models"] == {"mockllm/model": ["qwen2.5:1.5b"]}
    assert summary["model_usage"] == {"mockllm/model": {"input_tokens": 24, "output_tokens": 6, "total_tokens": 30}}


def test_run_json_merges_the_tasks_served_names_with_the_raters():
    entries = [
        {"tasks": [{"served_models": {"openai-api/vllm/qwen": ["qwen"]}}, {"served_models": {}}]},
        {"tasks": []},
    ]
    rater = SimpleNamespace(structured=StructuredStats(served=["Qwen/Qwen2.5-7B-Instruct"]))
    local = SimpleNamespace()  # an in-process model: named by its GGUF's sha256 in model_files instead
    raters = {"rater_a:openai-api/ollama/llama3:8b": rater, "lca-local/smollm2": local}
    assert served_models(entries, raters) == {
        "openai-api/ollama/llama3:8b": ["Qwen/Qwen2.5-7B-Instruct"],
        "openai-api/vllm/qwen": ["qwen"],
    }
