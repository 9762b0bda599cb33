"""The index benchmark's exact baseline ranks what dense search ranks, with and without sentence keys."""

from __future__ import annotations

import numpy as np
import pytest

from lca.index.vectors import vector_id_for
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from lca.types import text_digest
from protocols.bench.index.latency import top_owners
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

TURNS = [
    "I want recipe ideas for dinner tonight. By the way, I replaced my kitchen faucet last week.",
    "Which kitchen faucet should I buy for my sink? The old one drips all night long.",
    "Tax forms are due soon. My accountant wants the receipts by Friday morning.",
    "The garden needs water every day. Tomatoes are ripening early this summer.",
    "Tax forms are due soon.",  # one sentence: the same text as another chunk's key
]
QUERIES = ["I replaced my kitchen faucet", "tax receipts for the accountant", "ripe tomatoes in the garden"]


def test_top_owners_counts_each_owner_once_at_its_best_vector():
    scores = np.array([0.9, 0.8, 0.7, 0.1])
    owners = [(5,), (5,), (6, 7), (8,)]
    assert top_owners(scores, owners, 2) == [5, 6]
    assert top_owners(scores, owners, 3) == [5, 6, 7]
    assert top_owners(scores, owners, 10) == [5, 6, 7, 8]  # fewer owners than k: all of them


@pytest.mark.parametrize("keyed", [False, True])
def test_exact_baseline_ranks_chunks_as_dense_search_does(tmp_path, keyed):
    with Substrate(
        tmp_path,
        embedder=FakeHashingEmbedder(dimension=512, max_input_tokens=200),
        retrieval=RetrievalConfig(sentence_keys=keyed),
    ) as s:
        s.append([make_entry("s", i + 1, text) for i, text in enumerate(TURNS)])
        index = s.index
        matrix, row_ids = index.stored_vectors()
        owners = index.vector_owners(row_ids)
        assert (len(row_ids) > len(TURNS)) == keyed
        plain_differs = False
        for query in QUERIES:
            qvec = index.query_vector(query)
            searched = [vector_id_for(text_digest(h.text)) for h in s.search(query, k=3, mode="dense")]
            assert top_owners(matrix @ qvec, owners, 3) == searched
            plain = row_ids[np.argsort(-(matrix @ qvec), kind="stable")[:3]].tolist()
            plain_differs |= plain != searched
        assert plain_differs == keyed  # ranking raw vectors is only right for a store without keys
