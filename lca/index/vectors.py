"""Dense vectors in faiss: an exhaustive inner-product scan of unit vectors (cosine) while the
store is small, HNSW past a size threshold. Vectors are stored as float16 (faiss scalar
quantizer): half the bytes and half the memory traffic of float32, and on the
LongMemEval_S reference store the same top-50 as an exact float32 scan
(`lca bench index`). Ids are 63-bit integers derived from the text hash, so one text
has one vector however many chunks share it.

A single-query search runs on one OpenMP thread: on these machines faiss's thread
pool costs more than a 40,000-vector scan (measured 24 ms with 2 threads, 2.5 ms with 1)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import faiss
import numpy as np

from lca.errors import DerivedStoreDamagedError
from lca.fileio import atomic_write_bytes


def vector_id_for(text_hash: str) -> int:
    return int(text_hash[:16], 16) & 0x7FFF_FFFF_FFFF_FFFF


def interrupted_saves(path: Path) -> list[Path]:
    """Temporary siblings ``.<name>.tmp-<pid>`` that ``atomic_write_bytes`` left for ``path`` when its
    process was killed before the rename; a live process's file (a save in progress) is not one."""
    prefix = f".{path.name}.tmp-"
    if not path.parent.is_dir():
        return []
    out = []
    for candidate in path.parent.iterdir():
        pid_text = candidate.name[len(prefix) :] if candidate.name.startswith(prefix) else ""
        if pid_text.isdigit() and not _alive(int(pid_text)):
            out.append(candidate)
    return sorted(out)


def _first_line(exc: Exception) -> str:
    """faiss's message without its C++ location (``Error in <function> at <file>:<line>: ``)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", line)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


class FaissVectorIndex:
    """An id-mapped faiss index persisted as one file."""

    def __init__(
        self,
        dimension: int,
        *,
        approximate_threshold: int = 200_000,
        hnsw_m: int = 32,
        ef_search: int = 128,
        search_threads: int = 1,
    ) -> None:
        self.dimension = dimension
        self.approximate_threshold = approximate_threshold
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.search_threads = search_threads
        self.index_ = self._new_index(approximate=False)

    def _new_index(self, *, approximate: bool):
        fp16 = faiss.ScalarQuantizer.QT_fp16
        inner: faiss.Index
        if approximate:
            # the C++ constructor takes the quantizer type (QT_fp16); faiss's stub names it ScalarQuantizer
            hnsw = faiss.IndexHNSWSQ(self.dimension, fp16, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)  # type: ignore[arg-type]
            hnsw.hnsw.efSearch = self.ef_search
            inner = hnsw
        else:
            inner = faiss.IndexScalarQuantizer(self.dimension, fp16, faiss.METRIC_INNER_PRODUCT)
        if not inner.is_trained:  # float16 needs no statistics; training on nothing marks it ready
            inner.train(np.zeros((1, self.dimension), dtype=np.float32))
        return faiss.IndexIDMap2(inner)

    @property
    def approximate(self) -> bool:
        return isinstance(faiss.downcast_index(self.index_.index), faiss.IndexHNSW)

    def __len__(self) -> int:
        return int(self.index_.ntotal)

    def ids(self) -> np.ndarray:
        return faiss.vector_to_array(self.index_.id_map).astype(np.int64)

    def stored(self) -> tuple[np.ndarray, np.ndarray]:
        """Every vector as the index holds it (float16 values, as float32) and its id, in storage order:
        the matrix an exact baseline scans. One bulk read, not one lookup per id."""
        inner = faiss.downcast_index(self.index_.index)
        matrix = np.ascontiguousarray(inner.reconstruct_n(0, inner.ntotal), dtype=np.float32)
        return matrix, self.ids()

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(ids) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape[1] != self.dimension:
            raise ValueError(f"vectors have dimension {vectors.shape[1]}, index has {self.dimension}")
        if not self.approximate and len(self) + len(ids) >= self.approximate_threshold:
            self._rebuild(approximate=True, extra=(ids, vectors))
            return
        self.index_.add_with_ids(vectors, np.asarray(ids, dtype=np.int64))

    def remove(self, ids: np.ndarray) -> None:
        if len(ids) == 0:
            return
        if self.approximate:  # HNSW cannot delete: rebuild without them
            keep = np.setdiff1d(self.ids(), np.asarray(ids, dtype=np.int64))
            vectors = self.reconstruct(keep)
            self.index_ = self._new_index(approximate=len(keep) >= self.approximate_threshold)
            self.index_.add_with_ids(vectors, keep)
        else:
            self.index_.remove_ids(np.asarray(ids, dtype=np.int64))

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``, in order (one batched call: a feedback round asks for a hundred)."""
        if len(ids) == 0:
            return np.empty((0, self.dimension), dtype=np.float32)
        ids = np.asarray(ids, dtype=np.int64)
        try:
            return np.asarray(self.index_.reconstruct_batch(ids), dtype=np.float32)
        except RuntimeError:  # an id faiss does not hold: a vector a writer has not saved yet reads as zeros
            out = np.zeros((len(ids), self.dimension), dtype=np.float32)
            held = np.isin(ids, self.ids())
            if held.any():
                out[held] = self.index_.reconstruct_batch(ids[held])
            return out

    def _rebuild(self, *, approximate: bool, extra: tuple[np.ndarray, np.ndarray]) -> None:
        old_ids = self.ids()
        old = self.reconstruct(old_ids) if len(old_ids) else np.empty((0, self.dimension), np.float32)
        self.index_ = self._new_index(approximate=approximate)
        ids = np.concatenate([old_ids, np.asarray(extra[0], dtype=np.int64)])
        self.index_.add_with_ids(np.vstack([old, extra[1]]), ids)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) for one query vector; fewer when the index is smaller."""
        if len(self) == 0 or k <= 0:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        previous = faiss.omp_get_max_threads()
        if self.search_threads:
            faiss.omp_set_num_threads(self.search_threads)
        try:
            scores, ids = self.index_.search(
                np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), min(k, len(self))
            )
        finally:
            faiss.omp_set_num_threads(previous)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    def save(self, path: Path) -> None:
        atomic_write_bytes(path, faiss.serialize_index(self.index_).tobytes())

    @classmethod
    def load(cls, path: Path, dimension: int, **params) -> FaissVectorIndex:
        """The saved index; a file faiss cannot read, or one of another shape, is a damaged derived store."""
        obj = cls(dimension, **params)
        data = np.fromfile(path, dtype=np.uint8)
        try:
            if not len(data):
                raise ValueError("the file is empty")
            obj.index_ = faiss.deserialize_index(data)
            if not isinstance(obj.index_, faiss.IndexIDMap2):
                raise ValueError(f"not an id-mapped index ({type(obj.index_).__name__})")
        except (RuntimeError, ValueError) as exc:  # faiss reports a bad file as RuntimeError
            raise DerivedStoreDamagedError(path, _first_line(exc)) from exc
        if obj.index_.d != dimension:
            raise ValueError(f"{path}: vectors of dimension {obj.index_.d}, expected {dimension}")
        inner = faiss.downcast_index(obj.index_.index)
        if isinstance(inner, faiss.IndexHNSW):  # obj.approximate
            inner.hnsw.efSearch = obj.ef_search
        return obj
