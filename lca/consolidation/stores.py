"""What a consolidation cycle is handed: the stores it reads and writes, and the facade's operations
it needs (indexing, recall, appending, the writer lock). The facade (lca.substrate) composes them;
the cycle never sees the facade itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from lca.experience import ExperienceLog
from lca.index.store import IndexStore
from lca.ingest import IngestReport
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryFile, MemoryStore
from lca.ports import Embedder
from lca.recall import RecallConfig, RecallContext, RecallResult
from lca.transcript import TranscriptStore
from lca.types import TranscriptEntry


@dataclass(frozen=True)
class CycleStores:
    layout: StoreLayout
    transcript: TranscriptStore
    memory: MemoryStore
    index: IndexStore
    embedder: Embedder
    experience: ExperienceLog
    ledger: Ledger
    recall_config: RecallConfig
    memory_files: Callable[[], dict[str, MemoryFile]]  # loaded memory files by id (cached)
    recall: Callable[[RecallContext, RecallConfig], RecallResult]
    ingest: Callable[[], IngestReport]  # takes the writer lock itself
    append: Callable[[Sequence[TranscriptEntry]], Any]  # durable append, not indexed
    writer_lock: Callable[[], AbstractContextManager[Any]]
