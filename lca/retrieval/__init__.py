"""The substrate's one ranking path: a declared ``RetrievalConfig``, named fusion functions and the signals
read from transcript structure (session, order, speaker, time). ``lca.index.store.IndexStore.search`` ranks
through ``rank_frame``; the benchmarks measure that same search. Nothing here touches a store.

The config is importable without numpy (the command line checks ``--set`` before any model loads); the
numerical parts load on first use.
"""

from __future__ import annotations

from typing import Any

from lca.retrieval.config import RETRIEVAL_FIELDS, RetrievalConfig

_LAZY = {
    "FUSIONS": "lca.retrieval.fusion",
    "blend": "lca.retrieval.fusion",
    "fuse": "lca.retrieval.fusion",
    "rrf": "lca.retrieval.fusion",
    "zscore": "lca.retrieval.fusion",
    "Frame": "lca.retrieval.ranker",
    "QueryFacts": "lca.retrieval.ranker",
    "rank_frame": "lca.retrieval.ranker",
}

__all__ = ["RETRIEVAL_FIELDS", "RetrievalConfig", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lca.retrieval' has no attribute {name!r}")
