"""A JSON-schema answer from any inspect model: the API's own structured output where it has one, a
validated retry where it does not.

``InspectRoleGenerator`` (``protocols.providers.models``) sends every call that carries a ``json_schema``
(consolidation's writer and reviewer, the handoff, the raters) through ``ask``. Three ways to ask, the
*modes*:

``json_schema``  inspect's ``ResponseSchema``: ``response_format = {"type": "json_schema", ...}`` on an
                 OpenAI-compatible API (OpenAI, vLLM, llama.cpp's ``llama-server``, Ollama), the native
                 form on other providers, a llama.cpp grammar on ``lca-local``. inspect's ``JSONSchema``
                 keeps the common keywords only (no ``minItems``/``maxItems``).
``json_object``  ``response_format = {"type": "json_object", "schema": <the whole schema>}`` in the request
                 body: llama-cpp-python's server (``python -m llama_cpp.server``), whose request type has no
                 ``json_schema`` (it answers one with HTTP 500, which inspect would retry for ever).
``prompt``       nothing in the request: the schema is appended to the last user turn.

``auto`` (the default; ``LCA_STRUCTURED_OUTPUT`` picks one mode for every model) tries them in that order
per model, sending each untried mode once without inspect's retries: a mode the API refuses (an error that
names ``response_format``, ``json_schema`` or ``json_object``) is not tried again for that model in this
process; any other error is raised as it is, after inspect's own retries.

Whatever the mode, the answer is parsed and validated (``jsonschema``) against the schema the API was given.
An invalid answer that was not cut by the token limit is asked again, with the error and the schema, at most
``LCA_STRUCTURED_RETRIES`` (2) times; one that stays invalid is counted as a failure and the first answer
is returned (the caller parses it as untrusted, as it always does). ``StructuredStats`` keeps the counts; a
sample's packet records them per role (``role_structured``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lca.errors import LCAError

LOGGER = logging.getLogger("lca.structured")
MODES = ("json_schema", "json_object", "prompt")
SETTINGS = ("auto", *MODES)
MODE_ENV = "LCA_STRUCTURED_OUTPUT"
RETRIES_ENV = "LCA_STRUCTURED_RETRIES"
DEFAULT_RETRIES = 2
CUT = ("max_tokens", "model_length")
# words an API's refusal of the structured-output parameter names (llama-cpp-python: "Input should be 'text' or
# 'json_object'" at response_format.type; vLLM and others: "response_format ... not supported")
_REFUSAL_WORDS = ("response_format", "json_schema", "json_object")
PROMPT_NOTE = "Reply with only one JSON value, valid under this JSON schema, and nothing else:\n{schema}"
REPAIR_NOTE = (
    "That reply is not valid: {error}. Reply again with only one JSON value, valid under this JSON schema, "
    "and nothing else:\n{schema}"
)


def setting_from_env(value: str | None = None) -> str:
    """The structured-output setting: ``value``, else ``$LCA_STRUCTURED_OUTPUT``, else ``auto``."""
    chosen = (value if value is not None else os.environ.get(MODE_ENV, "")).strip().lower() or "auto"
    if chosen not in SETTINGS:
        raise LCAError(f"{MODE_ENV}={chosen!r} is not one of {', '.join(SETTINGS)}")
    return chosen


def retries_from_env(value: int | None = None) -> int:
    """How many times an invalid answer is asked again: ``value``, else ``$LCA_STRUCTURED_RETRIES``, else 2."""
    if value is not None:
        chosen: Any = value
    else:
        text = os.environ.get(RETRIES_ENV, "").strip()
        try:
            chosen = int(text) if text else DEFAULT_RETRIES
        except ValueError:
            raise LCAError(f"{RETRIES_ENV}={text!r} is not a whole number") from None
    if isinstance(chosen, bool) or not isinstance(chosen, int) or chosen < 0:
        raise LCAError(f"structured-output retries must be a whole number >= 0, got {chosen!r}")
    return chosen


@dataclass
class StructuredStats:
    """What one generator's schema calls did: ``calls`` asked, ``valid`` answered valid (``valid_after_retry``
    of them only when asked again), ``retries`` extra requests, ``failures`` still invalid when the retries ran
    out (``cut`` of them stopped by the token limit, never retried), ``refused`` the modes the API refused,
    ``by_mode`` the calls per mode and ``served`` the model names the API answered with."""

    calls: int = 0
    valid: int = 0
    valid_after_retry: int = 0
    retries: int = 0
    failures: int = 0
    cut: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "valid": self.valid,
            "valid_after_retry": self.valid_after_retry,
            "retries": self.retries,
            "failures": self.failures,
            "cut": self.cut,
            "by_mode": dict(self.by_mode),
            "refused": list(self.refused),
            "served": list(self.served),
            "last_error": self.last_error,
        }


class ModeMemory:
    """Per model (its name and base URL), the mode that worked and the modes refused, for this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._working: dict[str, str] = {}
        self._refused: dict[str, set[str]] = {}

    def working(self, key: str) -> str | None:
        with self._lock:
            return self._working.get(key)

    def refused(self, key: str) -> set[str]:
        with self._lock:
            return set(self._refused.get(key, ()))

    def confirm(self, key: str, mode: str) -> None:
        with self._lock:
            self._working.setdefault(key, mode)

    def refuse(self, key: str, mode: str) -> None:
        with self._lock:
            self._refused.setdefault(key, set()).add(mode)
            if self._working.get(key) == mode:
                del self._working[key]

    def clear(self) -> None:
        with self._lock:
            self._working.clear()
            self._refused.clear()


MODE_MEMORY = ModeMemory()


def schema_error(text: str, schema: Mapping[str, Any]) -> str | None:
    """Why ``text`` is not one JSON value valid under ``schema`` (a ```json fence around it is allowed), or
    None when it is."""
    import jsonschema

    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").strip()
        body = body[len("json") :].strip() if body.lower().startswith("json") else body
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at character {exc.pos})" if body else "an empty reply"
    except ValueError as exc:  # parsed, but a value Python refuses (an integer past its digit limit)
        return f"not JSON ({exc})"
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        error = jsonschema.exceptions.best_match(validator_class(dict(schema)).iter_errors(value))
    except jsonschema.exceptions.SchemaError as exc:
        raise LCAError(f"json_schema is not a valid JSON schema: {exc.message}") from None
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{error.message}{f' (at {where})' if where else ''}"


def refusal_of(exc: BaseException) -> str | None:
    """The API's message when ``exc`` is its refusal of the structured-output parameter, else None. inspect
    wraps an error that ran out of retries in tenacity's ``RetryError``; its last attempt's error is read."""
    seen = 0
    while exc is not None and seen < 5:
        seen += 1
        last = getattr(exc, "last_attempt", None)  # tenacity.RetryError
        if last is not None and callable(getattr(last, "exception", None)):
            inner = last.exception()
            if inner is not None:
                exc = inner
                continue
        break
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    text = " ".join(str(part) for part in (exc, body) if part)
    if status is not None and not (400 <= int(status) < 600):
        return None
    if any(word in text for word in _REFUSAL_WORDS):
        return " ".join(text.split())[:300]
    return None


@dataclass(frozen=True)
class Request:
    """One way to ask: the mode, the generate-config changes it makes, the schema the answer is held to, and
    the messages (the prompt mode appends the schema to the last user turn)."""

    mode: str
    config: dict[str, Any]
    schema: Mapping[str, Any]
    messages: Sequence[dict[str, str]]


def request_for(
    mode: str,
    messages: Sequence[dict[str, str]],
    json_schema: Mapping[str, Any],
    response_schema: Callable[[Mapping[str, Any]], Any],
    extra_body: Mapping[str, Any] | None = None,
) -> Request:
    """The request for ``mode``; ``response_schema`` turns a JSON schema into inspect's ``ResponseSchema``."""
    if mode == "json_schema":
        given = response_schema(json_schema)
        sent = given.json_schema.model_dump(mode="json", exclude_none=True)
        return Request(mode, {"response_schema": given}, sent, list(messages))
    if mode == "json_object":
        body = dict(extra_body or {}) | {"response_format": {"type": "json_object", "schema": dict(json_schema)}}
        return Request(mode, {"extra_body": body}, json_schema, list(messages))
    if mode == "prompt":
        note = PROMPT_NOTE.format(schema=json.dumps(json_schema, sort_keys=True))
        return Request(mode, {}, json_schema, with_note(messages, note))
    raise LCAError(f"unknown structured-output mode {mode!r}; one of {', '.join(MODES)}")


def with_note(messages: Sequence[dict[str, str]], note: str) -> list[dict[str, str]]:
    """The messages with ``note`` after the last user turn's text (a new user turn when the last is not one)."""
    out = [dict(m) for m in messages]
    if out and out[-1]["role"] == "user":
        out[-1]["content"] = f"{out[-1]['content']}\n\n{note}"
    else:
        out.append({"role": "user", "content": note})
    return out


Send = Callable[[Sequence[dict[str, str]], dict[str, Any], bool], Any]  # (messages, config changes, probing)


def ask(
    send: Send,
    messages: Sequence[dict[str, str]],
    json_schema: Mapping[str, Any],
    *,
    response_schema: Callable[[Mapping[str, Any]], Any],
    model_key: str,
    stats: StructuredStats,
    setting: str = "auto",
    retries: int = DEFAULT_RETRIES,
    memory: ModeMemory = MODE_MEMORY,
    extra_body: Mapping[str, Any] | None = None,
    label: str = "model",
) -> str:
    """One schema call through ``send`` (which returns an inspect ``ModelOutput`` or raises), as the module
    docstring says. ``probing`` (the third argument of ``send``) asks for no retries: the mode is untried."""
    stats.calls += 1
    request, output = _first_answer(
        send, messages, json_schema, response_schema, model_key, stats, setting, memory, extra_body, label
    )
    first = text = output.completion
    for attempt in range(retries + 1):
        error = schema_error(text, request.schema)
        if error is None:
            stats.valid += 1
            stats.valid_after_retry += attempt > 0
            return text
        stats.last_error = error
        cut = output.stop_reason in CUT
        if cut or attempt == retries:
            stats.failures += 1
            stats.cut += cut
            LOGGER.warning(
                "%s: a %s answer is not valid under its schema%s: %s",
                label,
                request.mode,
                " (cut by the token limit)" if cut else f" after {retries} retr{'y' if retries == 1 else 'ies'}",
                error,
            )
            return first
        stats.retries += 1
        repair = [
            *request.messages,
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": REPAIR_NOTE.format(error=error, schema=json.dumps(request.schema, sort_keys=True)),
            },
        ]
        output = send(repair, request.config, False)
        _served(stats, output)
        text = output.completion
    return first  # pragma: no cover - the loop returns


def _first_answer(send, messages, json_schema, response_schema, model_key, stats, setting, memory, extra_body, label):
    """The first answer and the request that got it: the set mode, or (auto) the mode that works for this model,
    probing the untried ones in order and remembering what the API refused."""
    while True:
        if setting != "auto":
            mode, probing = setting, False
        else:
            mode = memory.working(model_key)
            probing = mode is None
            if mode is None:
                refused = memory.refused(model_key)
                mode = next(m for m in MODES if m not in refused or m == "prompt")
        request = request_for(mode, messages, json_schema, response_schema, extra_body)
        try:
            output = send(request.messages, request.config, probing)
        except Exception as exc:
            refusal = refusal_of(exc) if probing and mode != "prompt" else None
            if refusal is None:
                if probing:  # not a refusal of the mode: ask once more with inspect's retries
                    output = send(request.messages, request.config, False)
                    memory.confirm(model_key, mode)
                    break
                raise
            memory.refuse(model_key, mode)
            stats.refused.append(mode)
            LOGGER.warning(
                "%s: the API refused structured output as %s (%s); trying the next way", label, mode, refusal
            )
            continue
        if probing:
            memory.confirm(model_key, mode)
        break
    stats.by_mode[request.mode] = stats.by_mode.get(request.mode, 0) + 1
    _served(stats, output)
    return request, output


def _served(stats: StructuredStats, output: Any) -> None:
    name = getattr(output, "model", None)
    if name and str(name) not in stats.served:
        stats.served.append(str(name))
