"""Solvers that turn a condition into an inspect sample: replay the history, then build the context.

The condition runs in a worker thread (it is synchronous: the substrate, the embedder, llama.cpp);
its generators reach inspect's models through ``InspectRoleGenerator``, which submits each call
to the event loop and waits. Each role uses ``get_model(role=...)``, falling back to the agent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Sequence

from conditions import ROLES, ConditionRuntime, Probe, Session, build_condition, condition_class
from lca.errors import LCAError
from lca.types import TranscriptEntry

PACKET_KEY = "lca_packet"
_EMBEDDER: Any = None
_EMBEDDER_LOCK = threading.Lock()


class LockedEmbedder:
    """The process's one embedder, shared by concurrent samples one call at a time."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if callable(attr):
            def locked(*args, **kwargs):
                with self._lock:
                    return attr(*args, **kwargs)
            return locked
        return attr


def shared_embedder():
    """The process's embedder, with a content-hash cache for the process's lifetime: every sample of
    one history embeds the same turns, and a vector depends only on the model and the text. Query
    vectors are not cached, so recall latency still includes embedding the question."""
    global _EMBEDDER
    with _EMBEDDER_LOCK:
        if _EMBEDDER is None:
            import atexit

            from lca.index.embedders import SentenceTransformerEmbedder
            from lca.index.embedding_cache import CachedEmbedder

            embedder = SentenceTransformerEmbedder()
            embedder.embed_query("warm up")  # load and trace once: recall latency then measures recall, not loading
            embedder.embed(["warm up"])
            folder = tempfile.mkdtemp(prefix="lca-embeddings-")
            cached = CachedEmbedder(embedder, folder)
            atexit.register(shutil.rmtree, folder, True)
            _EMBEDDER = LockedEmbedder(cached)
        return _EMBEDDER


class SharedRoleCalls:
    """Role calls shared by the samples of one process. The samples of one history (a LoCoMo
    conversation's ~200 questions, a scenario's probes) each replay it through the condition, and
    the same model, prompt, settings and epoch give the same call: it runs once, and a sample asking
    while it runs waits for it. Each sample still builds its own store, so samples stay independent;
    only the model's text is reused."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._calls: OrderedDict[str, Future] = OrderedDict()
        self._lock = threading.Lock()

    def run(self, key: str, call: Callable[[], str]) -> tuple[str, bool]:
        """``call()``'s text, and whether it was shared from an earlier or concurrent identical call."""
        with self._lock:
            pending = self._calls.get(key)
            if pending is None:
                pending = self._calls[key] = Future()
                owner = True
                done = [k for k, f in self._calls.items() if f.done()]
                for stale in done[:max(0, len(self._calls) - self.capacity)]:
                    del self._calls[stale]
            else:
                self._calls.move_to_end(key)
                owner = False
        if not owner:
            try:
                return pending.result(), True
            except Exception:   # the first asker's call failed: this sample makes its own
                return call(), False
        try:
            text = call()
        except BaseException as exc:
            with self._lock:
                self._calls.pop(key, None)
            pending.set_exception(exc)
            raise
        pending.set_result(text)
        return text, False


SHARED_ROLE_CALLS = SharedRoleCalls()


class InspectRoleGenerator:
    """A ``TextGenerator`` over an inspect Model, callable from a worker thread. With ``shared``,
    identical calls (model, prompt, settings, ``epoch``) are made once per process."""

    def __init__(self, model, loop: asyncio.AbstractEventLoop, role: str, *, epoch: int | None = None,
                 shared: SharedRoleCalls | None = None) -> None:
        self.model = model
        self.loop = loop
        self.role = role
        self.epoch = epoch
        self.shared = shared
        self.calls = 0          # requests this generator served
        self.shared_calls = 0   # of which answered by an identical call already made or under way

    @property
    def model_id(self) -> str:
        return str(self.model)

    def generate(self, messages: Sequence[dict[str, str]], *, max_tokens: int = 256, temperature: float = 0.0,
                 seed: int | None = None) -> str:
        from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig

        kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
        chat = [kinds[m["role"]](content=m["content"]) for m in messages]
        config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed)
        self.calls += 1

        def call() -> str:
            future = asyncio.run_coroutine_threadsafe(self.model.generate(chat, config=config), self.loop)
            output = future.result()
            if output.error:
                raise LCAError(f"{self.role} model {self.model_id} failed: {output.error}")
            return output.completion

        if self.shared is None:
            return call()
        key = hashlib.sha256(json.dumps([self.model_id, repr(self.model.config), list(messages), max_tokens,
                                         temperature, seed, self.epoch], sort_keys=True, default=str)
                             .encode("utf-8")).hexdigest()
        text, was_shared = self.shared.run(key, call)
        self.shared_calls += was_shared
        return text


class _LoopThread:
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
    """A ``TextGenerator`` for any model string: ``lca-local/...`` runs the in-process llama.cpp
    runtime directly; any other inspect model string (openai/..., anthropic/..., vllm/..., hf/...)
    goes through inspect's ``get_model`` on a private event loop."""
    if model.startswith("lca-local/"):
        from lca.generators import LlamaCppGenerator
        from protocols.providers.lca_local import resolve_model_path

        name = model[len("lca-local/"):]
        return LlamaCppGenerator(None if name == "smollm2" else resolve_model_path(name), **model_args)
    from inspect_ai.model import get_model

    return InspectRoleGenerator(get_model(model, **model_args), _LoopThread.loop(), role)


def parse_params(condition: str, spec: str) -> dict[str, Any]:
    """``"budget_tokens=800,policy=adaptive"`` -> typed parameters (typed by the condition's defaults)."""
    import inspect as pyinspect

    defaults = {name: p.default for name, p in pyinspect.signature(condition_class(condition).__init__).parameters.items()
                if name != "self"}
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(";"))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise LCAError(f"condition parameter '{part}' is not NAME=VALUE")
        if name not in defaults:
            raise LCAError(f"condition '{condition}' has no parameter '{name}'; it takes: {', '.join(defaults)}")
        kind = type(defaults[name])
        try:
            out[name] = kind(value) if kind in (int, float) else value
        except ValueError:
            raise LCAError(f"condition parameter '{name}' must be {kind.__name__}, got '{value}'") from None
    return out


def replay_condition(condition: str, params: dict[str, Any], seed: int = 0):
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, get_model
    from inspect_ai.solver import solver

    @solver(name="replay_condition")
    def _make():
        async def solve(state, generate):
            from protocols.harness.scenario import entry_from_dict

            loop = asyncio.get_running_loop()
            agent = get_model()
            generators = {role: InspectRoleGenerator(get_model(role=role, default=agent), loop, role,
                                                     epoch=state.epoch, shared=SHARED_ROLE_CALLS)
                          for role in ROLES if role != "grader"}
            if "history_ref" in state.metadata:   # a benchmark file, loaded by reference (see harness.benchmarks)
                from protocols.harness.benchmarks import load_history

                history = await asyncio.to_thread(load_history, state.metadata["history_ref"])
            else:
                history = state.metadata["history"]
            workdir = Path(tempfile.mkdtemp(prefix="lca-sample-"))
            runtime = ConditionRuntime(workdir=workdir, embedder=shared_embedder(), generators=generators, seed=seed,
                                       identity=history.get("identity") or {})
            probe = Probe(str(state.metadata.get("probe", state.sample_id)), state.input_text,
                          state.metadata.get("asked_at"))

            def work():
                built = build_condition(condition, **params).attach(runtime)
                try:
                    built.reset()
                    for session in history["sessions"]:
                        built.ingest(Session(session["id"], tuple(
                            e if isinstance(e, TranscriptEntry) else entry_from_dict(e) for e in session["entries"])))
                        built.end_session()
                    return built.build_context(probe)
                finally:
                    built.close()
                    shutil.rmtree(workdir, ignore_errors=True)

            packet = await asyncio.to_thread(work)
            state.store.set(PACKET_KEY, packet.to_dict() | {"pointers": sorted({p for i in packet.items
                                                                                 for p in i.pointers}),
                                                             "injected_text": packet.injected_text(),
                                                             "role_calls": {r: g.calls for r, g in generators.items()},
                                                             "role_calls_shared": {r: g.shared_calls
                                                                                   for r, g in generators.items()}})
            chat = {"system": ChatMessageSystem, "user": ChatMessageUser}
            state.messages = [chat[m["role"]](content=m["content"]) for m in packet.messages]
            return state
        return solve
    return _make()
