"""One real store per haystack, built through the importers, and the rankings the product returns from it.

A LongMemEval question's haystack or a LoCoMo conversation is imported into a fresh substrate
(transcript, SQLite catalog, faiss, bm25s) exactly as ``lca import`` would; a retriever is then only a
way of asking that store: ``bm25`` and ``dense`` are its plain baselines, ``hybrid`` is its search under a
``RetrievalConfig``, ``resonance`` is its recall (the units beyond recall's candidate pool follow in
hybrid order). Rankings are over entries (an entry split into several chunks ranks at its best chunk).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from lca.importers import ImportedSession
from lca.recall import RecallContext
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from protocols.bench.retrieval.config import AskedConfig, recall_config_for

MODES = {"bm25": "lexical", "dense": "dense", "hybrid": "hybrid", "resonance": "hybrid"}


class HaystackStore:
    """A substrate holding one haystack; ``rank`` gives entry ids, best first."""

    def __init__(
        self,
        workdir: Path,
        sessions: Sequence[ImportedSession],
        embedder,
        *,
        config: RetrievalConfig,
    ) -> None:
        shutil.rmtree(workdir, ignore_errors=True)
        self.workdir = workdir
        self.config = config
        self.substrate = Substrate(workdir, embedder=embedder, retrieval=config)
        self.substrate.import_sessions(list(sessions))
        self.chunks = int(self.substrate.index.stats()["chunks"])

    def search(
        self, query: str, retriever: str, *, as_of: datetime | None = None, config: RetrievalConfig | None = None
    ) -> list[str]:
        """Entry ids ranked by the store's search (every chunk, so recall at any depth can be scored)."""
        mode = MODES[retriever]
        k = max(self.chunks, 1)
        if mode == "hybrid":
            hits = self.substrate.index.search(query, k=k, pool=k, mode=mode, as_of=as_of, config=config)
        else:
            hits = self.substrate.search(query, k=k, mode=mode, pool=k)
        return _entries(h.pointer.entry_id for h in hits)

    def parts(
        self, query: str, *, as_of: datetime | None = None, config: RetrievalConfig
    ) -> tuple[list[str], list[dict[str, float]]]:
        """Entry ids ranked as ``search`` ranks them under ``config``, and each entry's parts of its score (its
        best chunk's, by weight name: ``lca.retrieval.ranker.rank_frame``'s ``parts``), for ``lca fit``."""
        from lca.index.hybrid import hybrid_search

        index = self.substrate.index
        k = max(self.chunks, 1)
        parts: dict = {}
        hits = hybrid_search(index, index.query_vector, query, k, k, None, as_of, config, parts=parts)
        entries: dict[str, dict[str, float]] = {}
        for i, hit in enumerate(hits):
            entry = hit.pointer.entry_id
            if entry is not None and entry not in entries:
                entries[entry] = {name: float(values[i]) for name, values in parts.items()}
        return list(entries), list(entries.values())

    def recall_config(self, asked: AskedConfig | None = None):
        """The bench's recall settings for this store; with ``asked``, its recall changes and ranking too."""
        base = recall_config_for(self.chunks)
        return asked.recall_config(base) if asked is not None else base

    def recalled(self, query: str, *, as_of: datetime | None = None, asked: AskedConfig | None = None):
        """Recall's ranked candidates (resonance score R), every candidate kept."""
        config = self.recall_config(asked)
        return self.substrate.recall(RecallContext(query=query, as_of=as_of), config=config).candidates

    def recall(self, query: str, *, as_of: datetime | None = None, asked: AskedConfig | None = None) -> list[str]:
        """Entry ids in the order of recall's ranked candidates (resonance score R), every candidate kept."""
        return _entries(_entry_of(candidate) for candidate in self.recalled(query, as_of=as_of, asked=asked))

    def recall_parts(
        self, query: str, *, as_of: datetime | None = None, asked: AskedConfig | None = None
    ) -> tuple[list[str], list[dict[str, float] | None]]:
        """Entry ids as ``rank`` gives them for ``resonance``, and each recalled entry's signed terms (its best
        candidate's: each term's part of R, before its weight), None past recall's pool; for ``lca fit recall``."""
        from lca.recall.resonance import RESONANCE_TERMS

        parts: dict[str, dict[str, float]] = {}
        for candidate in self.recalled(query, as_of=as_of, asked=asked):
            terms = {t.name: t.sign * float(candidate.terms[t.name]) for t in RESONANCE_TERMS}
            parts.setdefault(_entry_of(candidate), terms)
        rest = [
            e
            for e in self.search(query, "resonance", as_of=as_of, config=asked.retrieval if asked else None)
            if e not in parts
        ]
        return [*parts, *rest], [*parts.values(), *([None] * len(rest))]

    def rank(
        self, query: str, retriever: str, *, as_of: datetime | None = None, config: AskedConfig | None = None
    ) -> list[str]:
        """Entry ids, best first: the store's search under ``config``'s ranking, or for ``resonance`` its
        recall under ``config`` (ranking and recall settings) followed by the rest in search order."""
        ranking = config.retrieval if config is not None else None
        hybrid = self.search(query, retriever, as_of=as_of, config=ranking)
        if retriever != "resonance":
            return hybrid
        head = self.recall(query, as_of=as_of, asked=config)
        seen = set(head)
        return head + [e for e in hybrid if e not in seen]

    def close(self) -> None:
        self.substrate.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class QueryMemo:
    """An embedder that remembers its query vectors for the run: a question asked under several configurations
    (an ablation, a grid) or of several stores is embedded once. Everything else passes through."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.memo: dict[str, object] = {}

    def embed_query(self, text: str):
        if text not in self.memo:
            self.memo[text] = self.inner.embed_query(text)
        return self.memo[text]

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def _entry_of(candidate) -> str:
    """The entry id a recalled candidate's source pointer names."""
    return candidate.source.split("#", 1)[1].split("[", 1)[0]


def _entries(entry_ids) -> list[str]:
    seen: dict[str, None] = {}
    for entry_id in entry_ids:
        if entry_id is not None and entry_id not in seen:
            seen[entry_id] = None
    return list(seen)
