"""Dense vectors in faiss: ids from text hashes, persisted in one file, exact while small, HNSW past a threshold."""

from __future__ import annotations

import numpy as np
import pytest

from lca.index.vectors import FaissVectorIndex, vector_id_for
from lca.substrate import Substrate
from lca.types import text_digest
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def unit_rows(n: int, dimension: int = 8, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_vector_ids_are_stable_non_negative_63_bit_integers():
    digest = text_digest("the deploy key rotates every Friday")
    vid = vector_id_for(digest)
    assert vid == vector_id_for(digest) and 0 <= vid < 2**63
    assert vector_id_for("f" * 64) == 2**63 - 1  # the sign bit is masked off


def test_search_returns_the_nearest_and_a_saved_index_loads_the_same(tmp_path):
    vectors = unit_rows(5)
    index = FaissVectorIndex(8)
    index.add(np.arange(10, 15), vectors)
    scores, ids = index.search(vectors[3], k=2)
    assert ids[0] == 13 and scores[0] == pytest.approx(1.0, abs=1e-3) and len(ids) == 2
    assert len(index.search(vectors[0], k=50)[1]) == 5  # fewer when the index is smaller
    index.remove(np.asarray([13]))
    assert 13 not in index.search(vectors[3], k=5)[1] and len(index) == 4
    index.save(tmp_path / "vectors.faiss")
    loaded = FaissVectorIndex.load(tmp_path / "vectors.faiss", 8)
    assert sorted(loaded.ids()) == [10, 11, 12, 14]
    assert np.allclose(loaded.reconstruct(np.asarray([11])), vectors[1], atol=1e-3)  # stored as float16
    with pytest.raises(ValueError, match="dimension 8, expected 16"):
        FaissVectorIndex.load(tmp_path / "vectors.faiss", 16)
    with pytest.raises(ValueError, match="dimension 4, index has 8"):
        index.add(np.asarray([1]), unit_rows(1, dimension=4))


def test_approximate_index_past_the_threshold_still_finds_exact_matches(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), approximate_threshold=10) as s:
        s.append([make_entry("s", n, f"note number {n} about topic{n}") for n in range(1, 31)])
        assert s.index.vectors.approximate
        assert s.search("topic17", k=1, mode="dense")[0].pointer.entry_id == "s:17"
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), approximate_threshold=10) as s:
        assert s.index.vectors.approximate and len(s.index.vectors) == 30
