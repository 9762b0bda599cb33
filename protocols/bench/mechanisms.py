"""``lca bench mechanisms``: does each mechanism a researcher can ablate act on the shipped scenarios?

An ablation of a mechanism that never acts measures nothing, yet a report would still print its row. This
bench replays, for every mechanism (S, E, T, A, Q, K, the adaptive policy, MMR, wildcards, handoffs, the resume tail,
exchanges, excerpts, the agent's own words), one probe of the shipped mechanism scenarios (``data/scenarios/mechanisms-v2.jsonl``, and
``mechanisms-shown-v1.jsonl`` for what a recalled turn shows) through a condition with
the mechanism on and again with it turned off by one assignment, as the harness replays it (substrate
level: the real embedder, no agent model), and reports what the injected context held each time. The
probe's gold says what the mechanism is for: its evidence turns must be in the context and its forbidden
turns out. A row passes when the context meets the gold with the mechanism on and fails it with it off (or,
for the adaptive policy, when it offers nothing new on a follow-up whose last injection was used, where
fixed-k offers it again; for excerpts, when the needed turn is in either way and its needed words are shown only
with it on).

Every case declares the condition it runs: most run under budget pressure (``budget_tokens`` small,
``handoff=0``) so that what the ranking puts first is what gets in, since with room for everything relevant
no ranking term can change what is injected.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result
from protocols.harness import substrate
from protocols.harness.scenario import load_scenarios
from protocols.harness.substrate import replay_probe
from protocols.harness.variants import parse_variant, variant_params

SCENARIO_FOLDER = Path(__file__).resolve().parents[2] / "data" / "scenarios"
DEFAULT_SCENARIOS = SCENARIO_FOLDER / "mechanisms-v2.jsonl"
SHOWN_SCENARIOS = "mechanisms-shown-v1.jsonl"


@dataclass(frozen=True)
class MechanismCase:
    """One row: a mechanism, the probe that needs it, the condition it runs under and how it is turned off."""

    mechanism: str
    scenario: str
    probe: str
    condition: str  # a condition variant label: "full-lca[budget_tokens=75,handoff=0]"
    off: str  # the one assignment that turns the mechanism off: "weights.experience=0"
    expect: str = "gold"  # gold: the probe's gold is met only with it on | more: on holds more of its evidence
    # turns than off | defer: on offers nothing new (a follow-up whose last injection was used), off does | text: the
    # gold is met both ways, its required mentions shown only with it on
    file: str | None = None  # a scenario file in data/scenarios; None: the bench's --scenarios file


# room for one recalled item: the ranking decides. The six rows below act together at 50 to 65 tokens (measured on
# 2026-12-05, when a brought prompt's header lost its date and weight; 45 to 85 row by row), MMR at 90 to 150
PRESSURE = "full-lca[budget_tokens=60,handoff=0]"
CASES: tuple[MechanismCase, ...] = (
    MechanismCase("S similarity", "mech-similarity", "q1", PRESSURE, "weights.similarity=0"),
    MechanismCase("E experience", "mech-experience", "q1", PRESSURE, "weights.experience=0"),
    MechanismCase("T temporal", "mech-temporal", "q1", PRESSURE, "weights.temporal=0"),
    MechanismCase("A authority", "mech-authority", "q1", PRESSURE, "weights.authority=0"),
    MechanismCase("Q task", "mech-task", "q1", PRESSURE, "weights.task=0"),
    MechanismCase("K risk", "mech-risk", "q1", PRESSURE, "weights.risk=0"),
    MechanismCase("MMR", "mech-mmr", "q1", "full-lca[budget_tokens=120,handoff=0]", "mmr_lambda=1.0"),
    MechanismCase(
        "adaptive policy", "mech-adaptive", "q1", "full-lca[policy=adaptive,handoff=0]", "policy=fixed-k", "defer"
    ),
    MechanismCase(
        "wildcards",
        "mech-wildcards",
        "q1",
        "full-lca[budget_tokens=190,living_memory=1,handoff=0]",
        "living_memory=0",
        "more",
    ),
    # the resume rule and the handoff both bring back where interrupted work stood: each is measured with the
    # other off, since in this small store either alone finds the open task. Budgets here and for wildcards sit
    # inside the range where the row acts (measured on 2026-12-05, when the handoff's pointers got shorter: handoffs
    # and the resume tail at every budget tried from 260 to 420, wildcards 175-220; with room for the whole history
    # nothing can act)
    MechanismCase("handoffs", "mech-handoff", "q1", "full-lca[budget_tokens=340,resume_turns=0]", "handoff=0"),
    MechanismCase("resume tail", "mech-handoff", "q1", "full-lca[budget_tokens=340,handoff=0]", "resume_turns=0"),
    # what a chosen turn shows (lca.recall.shown): room for the acknowledgement that ranks first and the short reply it
    # acknowledges, not for a third turn as well (the small store's whole-history rule fills what room is left)
    MechanismCase(
        "exchanges",
        "mech-exchange",
        "q1",
        "full-lca[budget_tokens=140,handoff=0]",
        "exchanges=0",
        file=SHOWN_SCENARIOS,
    ),
    MechanismCase(
        "excerpts", "mech-excerpt", "q1", "full-lca[handoff=0]", "excerpts=0", expect="text", file=SHOWN_SCENARIOS
    ),
    # the user's statement of a price among the assistant's turns about the same venue, which resemble the question
    # more: room for one (exchanges off, so a reply cannot bring the statement along as the turn it answers)
    MechanismCase(
        "agent's own words",
        "mech-own-words",
        "q1",
        "full-lca[budget_tokens=75,handoff=0,exchanges=0]",
        "agent_turn_risk=0",
        file=SHOWN_SCENARIOS,
    ),
)


def variant_with(label: str, assignment: str) -> str:
    """``full-lca[a=1]`` with one more assignment (which wins over one of the same name)."""
    name, _, inside = label.partition("[")
    kept = [part for part in inside.rstrip("]").split(",") if part and part.split("=")[0] != assignment.split("=")[0]]
    return f"{name}[{','.join([*kept, assignment])}]"


def typed_params(label: str) -> tuple[str, dict[str, Any]]:
    """A variant label as the condition's name and its typed parameters (``protocols.harness.variants``)."""
    variant = parse_variant(label)
    return variant.condition, variant_params(variant)


def judge(case: MechanismCase, on: Mapping[str, Any], off: Mapping[str, Any]) -> bool:
    """Whether the mechanism acted as the probe needs: its gold met with it on and not with it off."""

    def meets(row: Mapping[str, Any]) -> bool:
        return bool(row["gold_all"]) and row["forbidden_kept_out"] is not False

    if case.expect == "defer":
        return on["recall_items"] == 0 and on["recall_action"] == "defer" and off["recall_items"] > 0
    if case.expect == "more":
        return gold_held(on) > gold_held(off) and on["forbidden_kept_out"] is not False
    if case.expect == "text":
        return meets(on) and meets(off) and on["needed_text"] == 1.0 and (off["needed_text"] or 0.0) < 1.0
    return meets(on) and not meets(off)


def gold_held(row: Mapping[str, Any]) -> int:
    """How many of the probe's evidence turns the context held."""
    return len(set(row["gold"]) & set(row["pointers"]))


def run_case(case: MechanismCase, scenarios: Mapping[str, Any], make_runtime: Callable) -> dict[str, Any]:
    scenario = scenarios.get(case.scenario)
    if scenario is None:
        raise ValueError(f"case '{case.mechanism}': no scenario '{case.scenario}' in the file")
    probe = next((p for p in scenario.probes if p.id == case.probe), None)
    if probe is None:
        raise ValueError(f"case '{case.mechanism}': scenario '{case.scenario}' has no probe '{case.probe}'")
    rows = {}
    for side, label in (("on", case.condition), ("off", variant_with(case.condition, case.off))):
        name, params = typed_params(label)
        if name == "full-lca":
            params.setdefault("consolidate", 0)  # substrate level: no model writes memories; the scenario's do
        row = replay_probe(name, params, scenario, probe, make_runtime)
        rows[side] = {"condition": label, **row}
    return {**asdict(case), "with": rows["on"], "without": rows["off"], "acted": judge(case, rows["on"], rows["off"])}


def measure(path: Path | str, cases: Sequence[MechanismCase], make_runtime: Callable) -> dict[str, Any]:
    """Every case on its scenario file (``path`` unless the case names its own), and each file read with its sha256."""
    files = {str(path): Path(path)}
    files.update({c.file: SCENARIO_FOLDER / c.file for c in cases if c.file})
    loaded = {name: load_scenarios(where) for name, where in files.items()}
    rows = []
    for case in cases:
        scenarios = {s.id: s for s in loaded[case.file or str(path)][0]}
        rows.append(run_case(case, scenarios, make_runtime))
    datasets = [{"file": str(files[name]), "sha256": digest} for name, (_, digest) in loaded.items()]
    return {"datasets": datasets, "rows": rows}


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The markdown table the closing note and docs quote: mechanism, scenario, with / without."""

    def held(row: Mapping[str, Any]) -> str:
        gold = "needed in" if row["gold_all"] else "needed out"
        if len(row["gold"]) > 1:
            gold = f"{gold_held(row)} of {len(row['gold'])} needed in"
        forbidden = {True: ", forbidden out", False: ", forbidden IN", None: ""}[row["forbidden_kept_out"]]
        shown = row.get("needed_text")
        words = "" if shown is None else ", its words shown" if shown == 1.0 else ", its words NOT shown"
        return f"{gold}{words}{forbidden}; {row['recall_items']} recalled ({row['recall_action']})"

    lines = [
        "| mechanism | scenario / probe | condition | with | without (off) | acts |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['mechanism']} | {r['scenario']}/{r['probe']} | `{r['condition']}` | {held(r['with'])} | "
            f"`{r['off']}`: {held(r['without'])} | {'yes' if r['acted'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


# ---- the command ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenarios", default=str(DEFAULT_SCENARIOS), help="the mechanism scenario file")
    parser.add_argument("--only", action="append", help="only the cases of this mechanism (repeatable)")
    parser.add_argument("--cache", help="embedding cache folder (kept across runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/bench/mechanisms.json")


def run_mechanisms_bench(args: argparse.Namespace) -> int:
    path = Path(args.scenarios)
    if not path.exists():
        print(f"lca bench mechanisms: no scenario file at {path}", file=sys.stderr)
        return 2
    cases = [c for c in CASES if not args.only or c.mechanism in args.only or c.mechanism.split()[0] in args.only]
    if not cases:
        known = ", ".join(c.mechanism for c in CASES)
        print(f"lca bench mechanisms: --only names no case; known: {known}", file=sys.stderr)
        return 2
    args.summarizer = "none"  # substrate level: no model writes memories or handoffs
    make, embedder, _ = substrate.runtime_factory(args)  # through the module: tests replace it
    started = time.perf_counter()
    measured = measure(path, cases, make)
    rows = measured["rows"]
    result = BenchmarkResult(
        benchmark="mechanisms",
        metrics={"acted": sum(r["acted"] for r in rows), "cases": len(rows)},
        checks={r["mechanism"]: {"value": float(r["acted"]), "target": 1.0, "pass": bool(r["acted"])} for r in rows},
        config={"cases": [asdict(c) for c in cases], "agent_model": None, "summarizer": None},
        rows=rows,
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(d["file"], sha256=d["sha256"]) for d in measured["datasets"]],
            seeds={"seed": args.seed},
            wall_seconds=time.perf_counter() - started,
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    out.with_suffix(".md").write_text(table(rows), encoding="utf-8")
    print(
        f"mechanisms, substrate level (real embedder, no agent model): {', '.join(d['file'] for d in measured['datasets'])}"
    )
    print(table(rows))
    print(f"{result.metrics['acted']} of {len(rows)} mechanisms acted; written to {out} and {out.with_suffix('.md')}")
    return 0 if all(r["acted"] for r in rows) else 1


BENCHMARK = Benchmark(
    name="mechanisms",
    help="does each ablatable mechanism change what is injected on the scenario that needs it (no agent model)",
    description="Replays one probe per mechanism (S, E, T, A, Q, K, adaptive policy, MMR, wildcards, handoffs) of "
    "the shipped mechanism scenarios through full-lca with the mechanism on and off, and reports whether the "
    "injected context met the probe's gold only with it on.",
    add_arguments=add_arguments,
    run=run_mechanisms_bench,
)
