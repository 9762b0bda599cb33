"""A generator's ``json_schema`` through inspect: InspectRoleGenerator sends it as the config's
``response_schema``, and the lca-local provider hands that schema to its runtime (a grammar there),
without the "unsupported" warning it gives options it ignores."""

from __future__ import annotations

import asyncio
import logging

from inspect_ai.model import ChatMessageUser, GenerateConfig, ModelOutput, ModelUsage, ResponseSchema
from inspect_ai.util import JSONSchema

from lca.consolidation.prompts import reviewer_schema
from lca.generators import GenerationUsage
from protocols.providers.lca_local import LCALocalAPI
from protocols.providers.models import text_generator

SCHEMA = reviewer_schema(["fact-db"])
VALID_VERDICT = '{"reasoning": "no line says it", "supported": false, "contradicts": "none", "verdict": "reject"}'


class SchemaRecordingGenerator:
    """Answers a fixed JSON text and records the schema each call asked for."""

    model_id = "fake-constrained"
    n_ctx = 2048

    def __init__(self) -> None:
        self.schemas: list[dict | None] = []
        self.last_usage: GenerationUsage | None = None

    def generate(self, messages, *, max_tokens=256, temperature=None, seed=None, json_schema=None):
        self.schemas.append(json_schema)
        self.last_usage = GenerationUsage(7, 3, 10, 0.01, "stop")
        return '{"verdict": "accept"}'


def test_lca_local_turns_the_response_schema_into_the_runtimes_json_schema(caplog):
    generator = SchemaRecordingGenerator()
    api = LCALocalAPI("smollm2", generator=generator)
    config = GenerateConfig(response_schema=ResponseSchema(name="verdict", json_schema=JSONSchema(**SCHEMA)))
    with caplog.at_level(logging.WARNING):
        output, call = asyncio.run(api.generate([ChatMessageUser(content="review")], [], "auto", config))
        asyncio.run(api.generate([ChatMessageUser(content="again")], [], "auto", GenerateConfig()))
    assert output.completion == '{"verdict": "accept"}'
    asked, unasked = generator.schemas
    assert asked == SCHEMA and unasked is None  # the same schema (key order too: it orders the answer)
    assert list(asked["properties"]) == ["reasoning", "supported", "contradicts", "verdict"]
    assert call.request["json_schema"] == SCHEMA
    assert "response_schema" not in caplog.text


def test_an_inspect_role_generator_sends_json_schema_as_the_response_schema():
    seen: list[GenerateConfig] = []

    def respond(messages, tools, tool_choice, config):
        seen.append(config)
        out = ModelOutput.from_content(model="fake", content=VALID_VERDICT)
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    generator = text_generator("mockllm/model", role="reviewer", custom_outputs=respond, memoize=False)
    messages = [{"role": "user", "content": "review this"}]
    assert generator.generate(messages, max_tokens=9, json_schema=SCHEMA) == VALID_VERDICT  # valid: asked once
    generator.generate(messages, max_tokens=9)
    constrained, free = seen
    assert constrained.response_schema is not None and constrained.response_schema.name == "reviewer_answer"
    sent = constrained.response_schema.json_schema.model_dump(mode="json", exclude_none=True)
    assert sent["properties"]["contradicts"] == {"enum": ["none", "fact-db"]}
    assert sent["required"] == ["reasoning", "supported", "contradicts", "verdict"]
    assert free.response_schema is None
