"""``lca bench consolidation``: what a consolidation cycle does with a scenario's history, per scenario.

Each scenario of a scenario file (docs/scenario-format.md) is imported session by session into a fresh
``Substrate`` and, after each session, one cycle runs (``Substrate.checkpoint``, trigger ``session_end``, the
session's last turn as the cycle's time): as ``full-lca`` consolidates at each session end. The writer and the
reviewer are one local model (``--model``, default the shipped SmolLM2-135M through ``lca.generators``); the
embedder is the real one. No agent model answers and no probe is asked: the figures are the cycle's own
counts, per scenario and per file: candidates proposed, memories written, downgraded to labeled inferences,
rejected or removed by the reviewer, held for approval, failed reviews, and cycles that recorded a failure or
wrote nothing. The result (``BenchmarkResult``) keeps one row per cycle with its candidates and verdicts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.types import parse_timestamp
from protocols.evals.benchmark import (
    Benchmark,
    BenchmarkResult,
    build_provenance,
    dataset_provenance,
    jsonable,
    write_result,
)
from protocols.harness.scenario import load_scenarios
from protocols.providers.models import is_local, local_generator, text_generator

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "data" / "scenarios"
DEFAULT_SCENARIOS = (SCENARIO_DIR / "continuity-v1.jsonl", SCENARIO_DIR / "continuity-recall-v1.jsonl")
WRITTEN_ACTIONS = ("created", "updated")  # a memory the cycle wrote (superseding writes its replacement as created)
STOPPED_VERDICTS = ("reject", "remove")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenarios",
        action="append",
        help="a scenario file (repeatable; default: the shipped continuity-v1.jsonl and continuity-recall-v1.jsonl)",
    )
    parser.add_argument(
        "--model",
        default="smollm2",
        help="writer and reviewer: smollm2 (default, the shipped SmolLM2-135M), a .gguf path, or an inspect model string",
    )
    parser.add_argument("--limit", type=int, help="at most this many scenarios per file (for quick looks)")
    parser.add_argument("--no-verify", action="store_true", help="cycles without the verification stage (ablation)")
    parser.add_argument("--approver", help="a named approver: procedural memories are written instead of held")
    parser.add_argument("--timeout", type=float, help="seconds per generator call (local model only)")
    parser.add_argument("--cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/bench/consolidation.json")


# ---- the measure -----------------------------------------------------------------------------------------
def cycle_row(scenario_id: str, session: str, result: Any) -> dict[str, Any]:
    """One cycle's figures and what it decided, from its ``ConsolidationResult`` (already redacted)."""
    verdicts = Counter(v.verdict for v in result.verdicts)
    actions = Counter(w.action for w in result.writes)
    failures = Counter(f"{f.stage}:{f.kind}" for f in result.failures)
    by_candidate = {v.candidate: v for v in result.verdicts}
    written = sum(actions[a] for a in WRITTEN_ACTIONS)
    return {
        "scenario": scenario_id,
        "session": session,
        "cycle": result.cycle_id,
        "candidates": len(result.candidates),
        "written": written,
        "accepted": verdicts["accept"] + verdicts["supersede"],
        "downgraded": verdicts["downgrade"],
        "rejected": sum(verdicts[v] for v in STOPPED_VERDICTS),
        "review_failed": verdicts["failed"],
        "held": actions["held"],
        "superseded": actions["superseded"],
        "conflicts_marked": actions["conflict_marked"],
        "failures": dict(sorted(failures.items())),
        "with_failures": bool(result.failures),
        "wrote_nothing": written == 0,
        "seconds": round(result.seconds, 3),
        "prompt_version": result.prompt_version,
        "decisions": [
            {
                "type": c.type,
                "claim": c.claim,
                "lines": list(c.lines),
                "verdict": by_candidate[c.id].verdict if c.id in by_candidate else None,
            }
            for c in result.candidates
        ],
    }


COUNTED = ("candidates", "written", "accepted", "downgraded", "rejected", "review_failed", "held")


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over cycles: the counted outcomes, cycles with a failure or without a write, failures by kind."""
    failures: Counter[str] = Counter()
    for row in rows:
        failures.update(row["failures"])
    return {
        "cycles": len(rows),
        **{key: sum(int(r[key]) for r in rows) for key in COUNTED},
        "cycles_with_failures": sum(1 for r in rows if r["with_failures"]),
        "cycles_writing_nothing": sum(1 for r in rows if r["wrote_nothing"]),
        "failures": sum(failures.values()),
        "failures_by_kind": dict(sorted(failures.items())),
    }


def replay_scenario(
    scenario: Any, embedder: Any, writer: Any, reviewer: Any, config: Any, *, approver: str | None = None
) -> list[dict[str, Any]]:
    """A scenario's sessions into a fresh store, one cycle after each session; one row per cycle."""
    from lca.substrate import Substrate

    home = Path(tempfile.mkdtemp(prefix="lca-consolidation-bench-"))
    rows = []
    try:
        with Substrate(home, embedder=embedder) as substrate:
            for session in scenario.sessions:
                entries = scenario.entries(session)
                substrate.append(entries)
                result = substrate.checkpoint(
                    writer,
                    reviewer=reviewer,
                    trigger="session_end",
                    approver=approver,
                    config=config,
                    session_id=scenario.session_id(session.id),
                    now=parse_timestamp(max(e.timestamp for e in entries)),
                )
                rows.append(cycle_row(scenario.id, session.id, result))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rows


def measure(
    path: Path | str,
    embedder: Any,
    writer: Any,
    reviewer: Any,
    config: Any,
    *,
    limit: int | None = None,
    approver: str | None = None,
) -> dict[str, Any]:
    """Every scenario of one file: per-scenario and per-file totals, and the per-cycle rows."""
    scenarios, digest = load_scenarios(path)
    rows: list[dict[str, Any]] = []
    per_scenario: dict[str, dict[str, Any]] = {}
    for scenario in scenarios[: limit or None]:
        scenario_rows = replay_scenario(scenario, embedder, writer, reviewer, config, approver=approver)
        per_scenario[scenario.id] = summarize(scenario_rows)
        rows += scenario_rows
    return {"file": str(path), "sha256": digest, "scenarios": per_scenario, "total": summarize(rows), "rows": rows}


# ---- the command ---------------------------------------------------------------------------------------
def _generator(args: argparse.Namespace) -> Any:
    if is_local(args.model):
        runtime: dict[str, Any] = {"seed": args.seed}
        if args.timeout is not None:
            runtime["timeout_s"] = args.timeout
        return local_generator(args.model, **runtime)
    return text_generator(args.model, role="consolidation")


def _embedder(args: argparse.Namespace) -> Any:
    from lca.index.embedders import SentenceTransformerEmbedder

    embedder: Any = SentenceTransformerEmbedder()
    if args.cache:
        from lca.index.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.cache)
    return embedder


def _line(label: str, f: Mapping[str, Any]) -> str:
    return (
        f"  {label:<28} cycles {f['cycles']:>2}  candidates {f['candidates']:>3}  written {f['written']:>3}  "
        f"downgraded {f['downgraded']:>3}  rejected {f['rejected']:>3}  review failed {f['review_failed']:>3}  "
        f"held {f['held']:>2}  cycles failing {f['cycles_with_failures']:>2}  writing nothing "
        f"{f['cycles_writing_nothing']:>2}"
    )


def run_consolidation_bench(args: argparse.Namespace) -> int:
    from lca.consolidation import PROMPT_VERSION, ConsolidationConfig

    files = [Path(p) for p in (args.scenarios or DEFAULT_SCENARIOS)]
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        print(f"lca bench consolidation: no scenario file at {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit < 1:
        print(f"lca bench consolidation: --limit must be at least 1, got {args.limit}", file=sys.stderr)
        return 2
    try:
        generator = _generator(args)
    except LCAError as exc:
        print(f"lca bench consolidation: {exc}", file=sys.stderr)
        return 2
    config = ConsolidationConfig(verify=not args.no_verify, seed=args.seed)
    embedder = _embedder(args)
    started = time.perf_counter()
    try:
        measured = [
            measure(path, embedder, generator, generator, config, limit=args.limit, approver=args.approver)
            for path in files
        ]
    finally:
        closer = getattr(generator, "close", None)
        if closer is not None:
            closer()
    totals = getattr(generator, "totals", None)
    result = BenchmarkResult(
        benchmark="consolidation",
        metrics={m["file"]: {"total": m["total"], "scenarios": m["scenarios"]} for m in measured},
        config={
            "model": generator.model_id,
            "writer_and_reviewer": "one model, a fresh call per review",
            "prompt_version": PROMPT_VERSION,
            "consolidation": jsonable(config),
            "approver": args.approver,
            "limit": args.limit,
            "timeout_s": args.timeout,
        },
        rows=tuple({"file": m["file"], **row} for m in measured for row in m["rows"]),
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(m["file"], sha256=m["sha256"]) for m in measured],
            seeds={"seed": args.seed},
            wall_seconds=time.perf_counter() - started,
            extra={"generator_totals": jsonable(totals)} if totals is not None else {},
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    print(f"consolidation at each session end, writer and reviewer {generator.model_id}, prompts {PROMPT_VERSION}")
    for m in measured:
        print(f"{m['file']} (sha256 {m['sha256'][:12]})")
        for scenario_id, figures in m["scenarios"].items():
            print(_line(scenario_id, figures))
        print(_line("total", m["total"]))
        kinds = ", ".join(f"{k} {n}" for k, n in m["total"]["failures_by_kind"].items()) or "none"
        print(f"  failures by kind: {kinds}")
    print(f"written to {out}")
    return 0


BENCHMARK = Benchmark(
    name="consolidation",
    help="what consolidation cycles propose, write, downgrade and reject on each scenario (writer+reviewer model)",
    description="Imports each scenario of a scenario file into a fresh store session by session and runs one "
    "consolidation cycle after each session with the writer and reviewer model (default: the shipped SmolLM2-135M) "
    "and the real embedder; reports per scenario and per file the candidates proposed, memories written, "
    "downgraded, rejected, held and failed reviews, and the cycles that recorded a failure or wrote nothing.",
    add_arguments=add_arguments,
    run=run_consolidation_bench,
)
