from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lca.memory import Authority, MemoryRecord, MemoryType, Privacy  # noqa: E402
from lca.types import EntryKind, TranscriptEntry  # noqa: E402
from tests.fakes import FakeHashingEmbedder  # noqa: E402


def make_entry(session: str, n: int, content: str | None = None, **kw) -> TranscriptEntry:
    return TranscriptEntry(
        id=f"{session}:{n}",
        session_id=session,
        agent_id="agent-test",
        kind=kw.pop("kind", EntryKind.USER_TURN),
        timestamp=kw.pop("timestamp", f"2026-01-01T00:00:{n % 60:02d}"),
        content=content if content is not None else f"entry {n} of {session}",
        **kw,
    )


def make_fact(memory_id: str, *, critical: bool = False) -> MemoryRecord:
    """A reviewed, private fact record: the memory most store tests need."""
    return MemoryRecord(
        id=memory_id,
        type=MemoryType.FACT,
        created=datetime(2026, 1, 1),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        critical=critical,
    )


@pytest.fixture
def fake_embedder() -> FakeHashingEmbedder:
    return FakeHashingEmbedder()


@pytest.fixture(scope="session")
def data_root() -> Path | None:
    from protocols.evals.data_paths import data_roots

    for root in data_roots():
        if (root / "locomo" / "locomo10.json").exists():
            return root
    return None


def _missing_data(message: str):
    if os.environ.get("LCA_REQUIRE_DATA"):
        pytest.fail(f"{message} (LCA_REQUIRE_DATA is set, LCA_DATA={os.environ.get('LCA_DATA')})")
    pytest.skip(message)


@pytest.fixture(scope="session")
def locomo_file(data_root) -> Path:
    if data_root is None:
        _missing_data("no LoCoMo file: set LCA_DATA to a folder holding locomo/locomo10.json")
    return data_root / "locomo" / "locomo10.json"


@pytest.fixture(scope="session")
def longmemeval_oracle(data_root) -> Path:
    path = data_root / "longmemeval" / "longmemeval_oracle.json.gz" if data_root else None
    if path is None or not path.exists():
        _missing_data("no LongMemEval oracle file: set LCA_DATA")
    return path


@pytest.fixture(scope="session")
def longmemeval_s_dev(data_root) -> Path:
    path = data_root / "longmemeval" / "longmemeval_s_dev.json.xz" if data_root else None
    if path is None or not path.exists():
        _missing_data("no LongMemEval_S dev file: set LCA_DATA")
    return path


@pytest.fixture(scope="session")
def real_embedder():
    from lca.index.embedders import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()
