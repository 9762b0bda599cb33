"""An embedder wrapper that remembers vectors by content hash, across runs.

Benchmarks re-embed the same haystack sessions for many questions and on every run; a vector
depends only on the embedder and the text, so it is looked up by ``sha256(text)`` in a SQLite
file named after the embedder (one file per ``embedder_id``: vectors of two models never mix).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lca.ports import Embedder


class CachedEmbedder:
    """``Embedder`` with a persistent content-addressed cache in front of ``inner``."""

    def __init__(self, inner: Embedder, cache_dir: Path | str, *, cache_queries: bool = False) -> None:
        self.inner = inner
        # queries too (kept apart from texts: ``embed_query`` may differ from ``embed`` in the last digits). Off by
        # default: a latency measured through this wrapper should include embedding the query
        self.cache_queries = cache_queries
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in inner.embedder_id)
        self.path = Path(cache_dir) / f"embeddings-{safe[:120]}.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (digest BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    # the Embedder protocol, delegated
    @property
    def embedder_id(self) -> str:
        return self.inner.embedder_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def source(self) -> str | None:
        """The registered name or model folder the inner embedder was made from, if it says."""
        return getattr(self.inner, "source", None)

    @property
    def max_input_tokens(self) -> int:
        return self.inner.max_input_tokens

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_offsets(text)

    def embed_query(self, text: str) -> np.ndarray:
        if not self.cache_queries:
            return self.inner.embed_query(text)
        digest = hashlib.sha256(b"query\0" + text.encode("utf-8")).digest()
        with self._lock:
            row = self._db.execute("SELECT vector FROM vectors WHERE digest=?", (digest,)).fetchone()
        if row is not None:
            self.hits += 1
            return np.frombuffer(row[0], dtype=np.float32).copy()
        vector = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?)", (digest, vector.tobytes()))
            self._db.commit()
        self.misses += 1
        return vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        digests = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(digests), 500):
                batch = list(dict.fromkeys(digests[start : start + 500]))
                marks = ",".join("?" * len(batch))
                for digest, blob in self._db.execute(
                    f"SELECT digest, vector FROM vectors WHERE digest IN ({marks})", batch
                ):
                    found[digest] = np.frombuffer(blob, dtype=np.float32)
        missing = list(dict.fromkeys(d for d in digests if d not in found))
        self.hits += len(digests) - sum(1 for d in digests if d not in found)
        if missing:
            first = {d: t for d, t in zip(reversed(digests), reversed(texts))}
            vectors = self.inner.embed([first[d] for d in missing])
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    [(d, v.astype(np.float32).tobytes()) for d, v in zip(missing, vectors)],
                )
                self._db.commit()
            for d, v in zip(missing, vectors):
                found[d] = np.asarray(v, dtype=np.float32)
            self.misses += len(missing)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[d] for d in digests]).astype(np.float32, copy=False)

    def close(self) -> None:
        with self._lock:
            self._db.close()
