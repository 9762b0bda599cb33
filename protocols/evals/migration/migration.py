"""Migration: freeze a substrate checkpoint with an effect left in flight, move it by the migration protocol with
one binding (or several at once) changed, and measure authorized system continuity (mechanical), the work in
flight carried (the effect performed exactly once), the cost of the move (downtime, bytes, tokens, seconds per
step, operator steps) and behavioural identity fidelity (the hollow-copy probes, before versus after).

inspect eval protocols/evals/migration/migration.py -T bindings=host,model --model lca-local/smollm2 \
    --model-role migrated=openai/gpt-4o-mini
lca run migration --model lca-local/smollm2 --conditions full-lca,transcript-recall --role migrated=lca-local/smollm2
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from inspect_ai import Task, task
from inspect_ai.model import GenerateConfig, ModelOutput, get_model
from inspect_ai.solver import solver

from conditions import Probe, build_condition, condition_class
from lca.bundle import MigrationResult, record_self_description
from lca.context import LiveContextManager
from lca.errors import LCAError
from lca.intents import IntentLog
from lca.migration_check import check_migration, history_fingerprint
from lca.recall import RecallContext
from lca.scripted_loop import ScriptedLoop
from lca.self_description import QUESTION
from lca.substrate import Substrate
from lca.transcript import TranscriptStore
from protocols.evals.migration.cost import move_cost
from protocols.evals.migration.dataset import DEFAULT_SCENARIOS, binding_axes, migration_samples, parse_bindings
from protocols.evals.migration.effects import OUTBOX, crash_point, leave_pending
from protocols.evals.migration.operator import move_facts, operator_steps
from protocols.evals.migration.scorer import (
    MIGRATION_KEY,
    identity_fidelity,
    migration_cost,
    migration_system,
    work_carried,
)
from protocols.evals.registry import folder_metadata
from protocols.harness.replay import replay
from protocols.harness.scorers import substrate
from protocols.harness.solvers import (
    chat_messages,
    packet_record,
    record_packet,
    role_generators,
    sample_history,
    sample_probe,
    sample_runtime,
)
from protocols.harness.tasks import condition_task
from protocols.harness.variants import parse_variant
from protocols.providers.models import InspectRoleGenerator, is_local, local_generator

SURFACES = ("system", "user-turn")
"""How a context reaches the model: as a system message, or written into the user's turn (a surface without a
system role). Before the move it is always ``system``."""
HARNESSES = ("inspect", "scripted")
"""What drives the agent: inspect's agent loop (a task, its solvers, inspect's model API), or the plain scripted
loop (``lca.scripted_loop``: recall, answer, append, with no harness around it). Before the move it is inspect's."""
MIGRATED_ROLE = "migrated"


@runtime_checkable
class MovableCondition(Protocol):
    """What this eval asks of a condition beyond the contract (``full-lca``, ``transcript-recall``): the substrate
    it keeps (once reset), recall's context for a probe, and the move of that substrate."""

    substrate: Substrate

    def recall_context(self, probe: Probe) -> RecallContext: ...

    def migrate(
        self, target: Path | str, *, bundle_dir: Path | str, binding: Mapping[str, Any] | None = None
    ) -> MigrationResult: ...


def on_surface(messages, surface: str) -> list[dict[str, str]]:
    """The packet's messages as ``surface`` delivers them."""
    messages = [dict(m) for m in messages]
    if surface == "system" or not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], messages[1:]
    first_user = next(n for n, m in enumerate(rest) if m["role"] == "user")
    rest[first_user] = {"role": "user", "content": f"{system}\n\n{rest[first_user]['content']}"}
    return rest


def _recalled(condition: MovableCondition, probe: Probe) -> list[tuple[str, float]]:
    result = condition.substrate.recall(condition.recall_context(probe))
    return [(item.source, round(item.score, 6)) for item in result.items]


def _latest_handoff(condition: MovableCondition) -> str | None:
    latest = LiveContextManager.latest_handoff(condition.substrate, "agent")
    return latest.id if latest is not None else None


def _after_generator(after_model, harness: str, loop: asyncio.AbstractEventLoop, epoch: int):
    """The agent model after the move as the harness calls it: inspect's model API for the inspect loop; for the
    scripted loop a local model runs in process with no inspect in the path, any other through the port over
    inspect's client (the loop around it is still not inspect's). Returns the generator and the client's name."""
    if harness == "scripted" and is_local(str(after_model)):
        return local_generator(str(after_model)), "llama-cpp in process"
    # never shared: after the move the model is asked afresh, so a model that answers the same input differently
    # run to run shows it here instead of being handed its own earlier answer
    return InspectRoleGenerator(after_model, loop, MIGRATED_ROLE, epoch=epoch), "inspect model api"


def migrate_and_probe(
    condition: str, params: dict[str, Any], seed: int, *, surface: str, harness: str, max_tokens: int
):
    """Replay the history into the condition, answer the probe (before), leave an effect in flight, migrate the
    substrate with the sample's binding changed, check the move, resume the work in flight on the target, ask the
    self-description question, answer the probe again (after) under the new harness."""

    @solver(name="migrate_and_probe")
    def _make():
        async def solve(state, generate):
            loop = asyncio.get_running_loop()
            generators = role_generators(state, loop)
            kind = str(state.metadata["binding"])
            axes = binding_axes(kind)
            agent_model = get_model()
            after_model = get_model(role=MIGRATED_ROLE, default=agent_model) if "model" in axes else agent_model
            after_harness = harness if "harness" in axes else "inspect"
            after_agent, client = _after_generator(after_model, after_harness, loop, state.epoch)
            history = await sample_history(state)
            runtime = sample_runtime(history, generators, seed)
            after_surface = surface if "surface" in axes else "system"

            def answer(agent, messages) -> str:
                return agent.generate(messages, max_tokens=max_tokens, temperature=0.0, seed=seed)

            def work():
                sessions, probe = sample_probe(state, history, runtime)
                built = build_condition(condition, **params).attach(runtime)
                try:
                    built.reset()
                    if not isinstance(built, MovableCondition):  # the task refuses such a condition by name
                        raise LCAError(f"migration: condition '{built.name}' keeps no substrate to migrate")
                    before = replay(built, sessions, probe)
                    answer_before = answer(generators["agent"], before.messages)
                    recall_before, handoff_before = _recalled(built, probe), _latest_handoff(built)
                    source = Path(built.substrate.home)
                    pending = leave_pending(
                        source, f"{state.sample_id}#effect", crash_point(str(state.sample_id), seed)
                    )
                    fingerprint = history_fingerprint(source)
                    stale_writer = TranscriptStore(source)  # a writer the move leaves behind
                    target = runtime.workdir / f"host-{kind}" / "store"
                    bundle = runtime.workdir / "bundle"
                    binding = {
                        "changed": kind,
                        "axes": list(axes),
                        "model": str(after_model),
                        "host": str(target.parent),
                        "surface": after_surface,
                        "harness": after_harness,
                    }
                    result = built.migrate(target, bundle_dir=bundle, binding=binding)
                    check = check_migration(source, target, result, fingerprint, stale_writer=stale_writer)
                    if not result.ok:
                        raise LCAError(f"migration of sample {state.sample_id} failed: {result.error}")
                    stale_refused = pending.stale_finish_refused()

                    def context(question: str) -> list[dict[str, str]]:
                        return on_surface(
                            built.build_context(replace(probe, question=question)).messages, after_surface
                        )

                    host = (
                        ScriptedLoop(
                            built.substrate,
                            after_agent,
                            session_id="after-move",
                            context=context,
                            max_tokens=max_tokens,
                            seed=seed,
                        )
                        if after_harness == "scripted"
                        else None
                    )
                    started = time.perf_counter()  # the harness on the target settles the work in flight first
                    resumed = host.resume if host is not None else IntentLog(target).resume
                    settled = [vars(r) for r in resumed({OUTBOX: pending.outbox})]
                    carried = {
                        **pending.outcome(target),
                        "stale_finish_refused": stale_refused,
                        "resumed": settled,
                        "resume_s": round(time.perf_counter() - started, 6),
                    }
                    recall_after, handoff_after = _recalled(built, probe), _latest_handoff(built)
                    after = built.build_context(probe)
                    cost = move_cost(result, bundle, built.substrate, after.injected_tokens)
                    asked = Probe(
                        f"{probe.id}:self-description",
                        QUESTION,
                        probe.asked_at,
                        channel=probe.channel,
                        project=probe.project,
                        role=probe.role,
                    )
                    described = record_self_description(
                        target,
                        answer(after_agent, on_surface(built.build_context(asked).messages, after_surface)),
                        binding,
                        migration=str(result.steps[0]["migration"]),
                    )
                    turn = host.turn(probe.question) if host is not None else None
                    capabilities = next(
                        (s.get("capabilities") or [] for s in result.steps if s["step"] == "resume"), []
                    )
                    record = {
                        "binding": binding,
                        "check": check.to_dict(),
                        "recall_equal": recall_before == recall_after,
                        "handoff_carried": None if handoff_before is None else handoff_before == handoff_after,
                        "self_description": described,
                        "before": {"answer": answer_before, "packet": packet_record(before, generators)},
                        "work": carried,
                        "cost": cost,
                        "operator": operator_steps(move_facts(axes, settled, capabilities)),
                        "summary": {
                            "bundle_id": result.bundle_id,
                            "epochs": [result.source_epoch, result.target_epoch],
                            "steps": [s["step"] for s in result.steps],
                            "recalled_items": [len(recall_before), len(recall_after)],
                            "model_client": client,
                        },
                    }
                    return record, after, turn
                finally:
                    built.close()
                    shutil.rmtree(runtime.workdir, ignore_errors=True)

            try:
                record, after, turn = await asyncio.to_thread(work)
            finally:
                close = getattr(after_agent, "close", None)
                if close is not None:
                    close()
            record_packet(state, condition, after, generators)
            if turn is not None:  # the scripted loop answered and appended the turn on the target
                state.messages = chat_messages(turn.messages)
                state.output = ModelOutput.from_content(model=str(after_model), content=turn.answer)
                record["after"] = {"answer": turn.answer, "model": str(after_model), "appended": list(turn.appended)}
            else:
                state.messages = chat_messages(on_surface(after.messages, after_surface))
                state.output = await after_model.generate(
                    state.messages, config=GenerateConfig(max_tokens=max_tokens, temperature=0.0, seed=seed)
                )
                record["after"] = {"answer": state.output.completion, "model": str(after_model)}
            state.messages.append(state.output.message)
            state.store.set(MIGRATION_KEY, record)
            return state

        return solve

    return _make()


@task
def migration(
    scenarios: str = str(DEFAULT_SCENARIOS),
    condition: str = "full-lca",
    params: str = "",
    bindings: str = "host,model,harness,surface",
    surface: str = "user-turn",
    harness: str = "scripted",
    seed: int = 0,
    max_tokens: int = 160,
) -> Task:
    """``condition``: one that keeps a substrate (``full-lca``, ``transcript-recall`` or a variant of them).
    ``bindings``: the moves, each a copy of every probe: one axis (``host``, ``model``, ``harness``, ``surface``) or
    several at once joined by ``+`` (``model+surface``). ``surface``: how the context reaches the model after a
    ``surface`` change (``user-turn``: no system message). ``harness``: the loop that drives the agent after a
    ``harness`` change (``scripted``: ``lca.scripted_loop``; before the move it is inspect's). The ``migrated`` model
    role answers after a ``model`` change (default: the agent)."""
    chosen = parse_bindings(bindings)
    if surface not in SURFACES[1:]:  # before the move it is always the system message
        raise LCAError(f"migration: surface must be one the agent did not use before the move: {SURFACES[1]}")
    if harness not in HARNESSES[1:]:  # before the move it is always inspect's agent loop
        raise LCAError(f"migration: harness must be one the agent did not run under before the move: {HARNESSES[1]}")
    cls = condition_class(parse_variant(condition).condition)
    if not hasattr(cls, "migrate"):
        raise LCAError(
            f"migration: condition '{cls.name}' keeps no substrate to migrate; use full-lca or transcript-recall"
        )
    task_ = condition_task(
        folder_metadata(__file__),
        condition=condition,
        params=params,
        seed=seed,
        max_tokens=max_tokens,
        dataset=scenarios,
        dataset_name=Path(scenarios).stem,
        load=lambda: migration_samples(scenarios, chosen),
        scorers=lambda: [
            migration_system(),
            work_carried(),
            migration_cost(),
            identity_fidelity(),
            substrate(),
        ],
        solver=lambda name, parsed, seed_: [
            migrate_and_probe(name, parsed, seed_, surface=surface, harness=harness, max_tokens=max_tokens)
        ],
    )
    task_.metadata = {**(task_.metadata or {}), "surface": surface, "harness": harness}
    return task_
