"""The cost of one move, read from what the product did: the migration's own timing (``MigrationResult.seconds``
and ``downtime_s``, measured inside ``lca.bundle.migrate``), the bytes of the checkpoint bundle it moved, and the
tokens the target had to derive or inject again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lca.bundle import MIGRATION_STEPS, MigrationResult
from lca.substrate import Substrate


def bundle_bytes(bundle: Path | str) -> int:
    """Every byte of the checkpoint on disk: the manifest and each part's files (what a move between machines
    would copy)."""
    return sum(p.stat().st_size for p in Path(bundle).rglob("*") if p.is_file())


def rederived_tokens(substrate: Substrate) -> int:
    """Tokens (the store's token counter) of every text the target's index holds: none shipped in the bundle
    (``index/`` is derived), so the rehydration embedded each of them again from the transcript and memory."""
    rows = substrate.index.catalog_.db.execute("SELECT text FROM texts").fetchall()
    return int(sum(substrate.count_tokens_many([row[0] for row in rows]))) if rows else 0


def move_cost(result: MigrationResult, bundle: Path | str, target: Substrate, reinjected: int) -> dict[str, Any]:
    """``downtime_s`` (quiesce to resume), ``seconds`` per step and their sum, ``bundle_bytes``,
    ``tokens_rederived`` and ``tokens_reinjected`` (``reinjected``: the tokens of the first context the resumed
    agent was given, built again on the target)."""
    seconds = {step: float(result.seconds.get(step, float("nan"))) for step in MIGRATION_STEPS}
    return {
        "downtime_s": result.downtime_s,
        "seconds": seconds,
        "move_seconds": round(sum(seconds.values()), 6),
        "bundle_bytes": bundle_bytes(bundle),
        "tokens_rederived": rederived_tokens(target),
        "tokens_reinjected": int(reinjected),
    }
