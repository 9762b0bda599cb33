"""Issue 49, case 8: a Layer-1 writer opened before a migration is refused, never acknowledged and left behind.

A ``TranscriptStore`` opened on the authoritative store keeps appending from its own thread while the store is
migrated, again and again down a chain of stores. Every append it was told succeeded must reach the final store;
once a move has bound, its next append is refused. Before appends took the store's writer lock, the ones that fell
between the migration's checkpoint and its bind were fsync'd, acknowledged, and never reached the target.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lca.authority import FencedWriteError, fencing_refusals
from lca.bundle import migrate
from lca.transcript import TranscriptStore
from tests.conftest import make_entry


def migrate_under_a_stale_writer(tmp_path: Path, migrations: int) -> tuple[int, list[str], int]:
    """Run ``migrations`` moves with a writer appending throughout each; (acknowledged, lost ids, refusals)."""
    current = tmp_path / "store-0"
    TranscriptStore(current).append([make_entry("s", 0, "the first turn")])
    acknowledged: list[str] = []
    refusals = 0
    for n in range(1, migrations + 1):
        writer = TranscriptStore(current)  # opened before the move: it holds the epoch the move advances
        refused = threading.Event()
        started = threading.Event()

        def keep_appending(
            writer: TranscriptStore = writer,
            n: int = n,
            refused: threading.Event = refused,
            started: threading.Event = started,
        ) -> None:
            turn = 0
            while True:
                entry = make_entry(f"writer-{n}", turn, f"said while migration {n} ran, turn {turn}")
                try:
                    writer.append([entry])
                except FencedWriteError:
                    refused.set()
                    return
                acknowledged.append(entry.id)
                started.set()
                turn += 1

        thread = threading.Thread(target=keep_appending, daemon=True)
        thread.start()
        assert started.wait(30)  # the writer is appending before the move begins
        time.sleep(0.002 * (n % 5))  # the move starts at different points of an append
        target = tmp_path / f"store-{n}"
        result = migrate(current, target, bundle_dir=tmp_path / f"bundle-{n}")
        assert result.ok, result.error
        thread.join(60)
        assert not thread.is_alive() and refused.is_set()  # the stale writer stopped at a refusal, not a loss
        refusals += len(fencing_refusals(current))
        current = target
    final = {e.id for e in TranscriptStore(current).iter_entries()}
    return len(acknowledged), [i for i in acknowledged if i not in final], refusals


def test_a_writer_opened_before_a_migration_is_refused_and_loses_nothing(tmp_path):
    acknowledged, lost, refusals = migrate_under_a_stale_writer(tmp_path, 5)
    assert acknowledged > 5 and lost == [] and refusals == 5


@pytest.mark.slow
def test_fifty_migrations_with_a_stale_writer_appending_throughout_lose_no_acknowledged_entry(tmp_path):
    acknowledged, lost, refusals = migrate_under_a_stale_writer(tmp_path, 50)
    assert acknowledged > 50 and lost == [] and refusals == 50
