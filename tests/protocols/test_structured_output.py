"""A JSON-schema call over an API (``protocols.providers.structured``) with fake inspect models: the API's
structured output is asked for; an answer that is not valid under the schema is asked again with the error, a
bounded number of times, then counted as a failure; a mode the API refuses is not used again for that model
(llama-cpp-python's server has ``json_object`` with a schema, not ``json_schema``); a cut answer is not retried."""

from __future__ import annotations

import json

import pytest
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage

from lca.consolidation.prompts import reviewer_schema
from lca.errors import LCAError
from protocols.providers import structured
from protocols.providers.models import text_generator
from protocols.providers.structured import MODE_MEMORY, refusal_of, retries_from_env, schema_error, setting_from_env

SCHEMA = reviewer_schema(["fact-db"])
VALID = '{"reasoning": "line 2 says it", "supported": true, "contradicts": "none", "verdict": "accept"}'
MESSAGES = [{"role": "system", "content": "You are a strict reviewer."}, {"role": "user", "content": "review this"}]


class APIRefusal(Exception):
    """What an OpenAI-compatible server's refusal looks like to the caller: a status code and a body."""

    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = {"message": message}


class FakeAPI:
    """A scripted model: ``answers`` in turn (the last repeats); records each request's messages and config.
    ``refuse`` holds the modes it answers with an error naming ``response_format``."""

    def __init__(self, *answers: str, refuse: tuple[str, ...] = (), stop_reason: str = "stop", name: str = "served-x"):
        self.answers = list(answers)
        self.refuse = refuse
        self.stop_reason = stop_reason
        self.name = name
        self.requests: list[tuple[list[dict[str, str]], GenerateConfig]] = []

    @staticmethod
    def mode_of(config: GenerateConfig) -> str:
        if config.response_schema is not None:
            return "json_schema"
        if (config.extra_body or {}).get("response_format"):
            return "json_object"
        return "prompt"

    def __call__(self, messages, tools, tool_choice, config):
        mode = self.mode_of(config)
        if mode in self.refuse:
            raise APIRefusal(
                "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'"
            )
        self.requests.append(([{"role": m.role, "content": m.text} for m in messages], config))
        text = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
        out = ModelOutput.from_content(model=self.name, content=text, stop_reason=self.stop_reason)
        out.usage = ModelUsage(input_tokens=5, output_tokens=3, total_tokens=8)
        return out


@pytest.fixture(autouse=True)
def fresh_memory(monkeypatch):
    monkeypatch.delenv(structured.MODE_ENV, raising=False)
    monkeypatch.delenv(structured.RETRIES_ENV, raising=False)
    MODE_MEMORY.clear()
    yield
    MODE_MEMORY.clear()


def generator_over(api: FakeAPI, **options):
    return text_generator("mockllm/model", role="reviewer", custom_outputs=api, memoize=False, **options)


def test_a_valid_structured_answer_is_asked_once_through_the_apis_structured_output():
    api = FakeAPI(VALID)
    generator = generator_over(api)
    assert generator.generate(MESSAGES, max_tokens=64, json_schema=SCHEMA) == VALID
    ((messages, config),) = api.requests
    assert messages == MESSAGES and config.response_schema.name == "reviewer_answer"
    assert config.max_retries == 0  # the untried mode is sent once: a refusal must not be retried for ever
    stats = generator.structured.to_dict()
    assert stats | {"last_error": None} == {
        "calls": 1,
        "valid": 1,
        "valid_after_retry": 0,
        "retries": 0,
        "failures": 0,
        "cut": 0,
        "by_mode": {"json_schema": 1},
        "refused": [],
        "served": ["served-x"],
        "last_error": None,
    }
    generator.generate(MESSAGES, max_tokens=64, json_schema=SCHEMA)
    assert api.requests[1][1].max_retries is None  # the mode worked: inspect's own retries again


def test_an_invalid_answer_is_asked_again_with_the_error_and_the_schema():
    api = FakeAPI("I would accept it.", VALID)
    generator = generator_over(api)
    assert generator.generate(MESSAGES, json_schema=SCHEMA) == VALID
    assert len(api.requests) == 2 and generator.calls == 1  # one request of the caller's, one retry
    retry, _ = api.requests[1]
    assert retry[:2] == MESSAGES and retry[2] == {"role": "assistant", "content": "I would accept it."}
    assert retry[3]["role"] == "user" and "not valid: not JSON" in retry[3]["content"]
    assert json.loads(retry[3]["content"].split("schema, and nothing else:\n", 1)[1])["required"] == SCHEMA["required"]
    stats = generator.structured
    assert (stats.valid, stats.valid_after_retry, stats.retries, stats.failures) == (1, 1, 1, 0)


def test_an_answer_that_stays_invalid_is_retried_a_bounded_number_of_times_then_counted(caplog):
    wrong = '{"verdict": "accept"}'  # JSON, but not under the schema: three keys are missing
    api = FakeAPI(wrong, "still not", "nor this")
    generator = generator_over(api, structured_retries=2)
    assert generator.generate(MESSAGES, json_schema=SCHEMA) == wrong  # the first answer: the caller parses it
    assert len(api.requests) == 3
    stats = generator.structured
    assert (stats.valid, stats.retries, stats.failures, stats.cut) == (0, 2, 1, 0)
    assert "not JSON" in stats.last_error
    assert "not valid under its schema after 2 retries" in caplog.text


def test_retries_follow_the_environment_and_zero_means_none(monkeypatch):
    monkeypatch.setenv(structured.RETRIES_ENV, "0")
    api = FakeAPI("nope")
    generator = generator_over(api)
    assert generator.generate(MESSAGES, json_schema=SCHEMA) == "nope"
    assert len(api.requests) == 1 and generator.structured.failures == 1
    monkeypatch.setenv(structured.RETRIES_ENV, "many")
    with pytest.raises(LCAError, match="LCA_STRUCTURED_RETRIES='many' is not a whole number"):
        retries_from_env()


def test_an_answer_cut_by_the_token_limit_is_counted_and_not_retried():
    api = FakeAPI('{"reasoning": "line 2 sa', stop_reason="max_tokens")
    generator = generator_over(api)
    generator.generate(MESSAGES, max_tokens=8, json_schema=SCHEMA)
    assert len(api.requests) == 1
    assert (generator.structured.failures, generator.structured.cut, generator.structured.retries) == (1, 1, 0)


def test_a_server_that_refuses_json_schema_gets_json_object_with_the_schema_and_the_model_remembers_it():
    """llama-cpp-python's server: its response_format has "text" and "json_object" (with a "schema"), and a
    "json_schema" request fails with HTTP 500, which inspect would retry for ever: the probe is sent once."""
    api = FakeAPI(VALID, refuse=("json_schema",))
    generator = generator_over(api)
    assert generator.generate(MESSAGES, json_schema=SCHEMA) == VALID
    ((_, config),) = api.requests
    assert config.response_schema is None
    assert config.extra_body["response_format"] == {"type": "json_object", "schema": SCHEMA}  # the whole schema
    assert generator.structured.refused == ["json_schema"] and generator.structured.by_mode == {"json_object": 1}
    # the next generator of the same model asks the way that worked, without probing
    again = generator_over(api)
    again.generate(MESSAGES, json_schema=SCHEMA)
    assert again.structured.refused == [] and again.structured.by_mode == {"json_object": 1}
    assert len(api.requests) == 2


def test_a_server_that_refuses_both_gets_the_schema_in_the_prompt_and_the_answer_is_validated():
    api = FakeAPI("```json\n" + VALID + "\n```", refuse=("json_schema", "json_object"))
    generator = generator_over(api)
    assert generator.generate(MESSAGES, json_schema=SCHEMA).endswith("```")  # a fenced JSON answer is valid
    ((messages, config),) = api.requests
    assert config.response_schema is None and not (config.extra_body or {}).get("response_format")
    assert messages[-1]["content"].startswith("review this\n\nReply with only one JSON value")
    assert generator.structured.refused == ["json_schema", "json_object"]
    assert generator.structured.by_mode == {"prompt": 1} and generator.structured.valid == 1


def test_an_error_that_is_not_a_refusal_is_raised_and_decides_no_mode():
    def broken(messages, tools, tool_choice, config):
        raise ConnectionError("connection reset by peer")

    generator = text_generator("mockllm/model", role="reviewer", custom_outputs=broken, memoize=False)
    with pytest.raises(ConnectionError):
        generator.generate(MESSAGES, json_schema=SCHEMA)
    assert generator.structured.refused == [] and MODE_MEMORY.working("mockllm/model@None") is None


def test_a_mode_set_in_the_environment_is_used_for_every_call(monkeypatch):
    monkeypatch.setenv(structured.MODE_ENV, "json_object")
    api = FakeAPI(VALID)
    generator_over(api).generate(MESSAGES, json_schema=SCHEMA)
    assert FakeAPI.mode_of(api.requests[0][1]) == "json_object"
    monkeypatch.setenv(structured.MODE_ENV, "grammar")
    with pytest.raises(LCAError, match="LCA_STRUCTURED_OUTPUT='grammar' is not one of auto, json_schema"):
        setting_from_env()


def test_a_call_without_a_schema_is_sent_as_it_is():
    api = FakeAPI("plain prose")
    generator = generator_over(api)
    assert generator.generate(MESSAGES) == "plain prose"
    assert FakeAPI.mode_of(api.requests[0][1]) == "prompt" and generator.structured.calls == 0


@pytest.mark.parametrize(
    "text, expected",
    [
        (VALID, None),
        ("", "an empty reply"),
        ("{", "not JSON"),
        ('{"reasoning": "x", "supported": "yes", "contradicts": "none", "verdict": "accept"}', "is not of type"),
        ('{"reasoning": "x", "supported": true, "contradicts": "fact-x", "verdict": "accept"}', "contradicts"),
        (VALID[:-1] + ', "extra": 1}', "Additional properties"),
        ("1" * 5000, "not JSON"),  # a plain ValueError from json.loads (no .msg): it once raised AttributeError
    ],
)
def test_schema_error_names_what_is_wrong(text, expected):
    error = schema_error(text, SCHEMA)
    assert error is None if expected is None else expected in error


def test_refusal_of_reads_the_last_attempt_of_a_retry_error_and_ignores_other_errors():
    from tenacity import Future as AttemptFuture
    from tenacity import RetryError

    attempt = AttemptFuture(1)
    attempt.set_exception(APIRefusal("Input should be 'text' or 'json_object' at response_format.type"))
    assert "json_object" in refusal_of(RetryError(attempt))
    assert refusal_of(APIRefusal("model not found", status_code=404)) is None
    assert refusal_of(ValueError("timeout")) is None
