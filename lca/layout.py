"""Every path inside an agent home, named once.

A store is a folder: the authoritative transcript and memory files, the learned-state event logs,
and the derived index that ``lca reindex`` rebuilds. Modules ask ``StoreLayout`` where a thing
lives instead of joining path segments themselves, so the layout can be read (and changed) here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

SESSION_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class StoreLayout:
    """The paths of one agent home rooted at ``root``. Nothing is created here."""

    root: Path

    def __init__(self, root: Path | str) -> None:
        object.__setattr__(self, "root", Path(root))

    # ---- authoritative -------------------------------------------------------------------------
    @property
    def sessions(self) -> Path:
        """One JSONL transcript file per session."""
        return self.root / "sessions"

    def session_file(self, session_id: str) -> Path:
        """``sessions/<id>.jsonl``, the id percent-quoted so any session id is one safe file name."""
        return self.sessions / (quote(session_id, safe="") + SESSION_SUFFIX)

    @staticmethod
    def session_id_of(path: Path) -> str:
        """The session id a ``session_file`` path names (the inverse of the quoting)."""
        return unquote(path.name[: -len(SESSION_SUFFIX)])

    @property
    def quarantine(self) -> Path:
        """Torn or malformed transcript lines, moved aside and never dropped."""
        return self.root / "quarantine"

    def quarantine_file(self, name: str) -> Path:
        return self.quarantine / name

    @property
    def quarantine_log(self) -> Path:
        return self.quarantine / "log.jsonl"

    @property
    def memory(self) -> Path:
        """Memory files: markdown with YAML front matter."""
        return self.root / "memory"

    def memory_file(self, memory_id: str) -> Path:
        return self.memory / f"{memory_id}.md"

    @property
    def identity(self) -> Path:
        """Identity, user and instruction files (Layer 0)."""
        return self.root / "identity"

    def identity_file(self, name: str) -> Path:
        return self.identity / f"{name}.md"

    # ---- learned state: append-only event logs -------------------------------------------------
    @property
    def events(self) -> Path:
        return self.root / "events"

    @property
    def ledger(self) -> Path:
        return self.events / "ledger.jsonl"

    @property
    def experience_log(self) -> Path:
        return self.events / "experience.jsonl"

    @property
    def retrieval_log(self) -> Path:
        return self.events / "retrievals.jsonl"

    @property
    def authority_log(self) -> Path:
        """Every change of the authority record: who held the agent's authority, at which epoch, when."""
        return self.events / "authority.jsonl"

    # ---- governance ----------------------------------------------------------------------------
    @property
    def authority(self) -> Path:
        """The agent id, the fencing epoch and whether this store is the active copy (``lca.authority``)."""
        return self.root / "authority.json"

    @property
    def proposals(self) -> Path:
        """Procedural writes held for a named approver."""
        return self.root / "proposals"

    def proposal(self, proposal_id: str) -> Path:
        return self.proposals / f"{proposal_id}.json"

    @property
    def consolidation(self) -> Path:
        """One report per consolidation cycle."""
        return self.root / "consolidation"

    def cycle_report(self, cycle_id: str) -> Path:
        return self.consolidation / f"{cycle_id}.json"

    @property
    def archive(self) -> Path:
        """Earlier versions of superseded memory and identity files."""
        return self.root / "archive"

    def memory_archive(self, memory_id: str) -> Path:
        return self.archive / "memory" / memory_id

    def identity_archive(self, name: str) -> Path:
        return self.archive / "identity" / name

    # ---- settings, locks and logs --------------------------------------------------------------
    @property
    def recall_settings(self) -> Path:
        return self.root / "recall.yaml"

    @property
    def retrieval_settings(self) -> Path:
        """The store's ``RetrievalConfig`` (``lca.retrieval``), when it departs from the defaults."""
        return self.root / "retrieval.yaml"

    @property
    def write_lock(self) -> Path:
        """Held by the one writer at a time."""
        return self.root / "write.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def recall_log(self) -> Path:
        return self.logs / "recall.jsonl"

    @property
    def prune_log(self) -> Path:
        return self.logs / "prune.jsonl"

    @property
    def fencing_log(self) -> Path:
        """Appends refused because the writer's authority was gone (``lca.authority``)."""
        return self.logs / "fencing.jsonl"

    # ---- derived by the integration cycle (``lca.insight``): rebuildable from the memory files -------
    @property
    def insight(self) -> Path:
        """Structural signatures, their quarantine and one report per integration cycle.

        Derived, but not deleted by ``lca reindex``: a signature costs a model call, and ``lca integrate --rebuild``
        regenerates them from the records."""
        return self.root / "insight"

    @property
    def signatures(self) -> Path:
        """One validated structural signature per record, with its provenance (``lca.insight.store``)."""
        return self.insight / "signatures.jsonl"

    @property
    def signature_quarantine(self) -> Path:
        """Signer answers refused by validation, each with its reason: counted, never silently dropped."""
        return self.insight / "quarantine.jsonl"

    @property
    def insight_centrality(self) -> Path:
        """The records' link-graph centrality, refreshed by every integration cycle (``lca.insight.centrality``)."""
        return self.insight / "centrality.json"

    @property
    def insight_taxonomy(self) -> Path:
        """Each record's tags from the established schemas that cover it (``lca.insight.taxonomy``)."""
        return self.insight / "taxonomy.json"

    @property
    def integration_cycles(self) -> Path:
        return self.insight / "cycles"

    def integration_report(self, cycle_id: str) -> Path:
        return self.integration_cycles / f"{cycle_id}.json"

    # ---- derived: everything ``lca reindex`` deletes and rebuilds ------------------------------
    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def inferred_events(self) -> Path:
        """Replacement events the model-free detector inferred at ingest (derived: reindex rebuilds them)."""
        return self.index / "events.jsonl"

    @property
    def catalog(self) -> Path:
        return self.index / "catalog.sqlite"

    @property
    def vectors(self) -> Path:
        return self.index / "vectors.faiss"

    @property
    def floor_profile(self) -> Path:
        """Recall's measure of the store for its floor (``lca.recall.floor``), fitted at ingest."""
        return self.index / "floor_profile.npz"

    @property
    def lexical(self) -> Path:
        return self.index / "lexical"

    @property
    def insight_embeddings(self) -> Path:
        """The integration cycle's embedding cache of both spaces (``lca.index.embedding_cache``): a cache, so it
        lives with the index (reindex may delete it; bundles do not ship it)."""
        return self.index / "insight-embeddings"

    def holds_store(self) -> bool:
        """Whether ``root`` already holds a store (a transcript, memory files or an index)."""
        return any(p.exists() for p in (self.sessions, self.memory, self.index, self.events))
