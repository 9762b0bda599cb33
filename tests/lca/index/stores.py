"""Stores the index tests share: the LoCoMo fixture imported into a fresh substrate, and memory records."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from lca.importers import import_locomo
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"


def fixture_store(path, embedder=None, **kw) -> Substrate:
    substrate = Substrate(path, embedder=embedder or FakeHashingEmbedder(), **kw)
    sessions, report = import_locomo(FIXTURE)
    substrate.import_sessions(sessions, report)
    return substrate


def memory(id_: str, **kw) -> MemoryRecord:
    return MemoryRecord(
        id=id_,
        type=kw.pop("type", MemoryType.FACT),
        created=datetime(2026, 1, 1),
        authority=Authority.APPROVED,
        privacy=Privacy.PUBLIC,
        **kw,
    )
