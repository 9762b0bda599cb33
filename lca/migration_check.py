"""Checking a migration: what authorized system continuity means, mechanically.

``check_migration`` reads the source and the target after ``lca.bundle.migrate`` and says, check by check, whether
the agent's continuity held: the same agent descending from the migration's bundle, the next epoch, the stale
writer fenced off, no conversation entry lost or repeated, every step recorded, the work in flight carried
(``lca.intents``: every intent the source held is in the target's log, none lost), and capability visibility
(``lca.providers``: every capability the target lacks is recorded as reduced by the move, every one it gained is
gated until authorized). Kept apart from the move itself: one module moves, this one checks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.authority import FencedWriteError, read_authority
from lca.bundle import MIGRATION_SESSION, MIGRATION_STEPS, MigrationResult
from lca.intents import IntentLog
from lca.providers import capability_changes, read_providers
from lca.transcript import TranscriptStore
from lca.types import EntryKind, TranscriptEntry


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def history_fingerprint(store: Path | str) -> dict[tuple[str, str, str], int]:
    """Every conversation entry of the store's transcript (the migration events left out: they are the store's
    own history) as (session, entry id, sha256 of its content) with its count; equal fingerprints mean no entry
    was lost, duplicated or altered."""
    counts: dict[tuple[str, str, str], int] = {}
    for entry in TranscriptStore(store).iter_entries():
        if entry.session_id == MIGRATION_SESSION:
            continue
        key = (entry.session_id, entry.id, hashlib.sha256(entry.content.encode("utf-8")).hexdigest())
        counts[key] = counts.get(key, 0) + 1
    return counts


@dataclass(frozen=True)
class MigrationCheck:
    """The mechanical checks of one migration. ``lineage_intact``: the target is the same agent and descends from
    the bundle it was activated from; ``epoch_advanced``: the target holds the next epoch and the source was
    transferred at it; ``source_fenced``: an append by a writer opened on the source before the move was refused
    and left nothing; ``entries_lost`` / ``entries_duplicated``: conversation entries (by session, id and
    content) of the source missing from, or repeated in, the target; ``steps_recorded``: the target's transcript
    holds every step as a system event; ``intents_lost``: intents (``lca.intents``) the source held that the
    target's log lacks; ``capabilities_visible``: every capability the move reduced or gained is recorded in the
    ``resume`` step, and every gained one that no operator authorized is recorded as gated."""

    lineage_intact: bool
    epoch_advanced: bool
    source_fenced: bool | None
    entries_lost: int
    entries_duplicated: int
    steps_recorded: bool
    intents_lost: int = 0
    capabilities_visible: bool = True
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            self.lineage_intact
            and self.epoch_advanced
            and self.source_fenced is not False
            and not self.entries_lost
            and not self.entries_duplicated
            and self.steps_recorded
            and not self.intents_lost
            and self.capabilities_visible
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in vars(self).items() if k != "problems"},
            "problems": list(self.problems),
            "ok": self.ok,
        }


def check_migration(
    source: Path | str,
    target: Path | str,
    result: MigrationResult,
    before: dict[tuple[str, str, str], int],
    *,
    stale_writer: Any = None,
) -> MigrationCheck:
    """Check a finished migration against the source's ``history_fingerprint`` taken before it. ``stale_writer``
    is a ``TranscriptStore`` opened on the source before the migration: one append through it must be refused
    (None: not tested)."""
    problems: list[str] = []
    src, dst = read_authority(source), read_authority(target)
    lineage = bool(
        result.ok
        and src is not None
        and dst is not None
        and dst.agent_id == src.agent_id
        and dst.descent[-1:] == (f"bundle:{result.bundle_id}",)
    )
    if not lineage:
        problems.append("lineage: the target is not the source's agent descending from the migration's bundle")
    epoch = bool(
        result.ok
        and src is not None
        and dst is not None
        and dst.epoch == result.source_epoch + 1 == src.epoch
        and src.state == "transferred"
        and dst.writable
    )
    if not epoch:
        problems.append("epoch: the target does not hold the next epoch, or the source was not transferred at it")
    fenced = None
    if stale_writer is not None:
        attempt = TranscriptEntry(
            id=f"stale-write:{result.bundle_id}",
            session_id="lca-stale-writer",
            agent_id=src.agent_id if src else "unknown",
            kind=EntryKind.SYSTEM_EVENT,
            timestamp=_now(),
            content="an append by the writer the migration left behind",
        )
        try:
            stale_writer.append([attempt])
            fenced = False
        except FencedWriteError:
            fenced = not any(e.id == attempt.id for e in TranscriptStore(source).iter_entries())
        if not fenced:
            problems.append("fencing: the stale writer's append entered the source's history")
    after = history_fingerprint(target) if Path(target).exists() else {}
    lost = sum(max(0, n - after.get(key, 0)) for key, n in before.items())
    duplicated = sum(max(0, n - before.get(key, 0)) for key, n in after.items())
    if lost or duplicated:
        problems.append(f"entries: {lost} lost, {duplicated} duplicated or altered")
    recorded: set[str] = set()
    resumed: dict[str, Any] | None = None
    if Path(target).exists() and result.steps:
        prefix = f"migration:{result.steps[0]['migration']}:"
        for e in TranscriptStore(target).read(MIGRATION_SESSION).entries:
            if e.id.startswith(prefix):
                recorded.add(str(e.meta.get("migration_step")))
                if e.meta.get("migration_step") == "resume":
                    resumed = json.loads(e.content)
    steps = set(MIGRATION_STEPS) <= recorded
    if not steps:
        problems.append(f"steps: the target records {sorted(recorded)}, not all of {', '.join(MIGRATION_STEPS)}")
    intents_lost = 0
    if Path(target).exists():
        carried = set(IntentLog(target).intents())
        intents_lost = sum(1 for intent_id in IntentLog(source).intents() if intent_id not in carried)
        if intents_lost:
            problems.append(f"intents: {intents_lost} held by the source missing from the target's log")
    visible = _capabilities_recorded(source, target, resumed) if Path(target).exists() else True
    if not visible:
        problems.append("capabilities: a capability the move reduced or gained is not recorded in the resume step")
    return MigrationCheck(lineage, epoch, fenced, lost, duplicated, steps, intents_lost, visible, tuple(problems))


def _capabilities_recorded(source: Path | str, target: Path | str, resumed: dict[str, Any] | None) -> bool:
    """Capability visibility: the changes between the source's and the target's provider contracts are the ones
    the ``resume`` step recorded (a gained one recorded unauthorized unless the target's operator authorized it)."""
    expected = [c.to_dict() for c in capability_changes(read_providers(source), read_providers(target))]
    recorded = list((resumed or {}).get("capabilities") or [])
    return sorted(json.dumps(c, sort_keys=True) for c in expected) == sorted(
        json.dumps(c, sort_keys=True) for c in recorded
    )
