"""The hybrid index: faiss vectors and bm25s lexical scores over chunks in one SQLite catalog.

A hybrid search ranks through ``lca.retrieval`` under the store's ``RetrievalConfig`` (its defaults, or
the store's ``retrieval.yaml``): z-score, reciprocal-rank (Cormack et al. 2009) or min-max fusion of
the dense and BM25 scores, then the transcript-structure signals the config weighs. Ties break on chunk
id, so results do not depend on insertion order and a rebuilt index returns the same list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from lca.errors import DerivedStoreDamagedError, EmbedderMismatchError, LCAError
from lca.index.catalog import Catalog
from lca.index.chunker import sentence_keys
from lca.index.completeness import SAVED_META, record_saved
from lca.index.frames import StoreStructure
from lca.index.hybrid import hybrid_search
from lca.index.lexical import Bm25LexicalIndex
from lca.index.lexical_files import MANIFEST, leftover_files, remove_leftovers
from lca.index.redaction import shown, vouch
from lca.index.text_facts import StoreText, TextFacts
from lca.index.vectors import FaissVectorIndex, interrupted_saves, vector_id_for
from lca.index.window_keys import write_window_keys
from lca.layout import StoreLayout
from lca.ports import Embedder
from lca.retrieval import RetrievalConfig
from lca.retrieval.query import unit_query_vector
from lca.secrets import holds_redaction
from lca.types import Chunk, SearchHit, text_digest

ProgressFn = Callable[[int], None]


@dataclass
class AddResult:
    """What one write did: new chunks, duplicates skipped, texts embedded or reused, failures held back."""

    new_chunks: int = 0
    duplicate_chunks: int = 0
    embedded_texts: int = 0
    reused_vectors: int = 0
    failed_chunks: int = 0
    retried_failures_recovered: int = 0
    failed_sentence_keys: int = 0  # sentence keys that could not be embedded (their chunk is indexed)
    failed_window_keys: int = 0  # window keys that could not be embedded (``lca.index.window_keys``)
    errors: list[str] = field(default_factory=list)

    def merge(self, other: AddResult) -> None:
        for name in (
            "new_chunks",
            "duplicate_chunks",
            "embedded_texts",
            "reused_vectors",
            "failed_chunks",
            "retried_failures_recovered",
            "failed_sentence_keys",
            "failed_window_keys",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)


@dataclass(frozen=True)
class IndexConsistency:
    catalog_vectors: int
    faiss_vectors: int
    missing_vectors: int  # catalog texts with no vector in faiss
    orphan_vectors: int  # faiss vectors no catalog text points at
    lexical_documents: int
    catalog_chunks: int
    lexical_stale: bool

    @property
    def consistent(self) -> bool:
        return (
            self.missing_vectors == 0
            and self.orphan_vectors == 0
            and not self.lexical_stale
            and self.lexical_documents == self.catalog_chunks
        )


def interrupted_save_files(layout: StoreLayout) -> list[Path]:
    """Files of index saves a killed writer left behind, which the next ``flush`` removes: faiss temporaries of
    dead processes and the lexical index's (``lca.index.lexical_files.leftover_files``)."""
    return interrupted_saves(layout.vectors) + leftover_files(layout.lexical)


class IndexStore:
    """Derived search state under ``<root>/index``. Callers hold the store's writer lock for writes."""

    def __init__(
        self,
        root: Path | str,
        embedder: Embedder,
        *,
        pool: int | None = None,
        embed_batch: int = 256,
        embed_retries: int = 2,
        approximate_threshold: int = 200_000,
        retrieval: RetrievalConfig | None = None,
        catalog_path: Path | None = None,  # the store's catalog unless given (":memory:": a store never indexed)
    ) -> None:
        self.root = Path(root)
        self.embedder = embedder
        # the ranking, and what the index keeps (its sentence keys); ``pool`` overrides its pool
        self.retrieval = retrieval or RetrievalConfig()
        if pool is not None and pool != self.retrieval.pool:
            self.retrieval = replace(self.retrieval, pool=pool)
        self.pool = self.retrieval.pool
        self.embed_batch = embed_batch
        self.embed_retries = embed_retries
        self.approximate_threshold = approximate_threshold
        self.layout = StoreLayout(self.root)
        self.dir = self.layout.index
        self.catalog_ = Catalog(catalog_path or self.layout.catalog)
        self._vectors: FaissVectorIndex | None = None
        self._lexical: Bm25LexicalIndex | None = None
        self._lexical_dirty = False
        self._vectors_dirty = False
        self._maps: tuple | None = None
        self._structure_cache: tuple[str, StoreStructure] | None = None
        self._norms_cache: tuple[tuple[str, int, int], np.ndarray] | None = None
        self.text_facts = TextFacts()
        self._models: dict[str, int] = {}
        self._models_checked: str | None = "unchecked"

    def close(self) -> None:
        self.catalog_.close()

    # ---- identity of the embedder -----------------------------------------------
    def stored_embedder_id(self) -> str | None:
        return self.catalog_.get_meta("embedder_id")

    def embedder_mismatch(self) -> str | None:
        stored = self.stored_embedder_id()
        if stored is not None and stored != self.embedder.embedder_id:
            source = self.catalog_.get_meta("embedder_source")
            switch = f"`lca reindex --embedder {getattr(self.embedder, 'source', None) or 'NAME'}`"
            return (
                f"the store at {self.root} was embedded by '{stored}'{f' ({source})' if source else ''}, the running "
                f"embedder is '{self.embedder.embedder_id}'; vectors are never mixed: reindex required ({switch} "
                "re-embeds the store with it)"
            )
        generation = self.catalog_.get_meta("chunks_generation")
        if self._models_checked != generation:  # a full scan, so once per catalog generation
            self._models = self.catalog_.vectors_by_embedder()
            self._models_checked = generation
        by_model = self._models
        if any(name != stored for name in by_model):
            return (
                f"the store at {self.root} holds vectors from more than one embedder ({by_model}); "
                "run `lca reindex` to re-embed"
            )
        return None

    def _require_embedder(self) -> None:
        problem = self.embedder_mismatch()
        if problem:
            raise EmbedderMismatchError(problem)

    # ---- derived structures, loaded lazily -----------------------------------------
    @property
    def vectors(self) -> FaissVectorIndex:
        if self._vectors is None:
            path = self.layout.vectors
            dim_text = self.catalog_.get_meta("dimension")
            if path.exists() and dim_text:
                try:
                    self._vectors = FaissVectorIndex.load(
                        path, int(dim_text), approximate_threshold=self.approximate_threshold
                    )
                except ValueError as exc:  # a file of another shape than the catalog records
                    raise DerivedStoreDamagedError(path, exc) from exc
            else:
                self._vectors = FaissVectorIndex(
                    int(dim_text) if dim_text else self.embedder.dimension,
                    approximate_threshold=self.approximate_threshold,
                )
        return self._vectors

    @property
    def lexical(self) -> Bm25LexicalIndex:
        if self._lexical is None:
            self._lexical = Bm25LexicalIndex.load(self.layout.lexical)
        synced = self._lexical.synced(self.catalog_)  # stale: brought up in memory (the next writer saves it)
        if synced is not self._lexical:
            self._lexical, self._lexical_dirty = synced, True
        return self._lexical

    def consistency(self) -> IndexConsistency:
        catalog_ids = np.asarray(self.catalog_.vector_ids(), dtype=np.int64)
        faiss_ids = self.vectors.ids()
        missing = np.setdiff1d(catalog_ids, faiss_ids)
        orphans = np.setdiff1d(faiss_ids, catalog_ids)
        generation = self.catalog_.get_meta("chunks_generation") or ""
        chunks = self.catalog_.stats()["chunks"]
        stale = True
        lex_docs = 0
        path = self.layout.lexical
        if path.exists():
            saved = Bm25LexicalIndex.load(path)
            stale = saved.generation_ != generation
            lex_docs = len(saved)
        elif chunks == 0:
            stale = False
        return IndexConsistency(len(catalog_ids), len(faiss_ids), len(missing), len(orphans), lex_docs, chunks, stale)

    # ---- writing ---------------------------------------------------------------
    def add_chunks(self, chunks: Sequence[Chunk], *, progress: ProgressFn | None = None) -> AddResult:
        """Insert chunks not already present; embed only texts the store has no vector for."""
        self._require_embedder()
        result = AddResult()
        if self.catalog_.get_meta("embedder_id") is None:
            self.catalog_.set_meta("embedder_id", self.embedder.embedder_id)
            self.catalog_.set_meta("dimension", str(self.embedder.dimension))
            if source := getattr(self.embedder, "source", None):  # how the next command opens it with this embedder
                self.catalog_.set_meta("embedder_source", str(source))
            self.catalog_.set_meta(SAVED_META, "")  # nothing saved yet: a kill before the first flush is named
        unique: dict[str, Chunk] = {}
        for chunk in chunks:
            if chunk.chunk_id in unique:
                result.duplicate_chunks += 1
            else:
                unique[chunk.chunk_id] = chunk
        known = self.catalog_.known_chunk_ids(unique)
        result.duplicate_chunks += len(known)
        todo = [c for cid, c in unique.items() if cid not in known]
        if progress and known:
            progress(len(known))
        for start in range(0, len(todo), self.embed_batch):
            batch = todo[start : start + self.embed_batch]
            result.merge(self._add_batch(batch))
            if progress:
                progress(len(batch))
        if self.retrieval.window_keys and result.new_chunks:
            sessions = {c.pointer.session_id for c in todo if c.pointer.session_id}
            written = write_window_keys(self, sessions, set(unique), self._embed_fail_closed)
            self._vectors_dirty |= bool(written.embedded)
            result.embedded_texts += written.embedded
            result.failed_window_keys += written.failed
        return result

    def _add_batch(self, batch: Sequence[Chunk]) -> AddResult:
        result = AddResult()
        keys = (
            {c.chunk_id: [(text_digest(k), k) for k in sentence_keys(c.text)] for c in batch}
            if self.retrieval.sentence_keys
            else {}
        )
        texts = [(c.text_hash, c.text) for c in batch] + [key for chunk_keys in keys.values() for key in chunk_keys]
        have = self.catalog_.known_text_hashes({h for h, _ in texts})
        need: dict[str, str] = {}
        for text_hash, text in texts:
            if text_hash not in have:
                need.setdefault(text_hash, text)
        vectors, errors = self._embed_fail_closed(list(need.items()))
        if vectors:
            self.vectors.add(
                np.asarray([vector_id_for(h) for h in vectors], dtype=np.int64), np.vstack(list(vectors.values()))
            )
            self._vectors_dirty = True
        self.catalog_.begin()
        try:
            vouch(self.catalog_, [c.text for c in batch if c.text_hash in vectors])
            code = self.catalog_.embedder_code(self.embedder.embedder_id)
            for text_hash in vectors:
                self.catalog_.insert_text(text_hash, vector_id_for(text_hash), need[text_hash], code)
            for chunk in batch:
                if chunk.text_hash in have or chunk.text_hash in vectors:
                    self.catalog_.insert_chunk(chunk)
                    self.catalog_.clear_failure(chunk.chunk_id)
                    result.new_chunks += 1
                    for key_hash, _ in keys.get(chunk.chunk_id, ()):
                        if key_hash in have or key_hash in vectors:
                            self.catalog_.insert_sentence_key(chunk.chunk_id, key_hash)
                        else:  # the chunk is still found by its own text; the lost key is counted
                            result.failed_sentence_keys += 1
                else:
                    self.catalog_.record_failure(chunk, errors[chunk.text_hash])
                    result.failed_chunks += 1
                    result.errors.append(f"{chunk.pointer.key()}: {errors[chunk.text_hash]}")
            if result.new_chunks:
                self.catalog_.bump_generation()
            self.catalog_.add_counter("embedded_texts", len(vectors))
            self.catalog_.add_counter("embedding_failures", sum(1 for h in need if h not in vectors))
            self.catalog_.add_counter("sentence_key_failures", result.failed_sentence_keys)
            self.catalog_.commit()
        except BaseException:
            self.catalog_.rollback()
            raise
        result.embedded_texts += len(vectors)
        result.reused_vectors += sum(1 for c in batch if c.text_hash in have)
        return result

    def _embed_fail_closed(self, items: list[tuple[str, str]]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """Embed with retries; isolate failing texts by halving; never return a zero or non-finite vector."""
        done: dict[str, np.ndarray] = {}
        errors: dict[str, str] = {}
        if not items:
            return done, errors

        def attempt(group: list[tuple[str, str]]) -> None:
            last_error = ""
            for _ in range(self.embed_retries + 1):
                try:
                    out = self.embedder.embed([t for _, t in group])
                    out = np.asarray(out, dtype=np.float32)
                    if out.shape != (len(group), self.vectors.dimension):
                        raise LCAError(
                            f"embedder returned shape {out.shape}, expected ({len(group)}, {self.vectors.dimension})"
                        )
                    bad = []
                    for (h, _), vec in zip(group, out):
                        norm = float(np.linalg.norm(vec))
                        if not np.all(np.isfinite(vec)) or norm < 1e-6:
                            bad.append((h, _))
                        else:
                            done[h] = vec / norm
                    if not bad:
                        return
                    group = bad
                    last_error = "embedder returned a zero or non-finite vector"
                except Exception as exc:  # the embedder is a plug-in: any failure is held back and counted
                    last_error = f"{type(exc).__name__}: {exc}"
            if len(group) > 1:
                mid = len(group) // 2
                attempt(group[:mid])
                attempt(group[mid:])
            else:
                errors[group[0][0]] = last_error

        attempt(items)
        return done, errors

    def retry_failures(self) -> AddResult:
        failed = self.catalog_.failed_chunks()
        if not failed:
            return AddResult()
        result = self.add_chunks(failed)
        result.retried_failures_recovered = len(failed) - len(self.catalog_.failed_chunks())
        return result

    def remove_memory(self, memory_id: str) -> int:
        self.catalog_.begin()
        try:
            removed = self.catalog_.delete_chunks_of_memory(memory_id)
            if removed:
                self.catalog_.bump_generation()
            self.catalog_.commit()
        except BaseException:
            self.catalog_.rollback()
            raise
        return removed

    def repair(self) -> dict[str, int]:
        """Bring faiss in line with the catalog after a crash: drop orphans, re-embed missing vectors."""
        catalog_ids = np.asarray(self.catalog_.vector_ids(), dtype=np.int64)
        orphans = np.setdiff1d(self.vectors.ids(), catalog_ids)
        if len(orphans):
            self.vectors.remove(orphans)
            self._vectors_dirty = True
        missing = np.setdiff1d(catalog_ids, self.vectors.ids())
        reembedded = 0
        if len(missing):
            rows = self.catalog_.texts_for_vector_ids(missing.tolist())
            vectors, errors = self._embed_fail_closed([(h, t) for h, _, t in rows])
            if vectors:
                self.vectors.add(
                    np.asarray([vector_id_for(h) for h in vectors], dtype=np.int64), np.vstack(list(vectors.values()))
                )
                self._vectors_dirty = True
            reembedded = len(vectors)
        return {"orphans_removed": int(len(orphans)), "vectors_reembedded": reembedded}

    def flush(self) -> None:
        """Persist faiss, drop unreferenced texts, and bring the lexical index to the catalog's chunks."""
        orphans = self.catalog_.orphan_texts()
        if orphans:
            self.catalog_.begin()
            self.catalog_.delete_texts([h for h, _ in orphans])
            self.catalog_.commit()
            self.vectors.remove(np.asarray([v for _, v in orphans], dtype=np.int64))
            self._vectors_dirty = True
        self.dir.mkdir(parents=True, exist_ok=True)
        remove_leftovers(interrupted_save_files(self.layout))  # of saves killed before their rename or manifest
        if self._vectors is not None and (self._vectors_dirty or not self.layout.vectors.exists()):
            self._vectors.save(self.layout.vectors)
            self._vectors_dirty = False
        lexical = self.lexical  # appends the new chunks if the generation moved
        if self._lexical_dirty or not (self.layout.lexical / MANIFEST).exists():
            lexical.save(self.layout.lexical)
            self._lexical_dirty = False
        record_saved(self.catalog_)  # faiss and BM25 now hold this generation (lca.index.completeness)

    # ---- read-only views (health reports, benchmarks) ---------------------------------
    def stats(self) -> dict:
        """The catalog's counts: chunks by source, texts, text bytes, split chunks, failures, sentence keys."""
        return self.catalog_.stats()

    def chunk_count(self) -> int:
        """How many chunks the store holds (from the cached structure, so cheap on the search path)."""
        return len(self.structure())

    def chunks_before(self, chunk_ids: Iterable[str]) -> dict[str, str]:
        """Each chunk's chunk indexed right before it in its session, of another entry (``StoreStructure``)."""
        return self.structure().chunks_before(chunk_ids)

    def table_sizes(self) -> dict[str, dict[str, int]]:
        """Bytes on disk and payload of each catalog table and index (needs SQLite's ``dbstat``)."""
        return self.catalog_.table_sizes()

    def checkpoint_wal(self) -> tuple[int, int, int] | None:
        """Fold the catalog's write-ahead log into its file, so file sizes on disk are the index's own."""
        return self.catalog_.checkpoint_wal()

    def stored_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Every stored vector as faiss holds it, and its vector id: the matrix an exact baseline scans."""
        return self.vectors.stored()

    def vector_owners(self, vector_ids: Sequence[int]) -> list[tuple[int, ...]]:
        """Whom each vector ranks (the own-text vector ids of the chunks it keys; else itself), as dense search does."""
        own_vector = self.catalog_.chunk_text_vectors()
        by_vector, _ = self._row_maps()
        return [
            tuple(sorted({own_vector[cid] for _, cid in by_vector.get(int(v), ())})) or (int(v),) for v in vector_ids
        ]

    def rows_of_vectors(self, vector_ids: Sequence[int]) -> list[int]:
        """The catalog rows of the chunks each vector keys, in the order given (a chunk's row may repeat)."""
        by_vector, _ = self._row_maps()
        return [row for vid in vector_ids for row, _ in by_vector.get(vid, ())]

    def chunks_by_rows(self, rows: Sequence[int]) -> dict[int, Chunk]:
        """The chunks at some catalog rows, by row: the one SQLite read a search makes."""
        return self.catalog_.chunks_by_rows(rows)

    # ---- searching ---------------------------------------------------------------
    def _row_maps(self) -> tuple[dict[int, list[tuple[int, str]]], dict[int, str]]:
        """vector id -> [(row, chunk id)] and row -> chunk id per catalog generation: SQLite fetches the final k only."""
        generation = self.catalog_.get_meta("chunks_generation") or ""
        cached = self._maps
        if cached is None or cached[0] != generation:
            by_vector: dict[int, list[tuple[int, str]]] = {}
            by_row: dict[int, str] = {}
            for vector_id, row, chunk_id in self.catalog_.chunk_keys():
                by_vector.setdefault(vector_id, []).append((row, chunk_id))
                by_row[row] = chunk_id
            links = 0
            for rows in by_vector.values():
                rows.sort(key=lambda rc: rc[1])
                links += len(rows)
            keyed = links > len(by_row) or self.catalog_.has_window_keys()
            cached = self._maps = (generation, by_vector, by_row, keyed)
        return cached[1], cached[2]

    def has_keys(self) -> bool:
        """Whether some chunk owns more than one vector (sentence or window keys): a dense search reads deeper."""
        self._row_maps()
        return bool(self._maps and self._maps[3])

    def query_vector(self, query: str) -> np.ndarray:
        """The query's unit vector from the store's own embedder (refused if the store's differs)."""
        self._require_embedder()
        return self._embed_query(query)

    def vectors_for_hits(self, hits: Sequence[SearchHit]) -> dict[str, np.ndarray]:
        """Each hit's stored vector (as the index holds it), by chunk id."""
        if not hits:
            return {}
        marked = {h.chunk_id for h in hits if holds_redaction(h.text)}  # shown redacted: the stored text may differ
        stored = self.catalog_.chunk_text_vectors(marked) if marked else {}
        ids = np.asarray([stored.get(h.chunk_id, vector_id_for(text_digest(h.text))) for h in hits], dtype=np.int64)
        return dict(zip((h.chunk_id for h in hits), self.vectors.reconstruct(ids), strict=True))  # one batched read

    def structure(self) -> StoreStructure:
        """What the catalog knows of every chunk, per catalog generation (one scan when it moves)."""
        generation = self.catalog_.get_meta("chunks_generation") or ""
        cached = self._structure_cache
        if cached is None or cached[0] != generation:
            built = StoreStructure.build(
                self.catalog_.chunk_structure(), self.catalog_.chunk_keys(), self.catalog_.window_key_links()
            )
            cached = self._structure_cache = (generation, built)
        return cached[1]

    def window_norms(self, config: RetrievalConfig) -> np.ndarray:
        """Per chunk, the norm of its context window's summed vector (``lca.retrieval.signals``), per catalog
        generation and window: one bulk read of the stored vectors when either changes."""
        structure = self.structure()
        key = (self.catalog_.get_meta("chunks_generation") or "", config.context_before, config.context_after)
        if self._norms_cache is None or self._norms_cache[0] != key:
            matrix, ids = self.vectors.stored()
            at = np.searchsorted(ids, structure.own_vector, sorter=np.argsort(ids))
            own = matrix[np.argsort(ids)[np.minimum(at, len(ids) - 1)]] if len(ids) else np.zeros((len(structure), 1))
            norms = structure.window_norms(own, config.context_before, config.context_after)
            self._norms_cache = (key, norms)
        return self._norms_cache[1]

    def store_text(self) -> StoreText:
        """The store's texts as this search sees them, for ``TextFacts`` (its per-generation caches)."""
        generation = self.catalog_.get_meta("chunks_generation") or ""
        return StoreText(self.catalog_, self.lexical, self.structure(), generation)

    def lexical_of_terms(self, terms: list[int], structure: StoreStructure) -> np.ndarray:
        """BM25 of every chunk for a query of these term ids, in the structure's row order."""
        return self._in_structure_order(self.lexical.term_scores(terms), structure)

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        pool: int | None = None,
        mode: str = "hybrid",
        query_vector: np.ndarray | None = None,
        as_of: datetime | None = None,
        config: RetrievalConfig | None = None,
    ) -> list[SearchHit]:
        """The top ``k`` chunks. ``hybrid`` ranks through ``lca.retrieval`` under ``config`` (default: the
        store's); ``dense`` and ``lexical`` are the plain baselines. ``as_of`` is the moment the query is
        asked, against which a relative time expression in it is read (absolute dates need none). A hit's
        text is fit to show: no credential (``lca.index.redaction``)."""
        if mode not in ("hybrid", "dense", "lexical"):
            raise ValueError(f"mode must be hybrid, dense or lexical, not {mode!r}")
        self._require_embedder()
        if mode == "hybrid":
            hits = hybrid_search(self, self._embed_query, query, k, pool, query_vector, as_of, config or self.retrieval)
            return shown(self.catalog_, hits)
        pool = pool or max(self.pool, k)
        by_vector, by_row = self._row_maps()
        dense: list[tuple[float, int]] = []
        if mode == "dense" and len(self.vectors):
            qvec = self._embed_query(query) if query_vector is None else query_vector
            # with sentence keys a chunk may own several vectors: search deeper, keep each row's best
            scores, ids = self.vectors.search(qvec, pool * 3 if self.has_keys() else pool)
            seen: set[int] = set()
            for score, vid in zip(scores.tolist(), ids.tolist()):
                for row, _ in by_vector.get(vid, ()):
                    if row not in seen:
                        seen.add(row)
                        dense.append((score, row))
            dense = dense[:pool]
        lexical: list[tuple[float, int]] = []
        if mode == "lexical":
            scores, rows = self.lexical.search(query, pool)
            lexical = sorted(zip(scores.tolist(), rows.tolist()), key=lambda sr: (-sr[0], by_row[sr[1]]))
        ranked = dense or lexical
        ordered = [(row, score) for score, row in sorted(ranked, key=lambda sr: (-sr[0], by_row[sr[1]]))][:k]
        rank_of = {row: i + 1 for i, (_, row) in enumerate(ranked)}
        chunks = self.catalog_.chunks_by_rows([row for row, _ in ordered])
        hits = []
        for row, score in ordered:
            chunk = chunks[row]
            on_dense = mode == "dense"
            hits.append(
                SearchHit(
                    chunk.chunk_id,
                    chunk.text,
                    chunk.pointer,
                    float(score),
                    float(score) if on_dense else None,
                    rank_of[row] if on_dense else None,
                    None if on_dense else float(score),
                    None if on_dense else rank_of[row],
                    chunk.timestamp,
                    chunk.channel,
                )
            )
        return shown(self.catalog_, hits)

    def lexical_scores(self, query: str, structure: StoreStructure) -> np.ndarray:
        """BM25 of every chunk, in the structure's row order."""
        return self._in_structure_order(self.lexical.all_scores(query), structure)

    def _in_structure_order(self, scores: np.ndarray, structure: StoreStructure) -> np.ndarray:
        """Scores of the lexical index's documents (its ``rows_`` order) in the structure's row order."""
        lexical = self.lexical
        if len(lexical.rows_) == len(structure) and np.array_equal(lexical.rows_, structure.rows):
            return scores.astype(np.float64)
        out = np.zeros(len(structure))
        at = np.searchsorted(structure.rows, lexical.rows_)
        ok = (at < len(structure)) & (structure.rows[np.minimum(at, len(structure) - 1)] == lexical.rows_)
        out[at[ok]] = scores[ok]
        return out

    def _embed_query(self, query: str) -> np.ndarray:
        """A query that cannot be embedded fails the search loudly; it is never searched as a zero vector."""
        return unit_query_vector(self.embedder, query)
