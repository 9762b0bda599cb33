"""The default embedder itself (slow): offline load, real limit, splitting, normalized vectors."""

from __future__ import annotations

import numpy as np
import pytest

from lca.index.chunker import Chunker
from lca.index.embedders import SentenceTransformerEmbedder

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


def test_query_path_equals_the_batch_path_and_never_truncates(real_embedder):
    query = "What was the first issue I had with my new car after its first service?"
    assert np.allclose(real_embedder.embed_query(query), real_embedder.embed([query])[0], atol=1e-6)
    assert real_embedder.query_path == "traced"  # the fast path is the one that was just checked
    for other in ("hi", "a much longer question about the deployment schedule and who approved it " * 4):
        assert np.allclose(real_embedder.embed_query(other), real_embedder.embed([other])[0], atol=1e-6)
    long_query = "tell me about the fencing epoch and the migration plan " * 60
    assert real_embedder.count_tokens([long_query])[0] > real_embedder.max_input_tokens
    vector = real_embedder.embed_query(long_query)
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    assert not np.allclose(vector, real_embedder.embed([long_query])[0], atol=1e-3)  # not the truncated vector


def test_token_counts_are_the_tokenizers_own_unpadded_and_untruncated():
    fresh = SentenceTransformerEmbedder()  # counted before any call of the wrapper could reset the backend's state
    texts = [
        "",
        "hi",
        "Café au lait — 3 € — naïve résumé 東京 🙂",
        "[3] transcript s-12#e4 (2026-03-01)\nNoted, 18 kg.\n",
        "the fencing epoch advances " * 200,  # past the model's 512 positions and the embedder's 256
    ]
    counts = fresh.count_tokens(texts)
    assert counts[0] == 2 and counts[1] < counts[2] < counts[4]  # no padding to the longest, no cut at 128 or 512
    assert counts[4] > 512
    wrapper = fresh._load_tokenizer()
    assert counts == [len(ids) for ids in wrapper(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    assert [fresh.count_tokens([t])[0] for t in texts] == counts  # alone or in a batch, the same
    wrapper(["a text cut and padded"], truncation=True, max_length=4, padding="max_length")  # the wrapper's state
    assert fresh.count_tokens(texts) == counts  # ... never reaches the counter
