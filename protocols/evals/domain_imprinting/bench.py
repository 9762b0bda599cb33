"""``lca bench imprinting``: domain imprinting at the substrate level (issue 18, protocol 7; no agent model).

Each agent of a longitudinal scenario file (``protocols/evals/domain_imprinting/scenarios.py``: ``imprint-<domain>-c<k>``, each
checkpoint's history a prefix of the next) is one fresh ``full-lca`` condition, fed its history epoch by epoch as the
harness replays it (``ingest``, ``end_session``). At each checkpoint every novel case of that checkpoint is asked
(``build_context``) and the injected context is checked against the case's gold
(``protocols.evals.domain_imprinting.scorer.context_values``); the experiential weight of each in-domain lesson is
read from the agent's own experience log with recall's own E term (``lca.recall.experience_term``): the lift above
neutral (E - 0.5) summed over the lesson's teaching turns and the memories resting on them. Asking leaves no trace:
the recall and retrieval logs a probe appends to are cut back after each checkpoint, so nothing learns from a test.

Arms (``--arms``): ``recall`` (consolidation off; E only from the transcript's explicit approvals and corrections),
``recall-no-e`` (the same with the E weight at 0: what E itself adds to the ranking, paired case by case), and
``procedural`` (consolidation on with a named approver, so procedural memories pass the approval gate; needs the
writer and reviewer model, ``--model``, slow on CPU). A procedural arm whose cycles wrote no procedural memory says so
as a shortfall. Reported per arm: the in-domain and out-of-domain curves over checkpoints, the domain's E mass per
checkpoint, and whether improvements track E (Spearman, scipy) at three grains: agent x checkpoint (E mass against the
in-domain share), its changes between checkpoints, and lesson x checkpoint (E mass against the lesson being in the
context), beside the number of teaching turns (which grows with E and is the obvious confound).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.layout import StoreLayout
from lca.memory import PROCEDURAL_TYPES
from lca.recall_log import RecallLog
from protocols.evals.benchmark import (
    Benchmark,
    BenchmarkResult,
    build_provenance,
    dataset_provenance,
    loadavg,
    write_result,
)
from protocols.evals.domain_imprinting.figures import plot, table
from protocols.evals.domain_imprinting.scenarios import parse_probe_id, parse_scenario_id
from protocols.harness.scenario import load_scenarios, probe_context, scenario_history

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "imprinting-v1.jsonl"
ARMS = ("recall", "recall-no-e", "procedural")
DEFAULT_ARMS = ("recall", "recall-no-e")
DEFAULT_APPROVER = "imprinting-bench"


def arm_params(arm: str, approver: str) -> dict[str, Any]:
    """The full-lca parameters of an arm."""
    if arm == "recall":
        return {"consolidate": 0}
    if arm == "recall-no-e":
        return {"consolidate": 0, "weights": "experience=0"}
    if arm == "procedural":
        return {"consolidate": 1, "approver": approver}
    raise ValueError(f"unknown arm '{arm}'; known: {', '.join(ARMS)}")


# ---- the timelines -------------------------------------------------------------------------------------------
def timelines(scenarios: Sequence[Any]) -> dict[str, list[tuple[int, Any]]]:
    """Per agent domain, its (checkpoint, scenario) pairs in order; refused unless each checkpoint's sessions are
    the first sessions of the next one's (the same ids, turns and dates), so one replay serves every checkpoint."""

    out: dict[str, list[tuple[int, Any]]] = {}
    for scenario in scenarios:
        agent, checkpoint = parse_scenario_id(scenario.id)
        out.setdefault(agent, []).append((checkpoint, scenario))
    for agent, line in out.items():
        line.sort(key=lambda pair: pair[0])
        for (k, earlier), (_, later) in zip(line, line[1:], strict=False):
            head = later.sessions[: len(earlier.sessions)]
            if len(later.sessions) < len(earlier.sessions) or head != earlier.sessions:
                raise ValueError(f"{agent}: checkpoint {k}'s history is not the start of the next checkpoint's")
    return out


@contextmanager
def leaves_no_trace(home: Path) -> Iterator[None]:
    """Probes at a checkpoint leave the store as they found it: the recall and retrieval logs (what a later cycle
    or the activation term would learn from) are cut back to their length before."""

    layout = StoreLayout(home)
    recall_log = RecallLog(layout.recall_log)  # rewound across a rotation the probes may have caused
    recall_state = recall_log.state()
    path = layout.retrieval_log
    size = path.stat().st_size if path.exists() else None
    try:
        yield
    finally:
        recall_log.rewind(recall_state)
        if size is None:
            path.unlink(missing_ok=True)
        elif path.exists():
            with open(path, "r+b") as handle:
                handle.truncate(size)


def lesson_experience(substrate: Any, evidence: Sequence[str], mistakes: Sequence[str]) -> dict[str, Any]:
    """The experiential weight of one lesson in an agent's store now: E's lift above neutral (recall's own E term)
    summed over its teaching turns and over the memories resting on them, the approvals on those turns and the
    corrections of the agent's mistaken turns."""
    from lca.recall import experience_term

    counts = substrate.experience.counts()
    turns = set(evidence)
    turn_lift = sum(experience_term(counts.get(f"transcript:{p}", {})) - 0.5 for p in evidence)
    memories = []
    for memory_id, memory in substrate.memory_files().items():
        keys = {f"{s.session}#{e}" for s in memory.record.sources for e in (*s.entries, s.first, s.last) if e}
        if turns & keys:
            memories.append((memory_id, memory.record.type.value))
    memory_lift = sum(experience_term(counts.get(f"memory:{m}", {})) - 0.5 for m, _ in memories)
    return {
        "e_mass": round(turn_lift + memory_lift, 6),
        "e_mass_turns": round(turn_lift, 6),
        "e_mass_memories": round(memory_lift, 6),
        "approvals": sum(int(counts.get(f"transcript:{p}", {}).get("approved", 0)) for p in evidence),
        "corrections": sum(int(counts.get(f"transcript:{p}", {}).get("corrected", 0)) for p in mistakes),
        "memories": len(memories),
        "procedural_memories": sum(1 for _, kind in memories if kind in PROCEDURAL_TYPES),
    }


def _clean(values: Mapping[str, float]) -> dict[str, float | None]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else round(v, 4)) for k, v in values.items()}


def replay_agent(
    arm: str, params: Mapping[str, Any], line: Sequence[tuple[int, Any]], make_runtime: Callable[..., Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One agent through one arm: its history ingested epoch by epoch, every case asked at every checkpoint.
    The per-case rows, and what the agent's condition did (cycles, memories, shortfalls)."""
    from conditions import build_condition
    from conditions.recall import FullLCA
    from protocols.evals.domain_imprinting.scorer import RECALLED_KINDS, context_values
    from protocols.harness.replay import history_sessions, make_probe

    final = line[-1][1]
    agent, _ = parse_scenario_id(final.id)
    sessions = history_sessions(scenario_history(final))
    workdir = Path(tempfile.mkdtemp(prefix="lca-imprinting-"))
    runtime = make_runtime(workdir, dict(final.identity), with_model=bool(params.get("consolidate")))
    built = build_condition("full-lca", **params)
    assert isinstance(built, FullLCA)  # the registered full-lca: its substrate, cycles and shortfalls are read here
    condition = built.attach(runtime)
    rows: list[dict[str, Any]] = []
    try:
        condition.reset()
        ingested = 0
        for checkpoint, scenario in line:
            for session in sessions[ingested : len(scenario.sessions)]:
                condition.ingest(session)
                condition.end_session()
            ingested = len(scenario.sessions)
            substrate = condition.substrate
            with leaves_no_trace(substrate.home):
                for probe in scenario.probes:
                    asked = make_probe(
                        probe.id,
                        probe.question,
                        probe.asked_at,
                        probe_context(scenario, probe),
                        sessions[:ingested],
                        embedder=runtime.embedder,
                    )
                    started = time.perf_counter()
                    packet = condition.build_context(asked)
                    build_ms = (time.perf_counter() - started) * 1000.0
                    evidence = [final.pointer(r) for r in probe.evidence]
                    mistakes = [final.pointer(r) for r in probe.forbidden]
                    items = [
                        {"kind": i.kind, "tokens": i.tokens, "text": i.text, "pointers": list(i.pointers)}
                        for i in packet.items
                    ]
                    pointers = sorted({p for i in packet.items for p in i.pointers})
                    gold = {
                        "evidence": evidence,
                        "forbidden": mistakes,
                        "forbidden_mentions": list(probe.forbidden_mentions),
                    }
                    values = context_values(probe.category, gold, {"pointers": pointers, "items": items})
                    probe_domain, lesson = parse_probe_id(probe.id)
                    in_domain = probe.category == "in-domain"
                    recalled = {p for i in packet.items if i.kind in RECALLED_KINDS for p in i.pointers}
                    row = {
                        "arm": arm,
                        "agent": agent,
                        "checkpoint": checkpoint,
                        "probe": probe.id,
                        "probe_domain": probe_domain,
                        "lesson": lesson,
                        "in_domain": in_domain,
                        "teaching_turns": len(evidence),
                        **_clean(values),
                        # the lesson brought in by recall itself, not by the handoff's quoted tail
                        "lesson_in_recall": bool(set(evidence) & recalled) if in_domain else None,
                        "recall_action": packet.notes.get("recall_action"),
                        "injected_tokens": packet.injected_tokens,
                        "recalled_tokens": sum(i.tokens for i in packet.items if i.kind in RECALLED_KINDS),
                        "recall_latency_ms": round(packet.recall_latency_ms, 3),
                        "build_ms": round(build_ms, 3),
                        "pointers": pointers,
                    }
                    if in_domain:
                        row.update(lesson_experience(substrate, evidence, mistakes))
                    rows.append(row)
        files = condition.substrate.memory_files()
        procedural = sum(1 for f in files.values() if f.record.type.value in PROCEDURAL_TYPES)
        shortfalls = dict(condition.shortfalls())
        if params.get("consolidate") and params.get("approver") and not procedural:
            shortfalls["no_procedural_memory"] = (
                f"consolidation with approver '{params['approver']}' wrote no procedural memory in "
                f"{len(condition.cycles)} cycle(s): the procedural arm ran as a recall arm"
            )
        state = {
            "cycles": len(condition.cycles),
            "writes": sum(int(c.get("writes", 0)) for c in condition.cycles),
            "memories": len(files),
            "procedural_memories": procedural,
            "shortfalls": shortfalls,
        }
    finally:
        condition.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows, state


# ---- the figures ---------------------------------------------------------------------------------------------
def _mean(values: Sequence[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def spearman(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Spearman's rho and its p-value (scipy); None for both where either side is constant or n < 3."""
    out: dict[str, Any] = {"n": len(x), "rho": None, "p": None}
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return out
    from scipy.stats import spearmanr

    rho, p = spearmanr(x, y)
    out["rho"], out["p"] = round(float(rho), 4), round(float(p), 6)
    return out


def curves(rows: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per checkpoint: the in-domain and out-of-domain figures and the domain E mass (summed over an agent's
    lessons, averaged over agents)."""
    import numpy as np

    out: dict[int, dict[str, Any]] = {}
    for k in sorted({r["checkpoint"] for r in rows}):
        at = [r for r in rows if r["checkpoint"] == k]
        own = [r for r in at if r["in_domain"]]
        other = [r for r in at if not r["in_domain"]]
        agents = sorted({r["agent"] for r in own})
        latency = [r["recall_latency_ms"] for r in at]
        out[k] = {
            "in_domain_lesson_in_context": _mean([r["lesson_in_context"] for r in own]),
            "in_domain_seen_lesson_in_context": _mean([r["seen_lesson_in_context"] for r in own]),
            "in_domain_lesson_in_recall": _mean([float(r["lesson_in_recall"]) for r in own]),
            "in_domain_lesson_turns_share": _mean([r["lesson_turns_share"] for r in own]),
            "in_domain_mistake_kept_out": _mean([r["mistake_kept_out"] for r in own]),
            "in_domain_injected_tokens": _mean([r["injected_tokens"] for r in own]),
            "in_domain_recalled_tokens": _mean([r["recalled_tokens"] for r in own]),
            "off_domain_recalled_tokens": _mean([r["off_domain_recalled_tokens"] for r in other]),
            "off_domain_quiet": _mean([r["off_domain_quiet"] for r in other]),
            "lessons_seen": _mean([float(r["teaching_turns"] > 0) for r in own]),
            "domain_e_mass": _mean([sum(r["e_mass"] for r in own if r["agent"] == a) for a in agents]),
            "domain_approvals": _mean([sum(r["approvals"] for r in own if r["agent"] == a) for a in agents]),
            "recall_latency_p50_ms": round(float(np.percentile(latency, 50)), 3) if latency else None,
            "recall_latency_p95_ms": round(float(np.percentile(latency, 95)), 3) if latency else None,
        }
    return out


def agent_points(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Agent x checkpoint: the domain's E mass, its teaching turns and the in-domain share of cases whose lesson
    was in the context."""
    out = []
    for agent in sorted({r["agent"] for r in rows}):
        for k in sorted({r["checkpoint"] for r in rows if r["agent"] == agent}):
            own = [r for r in rows if r["agent"] == agent and r["checkpoint"] == k and r["in_domain"]]
            out.append(
                {
                    "agent": agent,
                    "checkpoint": k,
                    "e_mass": round(sum(r["e_mass"] for r in own), 4),
                    "teaching_turns": sum(r["teaching_turns"] for r in own),
                    "in_domain_share": _mean([r["lesson_in_context"] for r in own]),
                }
            )
    return out


def tracking(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Whether improvements track the experiential weight, at three grains (see the module docstring)."""
    points = agent_points(rows)
    deltas_e, deltas_share = [], []
    for before, after in zip(points, points[1:], strict=False):
        if before["agent"] == after["agent"]:
            deltas_e.append(after["e_mass"] - before["e_mass"])
            deltas_share.append((after["in_domain_share"] or 0.0) - (before["in_domain_share"] or 0.0))
    seen = [r for r in rows if r["in_domain"] and r["teaching_turns"] > 0]
    return {
        "agent_checkpoint_e_mass_vs_share": spearman(
            [p["e_mass"] for p in points], [p["in_domain_share"] or 0.0 for p in points]
        ),
        "agent_checkpoint_teaching_turns_vs_share": spearman(
            [p["teaching_turns"] for p in points], [p["in_domain_share"] or 0.0 for p in points]
        ),
        "improvement_delta_e_mass_vs_delta_share": spearman(deltas_e, deltas_share),
        "lesson_e_mass_vs_in_context": spearman(
            [r["e_mass"] for r in seen], [r["seen_lesson_in_context"] for r in seen]
        ),
        "lesson_teaching_turns_vs_in_context": spearman(
            [r["teaching_turns"] for r in seen], [r["seen_lesson_in_context"] for r in seen]
        ),
        "points": points,
    }


def e_ablation(rows: Sequence[Mapping[str, Any]], arm: str = "recall", ablated: str = "recall-no-e") -> dict:
    """Paired in-domain cases, ``arm`` against ``ablated`` (E weight 0, same store): cases whose lesson only the
    arm brought in (gained) or only the ablation (lost), per checkpoint and in total."""
    key = lambda r: (r["agent"], r["checkpoint"], r["probe"])  # noqa: E731
    other = {key(r): r for r in rows if r["arm"] == ablated and r["in_domain"]}
    mine = [r for r in rows if r["arm"] == arm and r["in_domain"] and key(r) in other]
    by_k: dict[int, dict[str, int]] = {}
    for r in mine:
        o = other[key(r)]
        k = by_k.setdefault(r["checkpoint"], {"gained": 0, "lost": 0, "cases": 0})
        k["cases"] += 1
        k["gained"] += int(bool(r["lesson_in_context"]) and not o["lesson_in_context"])
        k["lost"] += int(bool(o["lesson_in_context"]) and not r["lesson_in_context"])
    return {
        "arm": arm,
        "ablated": ablated,
        "gained": sum(v["gained"] for v in by_k.values()),
        "lost": sum(v["lost"] for v in by_k.values()),
        "cases": len(mine),
        "by_checkpoint": by_k,
    }


def measure(
    path: Path | str, arms: Mapping[str, Mapping[str, Any]], make_runtime: Callable[..., Any]
) -> dict[str, Any]:
    """Every agent of the file through every arm: rows, per-arm curves and tracking, agent states."""

    scenarios, digest = load_scenarios(path)
    lines = timelines(scenarios)
    rows: list[dict[str, Any]] = []
    states: dict[str, dict[str, Any]] = {}
    for arm, params in arms.items():
        for agent, line in lines.items():
            agent_rows, state = replay_agent(arm, params, line, make_runtime)
            rows += agent_rows
            states[f"{arm}/{agent}"] = state
    figures = {}
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        figures[arm] = {"curves": curves(mine), "tracking": tracking(mine)}
    if "recall" in arms and "recall-no-e" in arms:
        figures["e_ablation"] = e_ablation(rows)
    return {"file": str(path), "sha256": digest, "figures": figures, "states": states, "rows": rows}


# ---- the command ---------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenarios", help=f"a longitudinal scenario file (default: {DEFAULT_SCENARIOS.relative_to(REPO)})"
    )
    parser.add_argument(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help=f"comma-separated, of {', '.join(ARMS)} (default: {','.join(DEFAULT_ARMS)}; procedural needs --model "
        "and is slow on CPU)",
    )
    parser.add_argument("--approver", default=DEFAULT_APPROVER, help="the named approver of the procedural arm")
    parser.add_argument(
        "--model",
        default="smollm2",
        help="the procedural arm's writer and reviewer: smollm2 (the shipped SmolLM2-135M), a .gguf path, or an "
        "inspect model string",
    )
    parser.add_argument("--timeout", type=float, help="seconds per generator call (local model only)")
    parser.add_argument("--cache", help="embedding cache folder kept across runs (default: one for this run only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-rows", action="store_true", help="keep the per-case rows out of the record (a small committed example)"
    )
    parser.add_argument("--out", default="results/bench/imprinting.json", help="the record; .png and .md beside it")


def _runtime_factory(args: argparse.Namespace, with_model: bool):
    from conditions import ConditionRuntime
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder

    embedder: Any = CachedEmbedder(SentenceTransformerEmbedder(), args.cache)
    embedder.embed_query("warm up")  # load once: recall latency then measures recall, not loading
    generator = None
    if with_model:
        from protocols.providers.models import is_local, local_generator, text_generator

        if is_local(args.model):
            runtime = {"seed": args.seed, **({"timeout_s": args.timeout} if args.timeout is not None else {})}
            generator = local_generator(args.model, **runtime)
        else:
            generator = text_generator(args.model, role="consolidation")
    generators = {"summarizer": generator, "reviewer": generator} if generator is not None else {}

    def make(workdir: Path, identity: Mapping[str, str], *, with_model: bool) -> Any:
        """An arm without consolidation gets no model at all: its handoffs stay mechanical, as in a run without one."""
        return ConditionRuntime(
            workdir=workdir,
            embedder=embedder,
            generators=generators if with_model else {},
            seed=args.seed,
            identity=identity,
        )

    return make, embedder, generator


def run_imprinting_bench(args: argparse.Namespace) -> int:

    path = Path(args.scenarios) if args.scenarios else DEFAULT_SCENARIOS
    if not path.is_file():
        print(f"lca bench imprinting: no scenario file at {path}", file=sys.stderr)
        return 2
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    try:
        arms = {name: arm_params(name, args.approver) for name in names}
        if not arms:
            raise ValueError("--arms names no arm")
    except ValueError as exc:
        print(f"lca bench imprinting: {exc}", file=sys.stderr)
        return 2

    scratch = None
    if not args.cache:  # document embeddings shared across arms; queries are never cached, so latency is fair
        scratch = args.cache = tempfile.mkdtemp(prefix="lca-imprinting-cache-")
    generator = None
    try:
        try:
            make, embedder, generator = _runtime_factory(args, "procedural" in arms)
        except LCAError as exc:
            print(f"lca bench imprinting: {exc}", file=sys.stderr)
            return 2
        load_before, started = loadavg(), time.perf_counter()
        measured = measure(path, arms, make)
        wall = time.perf_counter() - started
    finally:
        closer = getattr(generator, "close", None)
        if closer is not None:
            closer()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
            args.cache = None
    shortfalls = {who: s["shortfalls"] for who, s in measured["states"].items() if s["shortfalls"]}
    result = BenchmarkResult(
        benchmark="imprinting",
        metrics={**measured["figures"], "agents": measured["states"], "shortfalls": shortfalls},
        config={
            "arms": {name: dict(params) for name, params in arms.items()},
            "condition": "full-lca",
            "consolidation_model": getattr(generator, "model_id", None),
            "agent_model": None,
            "probes_leave_no_trace": True,
        },
        rows=() if args.no_rows else measured["rows"],
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(measured["file"], sha256=measured["sha256"])],
            seeds={"seed": args.seed},
            wall_seconds=wall,
            load={"before": load_before, "after": loadavg()},
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    text = table(measured)
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    print("domain imprinting, substrate level (real embedder, no agent model)")
    print(text)
    for who, kinds in shortfalls.items():
        for kind, detail in kinds.items():
            print(f"shortfall {who} ({kind}): {detail}", file=sys.stderr)
    try:
        figure = plot(measured, out.with_suffix(".png"), embedder_id=embedder.embedder_id)
    except ImportError as exc:
        print(f"lca bench imprinting: no plot ({exc}); install matplotlib", file=sys.stderr)
        return 1
    print(f"written to {out}, {out.with_suffix('.md')} and {figure} in {wall:.1f} s")
    return 0


BENCHMARK = Benchmark(
    name="imprinting",
    help="domain imprinting: in- and out-of-domain curves over checkpoints and whether they track E (no agent model)",
    description="Replays each agent of a longitudinal scenario file (lca scenarios longitudinal) epoch by epoch "
    "through full-lca arms (recall: consolidation off; recall-no-e: the E weight at 0; procedural: consolidation "
    "with a named approver and the --model writer) with the real embedder, asks every novel case at every checkpoint "
    "and reports the in-domain and out-of-domain curves (lesson in the injected context, mistake kept out, tokens, "
    "latency), the domain's experiential weight E per checkpoint and Spearman correlations between them; writes the "
    "record, a markdown table and a plot.",
    add_arguments=add_arguments,
    run=run_imprinting_bench,
)
