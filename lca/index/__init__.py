"""Layer 3 storage: chunker, embedders, faiss vectors, bm25s lexical index, SQLite catalog."""
