from __future__ import annotations

import numpy as np

from lca.index.embedding_cache import CachedEmbedder
from tests.fakes import FakeHashingEmbedder


def test_vectors_are_reused_across_instances_and_equal_the_inner_ones(tmp_path):
    inner = FakeHashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    texts = ["alpha beta", "gamma", "alpha beta", "delta epsilon"]
    first = cached.embed(texts)
    assert np.allclose(first, inner.embed(texts)) and cached.misses == 3
    cached.close()
    again = CachedEmbedder(FakeHashingEmbedder(), tmp_path)
    before = again.inner.texts_embedded
    assert np.array_equal(again.embed(texts[::-1]), first[::-1])
    assert again.inner.texts_embedded == before and again.hits == 4 and again.misses == 0
    other = CachedEmbedder(FakeHashingEmbedder(dimension=32), tmp_path)  # another model: another file
    assert other.path != again.path and other.embed(["gamma"]).shape == (1, 32)


def test_query_vectors_are_cached_only_when_asked(tmp_path):
    inner = FakeHashingEmbedder()
    plain = CachedEmbedder(inner, tmp_path)
    plain.embed_query("where is the cat?")
    plain.embed_query("where is the cat?")
    assert inner.calls == 2  # a latency measured through the wrapper includes the query
    plain.close()
    cached = CachedEmbedder(inner, tmp_path, cache_queries=True)
    first = cached.embed_query("where is the cat?")
    again = CachedEmbedder(inner, tmp_path, cache_queries=True).embed_query("where is the cat?")
    assert inner.calls == 3 and np.array_equal(first, again)  # across instances: the second read the file
    assert cached.embed(["where is the cat?"]) is not None and inner.calls == 4  # a text is not a query
