"""Domain imprinting's samples: one per (agent, checkpoint, novel case) of a longitudinal scenario file
(``protocols/evals/domain_imprinting/scenarios.py``), each carrying the agent's history up to the checkpoint and the gold in
metadata as every scenario protocol does, plus ``imprinting``: the agent's domain, the checkpoint, the case's domain
and lesson and whether the case is in the agent's domain, read from the scenario and probe ids (a file of other
scenarios is refused naming the first id that does not fit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lca.errors import RecordFormatError
from lca.params import ParameterError
from protocols.evals.domain_imprinting.scenarios import parse_probe_id, parse_scenario_id
from protocols.harness.scenario import scenario_samples

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SCENARIOS = REPO / "data" / "scenarios" / "imprinting-v1.jsonl"
FIXTURE = REPO / "data" / "scenarios" / "imprinting-fixture.jsonl"


def parse_checkpoints(text: str) -> tuple[int, ...]:
    """``"0,4"`` -> (0, 4); "" -> () (every checkpoint). A value that is not a whole number is refused, naming it."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        if not part.isdigit():
            raise ParameterError(
                "-T", f"checkpoints={text}", f"expected checkpoint numbers joined by ',' (such as 0,4), got {part!r}"
            )
        out.append(int(part))
    return tuple(sorted(set(out)))


def imprinting_samples(
    path: Path | str, *, limit: int | None = None, checkpoints: tuple[int, ...] = ()
) -> tuple[list[Any], str, dict[str, Any]]:
    """The samples, the file's sha256 and the task metadata (agents, checkpoints, cases per category).
    ``checkpoints`` keeps only those checkpoints (every agent's, every case), so a short run still spans the
    longitudinal axis, where ``--limit`` would take the first agent's first checkpoint; a checkpoint the file does
    not have is refused, naming the ones it has."""
    samples, digest = scenario_samples(path)
    found: set[int] = set()
    agents: set[str] = set()
    for sample in samples:
        meta = sample.metadata
        try:
            agent, checkpoint = parse_scenario_id(meta["scenario"])
            probe_domain, lesson = parse_probe_id(meta["probe"])
        except ValueError as exc:
            raise RecordFormatError(str(exc), path=str(path), field="id") from None
        if (probe_domain == agent) != (meta["category"] == "in-domain"):
            raise RecordFormatError(
                f"{sample.id}: category '{meta['category']}' disagrees with the ids", path=str(path), field="category"
            )
        meta["imprinting"] = {
            "agent": agent,
            "checkpoint": checkpoint,
            "probe_domain": probe_domain,
            "lesson": lesson,
            "in_domain": probe_domain == agent,
        }
        found.add(checkpoint)
        agents.add(agent)
    missing = sorted(set(checkpoints) - found)
    if missing:
        raise RecordFormatError(
            f"checkpoints {missing} not in the file (it has {sorted(found)})", path=str(path), field="checkpoints"
        )
    if checkpoints:
        samples = [s for s in samples if s.metadata["imprinting"]["checkpoint"] in checkpoints]
    per_category: dict[str, int] = {}
    for sample in samples:
        per_category[sample.metadata["category"]] = per_category.get(sample.metadata["category"], 0) + 1
    kept = samples[:limit] if limit else samples
    return (
        kept,
        digest,
        {
            "agents": sorted(agents),
            "checkpoints": sorted(set(checkpoints) or found),
            "checkpoints_in_file": sorted(found),
            "cases": per_category,
        },
    )
