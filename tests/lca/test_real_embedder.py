"""The default embedder itself (slow): offline load, real limit, splitting, normalized vectors."""

from __future__ import annotations

import numpy as np
import pytest

from lca.index.chunker import Chunker

pytestmark = pytest.mark.slow


def test_default_embedder_is_offline_normalized_and_identified(real_embedder):
    vectors = real_embedder.embed(["a cat sat on the mat", "a kitten rested on the rug", "quarterly tax filing"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert real_embedder.max_input_tokens == 256
    assert real_embedder.embedder_id.startswith("sentence-transformers/all-MiniLM-L6-v2@")


def test_long_text_is_split_to_the_real_limit_without_loss(real_embedder):
    sentence = "The migration plan moves the catalog to the new host after the fencing epoch advances. "
    text = sentence * 60 + "antidisestablishmentarianism" * 40
    pieces = Chunker(real_embedder).split(text, prefix="Caroline: ")
    assert len(pieces) >= 4
    assert "".join(p.text for p in pieces) == text
    counts = real_embedder.count_tokens(["Caroline: " + p.text for p in pieces])
    assert max(counts) <= real_embedder.max_input_tokens
    assert pieces[0].text.endswith(". ")
