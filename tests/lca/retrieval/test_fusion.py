"""The named fusion functions: rrf reads ranks, z standardizes, blend min-max normalizes."""

from __future__ import annotations

import numpy as np
import pytest

from lca.retrieval import FUSIONS, blend, fuse, rrf, zscore
from lca.retrieval.fusion import ranks_of, standardize

NAN = float("nan")


def test_rrf_sums_reciprocal_ranks_of_the_sides_that_retrieved_a_candidate():
    dense = np.array([0.9, 0.5, NAN])
    lexical = np.array([NAN, 3.0, 1.0])
    fused = rrf(dense, lexical, rrf_k=60)
    assert fused == pytest.approx([1 / 61, 1 / 62 + 1 / 61, 1 / 62])
    assert list(ranks_of(np.array([0.2, NAN, 0.2, 0.9]))) == [2, 0, 3, 1]  # ties by position, nan unranked


def test_rrf_ignores_score_magnitudes_where_z_does_not():
    dense = np.array([0.90, 0.89, 0.10])
    lexical = np.array([NAN, 10.0, NAN])
    assert np.argmax(rrf(dense, lexical)) == 1  # found by both sides
    # z: the second's lexical lead is large in spread units, the first's dense lead tiny
    lexical = np.array([0.0, 10.0, 0.0])  # z reads every candidate's BM25 score, 0 where no term occurs
    assert np.argmax(zscore(dense, lexical)) == 1
    assert np.argmax(zscore(dense, lexical, bm25_weight=0.0)) == 0


def test_z_statistics_come_from_the_population_given():
    scores = np.array([1.0, 2.0, 3.0])
    assert standardize(scores) == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-4)
    wide = standardize(scores, population=np.array([0.0, 2.0, 4.0, 2.0]))
    assert wide == pytest.approx((scores - 2.0) / np.sqrt(2.0))
    assert standardize(np.array([5.0, 5.0])) == pytest.approx([0.0, 0.0])  # no spread: no division by zero
    assert standardize(np.array([1.0, NAN, 3.0]))[1] == pytest.approx(-1.0)  # absent scores rank lowest


def test_blend_mixes_min_max_normalized_scores():
    fused = blend(np.array([0.2, 0.4, NAN]), np.array([NAN, 1.0, 3.0]), dense_weight=1.0, bm25_weight=0.5)
    assert fused == pytest.approx([0.0, 1.0 + 0.0, 0.5])


def test_fuse_names_every_function_and_refuses_others():
    assert set(FUSIONS) == {"rrf", "z", "blend"}
    assert fuse("z", [1.0, 2.0], [0.0, 0.0]) == pytest.approx(zscore(np.array([1.0, 2.0]), np.array([0.0, 0.0])))
    with pytest.raises(ValueError, match="unknown fusion 'max'"):
        fuse("max", [1.0], [1.0])
