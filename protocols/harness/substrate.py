"""The substrate level: a probe replayed through a fresh condition with the real embedder and no agent model.

Every substrate-level bench (``lca bench probes``, ``mechanisms``, ``recall-budget``, compaction's) builds its
conditions' runtime with :func:`runtime_factory`, reads ``--param CONDITION:NAME=VALUE`` with
:func:`condition_params` and replays each probe with :func:`replay_probe`, as the harness replays it: the
scenario's sessions ingested one by one, then ``build_context`` for the probe; the row is read from the
packet's items.
"""

from __future__ import annotations

import argparse
import inspect as pyinspect
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lca.generators import LlamaCppGenerator
from lca.params import parse_assignments
from protocols.harness.scenario import probe_context, probe_gold, scenario_history
from protocols.providers.models import SharedCallsGenerator


def runtime_factory(args: argparse.Namespace):
    """The runtime each condition is attached to: the real embedder (``args.embedder`` when the bench has one,
    else the default; cached under ``args.cache`` when given,
    warmed once), and with ``args.summarizer == "smollm2"`` the local SmolLM2 as summarizer and reviewer, each
    session's summary made once across probes. Returns ``(make, embedder, generators)``; ``make(workdir,
    identity)`` builds one runtime."""
    from conditions import ConditionRuntime
    from lca.index.embedder_choice import DEFAULT_EMBEDDER, make_embedder

    embedder: Any = make_embedder(getattr(args, "embedder", None) or DEFAULT_EMBEDDER)
    if args.cache:
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.cache)
    embedder.embed_query("warm up")  # load once: recall latency then measures recall, not loading
    generators: dict[str, Any] = {}
    if args.summarizer == "smollm2":
        from protocols.harness.solvers import SharedRoleCalls  # loads inspect and the conditions

        # every probe replays its scenario's sessions: a summary asked of the same session is made once
        generator = SharedCallsGenerator(LlamaCppGenerator(seed=args.seed), SharedRoleCalls())
        generators = {"summarizer": generator, "reviewer": generator}

    def make(workdir: Path, identity: Mapping[str, str]) -> Any:
        return ConditionRuntime(
            workdir=workdir, embedder=embedder, generators=generators, seed=args.seed, identity=identity
        )

    return make, embedder, generators


def condition_params(conditions: Sequence[str], specs: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``["full-lca:consolidate=0", ...]`` -> parameters by condition, typed through ``lca.params``."""
    from conditions import condition_class

    by_condition: dict[str, list[str]] = {name: [] for name in conditions}
    for spec in specs:
        name, sep, assignment = spec.partition(":")
        if not sep or name not in by_condition:
            raise ValueError(
                f"--param '{spec}': expected CONDITION:NAME=VALUE with CONDITION one of {list(conditions)}"
            )
        by_condition[name].append(assignment)
    out: dict[str, dict[str, Any]] = {}
    for name, items in by_condition.items():
        cls = condition_class(name)
        known = {p: type(v.default) for p, v in pyinspect.signature(cls.__init__).parameters.items() if p != "self"}
        out[name] = parse_assignments(items, flag=f"--param {name}", known=known)
    return out


def evidence_of(probe: Any, scenario: Any, field: str) -> list[str]:
    """A probe's pointers for ``field`` (``evidence``; ``forbidden`` where the format has one)."""
    refs = getattr(probe, field, None) or ()
    return [f"{scenario.session_id(r.session)}#{scenario.entry_id(r.session, r.turn)}" for r in refs]


def replay_probe(
    condition_name: str,
    params: Mapping[str, Any],
    scenario: Any,
    probe: Any,
    make_runtime: Callable[[Path, Mapping[str, str]], Any],
) -> dict[str, Any]:
    """One probe through one fresh condition, as the harness replays it; the row the report aggregates."""
    from conditions import build_condition
    from protocols.harness.continuity_scorers import FORBIDDEN_OUT, NEEDED_TEXT, context_values, replacement_view
    from protocols.harness.replay import history_sessions, ingest_history, make_probe, with_replacements

    workdir = Path(tempfile.mkdtemp(prefix="lca-probes-"))
    runtime = make_runtime(workdir, dict(scenario.identity))
    condition = build_condition(condition_name, **params).attach(runtime)
    context = probe_context(scenario, probe)
    sessions = history_sessions(scenario_history(scenario), continues=context["continues"])
    try:
        condition.reset()
        asked = make_probe(probe.id, probe.question, probe.asked_at, context, sessions, embedder=runtime.embedder)
        ingest_history(condition, sessions, asked)
        started = time.perf_counter()
        packet = condition.build_context(asked)
        build_ms = (time.perf_counter() - started) * 1000.0
        packet = with_replacements(packet, condition)
    finally:
        condition.close()
        shutil.rmtree(workdir, ignore_errors=True)
    pointers = sorted({p for item in packet.items for p in item.pointers})
    gold = evidence_of(probe, scenario, "evidence")
    forbidden = evidence_of(probe, scenario, "forbidden")
    shown = {
        "pointers": pointers,
        "injected_text": packet.injected_text,
        "items": [{"pointers": list(i.pointers), "text": i.text} for i in packet.items],
    }
    gold_probe = probe_gold(scenario, probe)
    text_level = context_values(probe.category, gold_probe, shown)
    view = replacement_view(gold_probe, packet.to_dict())
    return {
        "scenario": scenario.id,
        "probe": probe.id,
        "category": probe.category,
        "gold": gold,
        "gold_all": bool(gold) and all(g in pointers for g in gold),
        "gold_any": any(g in pointers for g in gold),
        "forbidden": forbidden,
        "forbidden_kept_out": (not any(f in pointers for f in forbidden)) if forbidden else None,
        # the protocol scorer's twins: required mentions in the injected text (what a pointer-free summary can
        # meet), and forbidden turns and asserted forbidden mentions kept out; None where the gold names none
        "needed_text": _known(text_level[NEEDED_TEXT]),
        "forbidden_out": _known(text_level[FORBIDDEN_OUT]),
        "injected_tokens": packet.injected_tokens,
        "items": len(packet.items),
        "recall_items": sum(1 for item in packet.items if item.kind in ("memory", "transcript")),
        "nothing_injected": not packet.items,
        "recall_latency_ms": round(packet.recall_latency_ms, 3),
        "build_ms": round(build_ms, 3),
        "recall_action": packet.notes.get("recall_action"),
        "pointers": pointers,
        # replacement events (issue 48): stale turns injected, and those injected without a marker; needed turns in
        # force that the condition holds back or marks; the events its store inferred, for precision and recall
        "stale_injected": view["stale_injected"],
        "stale_unmarked": view["stale_unmarked"],
        "in_force": view["in_force"],
        "false_hold": view["false_hold"],
        "asks_history": probe.category == "history",
        "gold_events": [[e["of"], e["by"], e["labelled"]] for e in gold_probe["events"]],
        "inferred_events": packet.notes["inferred_events"],
    }


def _known(value: float) -> bool | None:
    return None if value != value else bool(value)  # NaN: the measure does not apply to the probe
