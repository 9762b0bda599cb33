"""Solvers that turn a condition into an inspect sample: replay the history, then build the context.

The condition runs in a worker thread (it is synchronous: the substrate, the embedder, llama.cpp);
its generators reach inspect's models through ``InspectRoleGenerator`` (``protocols.providers.models``),
which submits each call to the event loop and waits. Each role uses ``get_model(role=...)``, falling
back to the agent.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, get_model
from inspect_ai.solver import solver

from conditions import ROLES, ConditionRuntime, build_condition
from lca.index.embedder_choice import DEFAULT_EMBEDDER, embedder_source, make_embedder
from lca.index.embedding_cache import CachedEmbedder
from lca.params import parse_assignments
from lca.recall.floor import prime_off_topic
from lca.retrieval import RetrievalConfig
from protocols.harness.benchmarks import load_history
from protocols.harness.replay import history_sessions, make_probe, replay
from protocols.harness.variants import condition_parameter_types
from protocols.providers.models import InspectRoleGenerator

PACKET_KEY = "lca_packet"
LOGGER = logging.getLogger("lca.harness")
_EMBEDDER: Any = None
_EMBEDDER_NAME: str | None = None  # what ``_EMBEDDER`` is made from (``use_embedder``); None: the default
_EMBEDDER_LOCK = threading.Lock()


class LockedEmbedder:
    """The process's one embedder, shared by concurrent samples one call at a time. ``exclusive()`` keeps it for
    one thread over a span of calls: a sample holds it while its context is built, so the recall latency it reports
    is recall's own work, not the wait for another sample's ingest batch (about 1.4 s of a 1.4 s mean, measured with
    four samples in flight). Token counts use the embedder's own tokenizer, not the model, under a lock of their own."""

    _TOKENIZER_CALLS = frozenset({"count_tokens", "token_offsets"})

    def __init__(self, inner) -> None:
        self._inner = inner
        self._lock = threading.RLock()
        self._tokenizer_lock = threading.Lock()

    def exclusive(self):
        """The embedder for this thread alone until the block ends (a re-entrant hold)."""
        return self._lock

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if callable(attr):
            lock = self._tokenizer_lock if name in self._TOKENIZER_CALLS else self._lock

            def locked(*args, **kwargs):
                with lock:
                    return attr(*args, **kwargs)

            return locked
        return attr


def use_embedder(name: str | None) -> str:
    """Make ``name`` (a registered embedder or a model folder; None: the default) the one every sample's store is
    built with from now on in this process (a study's ``embedder``). Checked first; the shared embedder is made
    again only when the name changes. Returns what the name stands for (``embedder_source``)."""
    global _EMBEDDER, _EMBEDDER_NAME
    source = embedder_source(name or DEFAULT_EMBEDDER)
    with _EMBEDDER_LOCK:
        if source != (_EMBEDDER_NAME or DEFAULT_EMBEDDER):
            _EMBEDDER = None
        _EMBEDDER_NAME = source
    return source


def shared_embedder():
    """The process's embedder (``use_embedder``; MiniLM unless told), with a content-hash cache for the
    process's lifetime: every sample of one history embeds the same turns, and a vector depends only on the
    model and the text. Query vectors are not cached, so recall latency still includes embedding the question."""
    global _EMBEDDER
    with _EMBEDDER_LOCK:
        if _EMBEDDER is None:
            embedder = make_embedder(_EMBEDDER_NAME or DEFAULT_EMBEDDER)
            embedder.embed_query("warm up")  # load and trace once: recall latency then measures recall, not loading
            embedder.embed(["warm up"])
            prime_off_topic(embedder)  # the floor's off-topic questions: embedded once here, not in a first recall
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
                for stale in done[: max(0, len(self._calls) - self.capacity)]:
                    del self._calls[stale]
            else:
                self._calls.move_to_end(key)
                owner = False
        if not owner:
            try:
                return pending.result(), True
            except Exception:  # the first asker's call failed: this sample makes its own
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


def parse_params(condition: str, spec: str) -> dict[str, Any]:
    """``"budget_tokens=800;policy=adaptive"`` -> typed parameters (``lca.params``, typed by the condition's
    defaults). ';' separates parameters so a value may hold ',' and '=' (``weights=experience=0,temporal=0``)."""
    items = [part for part in (p.strip() for p in (spec or "").split(";")) if part]
    return parse_assignments(
        items, flag=f"condition '{condition}' parameter", known=condition_parameter_types(condition)
    )


def role_generators(state, loop) -> dict[str, InspectRoleGenerator]:
    """The sample's generator per role (inspect's model roles, each falling back to the agent), callable from the
    condition's worker thread; identical calls are shared across the process's samples."""
    agent = get_model()
    return {
        role: InspectRoleGenerator(
            get_model(role=role, default=agent), loop, role, epoch=state.epoch, shared=SHARED_ROLE_CALLS
        )
        for role in ROLES
        if role != "grader"
    }


async def sample_history(state) -> dict[str, Any]:
    """The sample's history: in its metadata, or a benchmark file's, loaded by reference (``harness.benchmarks``)."""
    if "history_ref" in state.metadata:
        return await asyncio.to_thread(load_history, state.metadata["history_ref"])
    return state.metadata["history"]


def sample_runtime(
    history: dict[str, Any],
    generators,
    seed: int,
    retrieval: RetrievalConfig | None = None,
    recall_weights: Mapping[str, float] | None = None,
) -> ConditionRuntime:
    """A runtime in a fresh working folder (the caller removes it) with the process's embedder; ``retrieval``:
    the protocol's ranking for the condition's store (its ``retrieval.yaml``), else the store's own;
    ``recall_weights``: its ``recall-weights.yaml``."""
    return ConditionRuntime(
        workdir=Path(tempfile.mkdtemp(prefix="lca-sample-")),
        embedder=shared_embedder(),
        generators=generators,
        seed=seed,
        identity=history.get("identity") or {},
        retrieval=retrieval,
        recall_weights=dict(recall_weights or {}),
    )


def sample_probe(state, history: dict[str, Any], runtime: ConditionRuntime):
    """The history's sessions as conditions take them and the sample's probe (``harness.replay``); run in the
    worker thread (the continuation signals may embed)."""
    context = state.metadata.get("probe_context") or {}
    sessions = history_sessions(history, continues=bool(context.get("continues")))
    probe = make_probe(
        str(state.metadata.get("probe", state.sample_id)),
        state.input_text,
        state.metadata.get("asked_at"),
        context,
        sessions,
        embedder=runtime.embedder,
    )
    return sessions, probe


def packet_record(packet, generators) -> dict[str, Any]:
    """A context packet as the sample's store keeps it: the packet, its pointers and text, the role calls and
    what their structured-output calls did."""
    return packet.to_dict() | {
        "pointers": sorted({p for i in packet.items for p in i.pointers}),
        "injected_text": packet.injected_text(),
        "role_calls": {r: g.calls for r, g in generators.items()},
        "role_calls_shared": {r: g.shared_calls for r, g in generators.items()},
        # per role, what its JSON-schema calls did: the way the API was asked (its structured output, or the
        # schema in the prompt), answers valid, retried, still invalid, and the model names the API answered with
        "role_structured": {
            r: g.structured.to_dict()
            for r, g in generators.items()
            if getattr(g, "structured", None) and g.structured.calls
        },
    }


def record_packet(state, condition: str, packet, generators) -> None:
    """Keep the packet (``PACKET_KEY``) and say in the sample's metadata and the log what the condition did less
    of than it claims (the run's summary counts it)."""
    state.store.set(PACKET_KEY, packet_record(packet, generators))
    shortfalls = dict(packet.notes.get("shortfalls") or {})
    state.metadata["shortfalls"] = shortfalls
    for kind, detail in shortfalls.items():
        LOGGER.warning("condition %s did less than it claims (%s): %s", condition, kind, detail)


def chat_messages(messages):
    chat = {"system": ChatMessageSystem, "user": ChatMessageUser}
    return [chat[m["role"]](content=m["content"]) for m in messages]


def replay_condition(
    condition: str,
    params: dict[str, Any],
    seed: int = 0,
    retrieval: RetrievalConfig | None = None,
    recall_weights: Mapping[str, float] | None = None,
):
    @solver(name="replay_condition")
    def _make():
        async def solve(state, generate):
            generators = role_generators(state, asyncio.get_running_loop())
            history = await sample_history(state)
            runtime = sample_runtime(history, generators, seed, retrieval, recall_weights)

            def work():
                sessions, probe = sample_probe(state, history, runtime)
                built = build_condition(condition, **params).attach(runtime)
                try:
                    built.reset()
                    return replay(built, sessions, probe, building=runtime.embedder)
                finally:
                    built.close()
                    shutil.rmtree(runtime.workdir, ignore_errors=True)

            packet = await asyncio.to_thread(work)
            record_packet(state, condition, packet, generators)
            state.messages = chat_messages(packet.messages)
            return state

        return solve

    return _make()


def answer_instruction(text: str):
    """A solver that appends ``text`` to the last user message: the protocol's answer format (for example, label
    each claim with its source), given to every condition alike after the context was built from the question."""

    @solver(name="answer_instruction")
    def _make():
        async def solve(state, generate):
            for n in range(len(state.messages) - 1, -1, -1):
                if state.messages[n].role == "user":
                    state.messages[n] = ChatMessageUser(content=f"{state.messages[n].text}\n\n{text}")
                    break
            return state

        return solve

    return _make()
