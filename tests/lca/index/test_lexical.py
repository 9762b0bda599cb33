"""Lexical BM25 over chunk rows: stemmed and stopword-free, stable order, stale generations noticed after a reload."""

from __future__ import annotations

from lca.index.lexical import Bm25LexicalIndex

TEXTS = [
    "the deploy key rotates every Friday",
    "Ana adopted a grey cat from the shelter",
    "the cats sleep all day",
    "quarterly tax filing is due",
]


def built(generation: str = "g1") -> Bm25LexicalIndex:
    index = Bm25LexicalIndex()
    index.build([101, 102, 103, 104], TEXTS, generation)
    return index


def test_search_returns_catalog_rows_of_matching_documents_only():
    index = built()
    scores, rows = index.search("cat", k=10)
    assert sorted(rows.tolist()) == [102, 103]  # "cats" is stemmed to "cat"
    assert all(scores > 0) and list(scores) == sorted(scores, reverse=True)
    assert index.search("the and of", k=5)[1].size == 0  # stopwords only
    assert index.search("zeppelin", k=5)[1].size == 0  # a word no document holds
    assert index.search("cat", k=0)[1].size == 0


def test_an_empty_index_finds_nothing():
    index = Bm25LexicalIndex()
    index.build([], [], "g0")
    assert len(index) == 0 and index.search("cat", k=5)[1].size == 0


def test_save_and_load_keep_rows_generation_and_results(tmp_path):
    index = built("generation-7")
    index.save(tmp_path / "lexical")
    loaded = Bm25LexicalIndex.load(tmp_path / "lexical")
    assert loaded.generation_ == "generation-7" and len(loaded) == 4
    for query in ("grey cat shelter", "deploy key", "tax"):
        original, again = index.search(query, k=4), loaded.search(query, k=4)
        assert again[1].tolist() == original[1].tolist() and again[0].tolist() == original[0].tolist()
    rebuilt = Bm25LexicalIndex()
    rebuilt.build([5], ["a new corpus"], "generation-8")
    rebuilt.save(tmp_path / "lexical")  # replaces the folder whole
    assert Bm25LexicalIndex.load(tmp_path / "lexical").generation_ == "generation-8"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lexical"]  # no .tmp or .old left behind


def test_term_postings_rebuild_the_indexs_own_bm25_and_a_window_of_one_is_the_chunk_itself():
    import numpy as np

    from lca.retrieval.signals import window_bm25

    index = built()
    postings = index.term_postings(TEXTS)
    assert postings.lengths.tolist() == [5.0, 6.0, 4.0, 4.0]  # stopwords out ("the", "is", ...)
    alone = np.zeros(len(TEXTS), dtype=np.int64)
    for query in ("cat", "grey cat cat", "tax shelter cats", "zeppelin"):
        terms = index.query_terms(query)
        scores = window_bm25(
            postings.term_frequencies(terms), postings.lengths, np.arange(4), alone, 0, 0, k1=index.k1, b=index.b
        )
        assert np.allclose(scores, index.all_scores(query), rtol=1e-5)
    assert index.query_terms("zeppelin") == [] and index.query_terms("cat cat") == index.query_terms("cat") * 2
    # a text with a word the index never saw: the word is left out, as a query's would be
    assert index.term_postings(["zeppelin cat"]).lengths.tolist() == [1.0]


def test_loads_take_turns_because_numpy_reads_headers_with_ast(tmp_path):
    """CPython 3.11's ast is not safe across threads, and numpy parses every .npy header with it: two stores
    loaded at once could fail one load as a damaged store. A load waits for the one before it."""
    import threading

    from lca.index.lexical import NPY_READS

    built().save(tmp_path / "lexical")
    loaded: list[Bm25LexicalIndex] = []
    reader = threading.Thread(target=lambda: loaded.append(Bm25LexicalIndex.load(tmp_path / "lexical")))
    with NPY_READS:  # another load is reading
        reader.start()
        reader.join(timeout=0.5)
        assert reader.is_alive() and not loaded  # it waits
    reader.join(timeout=30)
    assert len(loaded) == 1 and len(loaded[0]) == 4
    readers = [
        threading.Thread(target=lambda: loaded.append(Bm25LexicalIndex.load(tmp_path / "lexical"))) for _ in range(8)
    ]
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join(timeout=60)
    assert len(loaded) == 9
    assert all(sorted(index.search("cat", k=4)[1].tolist()) == [102, 103] for index in loaded)
