"""The compaction protocol's substrate figures without an agent model: each probe of a scenario file through
each condition with ``protocols.harness.substrate.replay_probe`` (the harness's replay, the real embedder), read at the
pointer level from the injected items:

- constraint probes: how many of the constraint turns (the probe's evidence) are not among the injected pointers;
- correction probes: how many mistaken turns (the probe's ``forbidden`` turns: the wrong turn and any stale
  artifact repeating it) are injected while the correction turn (its evidence) is not;
- interruption probes: whether the open thread's turn (any evidence turn) is in the first context built.

Summaries inject no pointers: their pointer-level values say nothing and are printed as n/a (the task's
``compaction`` scorer reads their text). ``python -m protocols.evals.compaction.substrate --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from protocols.evals.compaction.dataset import DEFAULT_SCENARIOS
from protocols.evals.compaction.scorer import CONSTRAINT, CORRECTION, INTERRUPTION

CONDITIONS = ("truncation", "summary", "transcript-recall", "full-lca")
POINTERLESS = ("summary", "adversarial-summary")


def pointer_measures(row: Mapping[str, Any]) -> dict[str, float]:
    """The pointer-level values of one ``replay_probe`` row, by its category (only the ones that apply)."""
    injected = set(row["pointers"])
    gold, forbidden = list(row["gold"]), list(row["forbidden"])
    category = row["category"]
    if category == CONSTRAINT:
        return {"constraints_missing": float(sum(1 for g in gold if g not in injected))}
    if category == CORRECTION:
        corrected = any(g in injected for g in gold)
        return {"repeated_mistakes": 0.0 if corrected else float(sum(1 for f in forbidden if f in injected))}
    if category == INTERRUPTION:
        return {"resume_context": float(any(g in injected for g in gold))}
    return {}


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over the probes each measure applies to, the probe counts, and the injected tokens."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for name, value in pointer_measures(row).items():
            values.setdefault(name, []).append(value)
    out: dict[str, Any] = {name: round(sum(v) / len(v), 3) for name, v in values.items()}
    out["probes"] = {name: len(v) for name, v in values.items()}
    out["injected_tokens_mean"] = round(sum(r["injected_tokens"] for r in rows) / len(rows), 1) if rows else 0.0
    return out


def measure(
    path: Path | str, conditions: Mapping[str, Mapping[str, Any]], make_runtime, *, limit: int | None = None
) -> dict[str, Any]:
    """Every probe through every condition (``replay_probe``): rows and figures per condition."""
    from protocols.harness.scenario import load_scenarios
    from protocols.harness.substrate import replay_probe

    scenarios, digest = load_scenarios(path)
    pairs = [(s, p) for s in scenarios for p in s.probes][: limit or None]
    out: dict[str, Any] = {"file": str(path), "sha256": digest, "conditions": {}}
    for name, params in conditions.items():
        started = time.perf_counter()
        rows = [replay_probe(name, params, scenario, probe, make_runtime) for scenario, probe in pairs]
        out["conditions"][name] = {
            "params": dict(params),
            "figures": figures(rows),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "rows": [{k: r[k] for k in ("scenario", "probe", "category", "pointers", "injected_tokens")} for r in rows],
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from protocols.harness.substrate import condition_params, runtime_factory

    parser = argparse.ArgumentParser(prog="python -m protocols.evals.compaction.substrate", description=__doc__)
    parser.add_argument("--scenarios", default=str(DEFAULT_SCENARIOS))
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--param", action="append", default=[], metavar="CONDITION:NAME=VALUE")
    parser.add_argument("--budget", type=int, default=600, help="every condition's budget_tokens (the task's default)")
    parser.add_argument("--summarizer", choices=("none", "smollm2"), default="none")
    parser.add_argument("--cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--out", help="write the figures and rows as JSON here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.conditions.split(",") if n.strip()]
    try:
        params = condition_params(names, args.param)
    except Exception as exc:  # an unknown condition or parameter is refused before anything loads
        print(f"compaction substrate: {exc}", file=sys.stderr)
        return 2
    for name in names:
        params[name].setdefault("budget_tokens", args.budget)
    if "full-lca" in params and args.summarizer == "none":
        params["full-lca"].setdefault("consolidate", 0)
    make, _, _ = runtime_factory(args)
    result = measure(args.scenarios, params, make, limit=args.limit)
    print(f"compaction, substrate level (pointers), no agent model; budget {args.budget} tokens; {result['file']}")
    for name, block in result["conditions"].items():
        f = block["figures"]
        shown = {k: ("n/a" if name in POINTERLESS else f.get(k)) for k in ("constraints_missing", "repeated_mistakes")}
        resume = "n/a" if name in POINTERLESS else f.get("resume_context")
        print(
            f"  {name:<18} constraints missing {shown['constraints_missing']}  repeated mistakes "
            f"{shown['repeated_mistakes']}  open thread in first context {resume}  tokens {f['injected_tokens_mean']}"
            f"  ({block['wall_seconds']} s)"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
