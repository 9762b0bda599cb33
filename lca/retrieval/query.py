"""The query's unit vector, as every ranking path reads it: a query that cannot be embedded fails loudly, never
ranked as a zero vector."""

from __future__ import annotations

from typing import Any

import numpy as np

from lca.errors import EmbeddingFailedError


def unit_query_vector(embedder: Any, query: str) -> np.ndarray:
    """``embedder``'s query vector of ``query``, normalized; ``EmbeddingFailedError`` when it cannot be embedded or
    embeds to a zero or non-finite vector."""
    try:
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
    except Exception as exc:
        raise EmbeddingFailedError(f"the query could not be embedded: {type(exc).__name__}: {exc}") from exc
    norm = float(np.linalg.norm(vector))
    if not np.all(np.isfinite(vector)) or norm < 1e-6:
        raise EmbeddingFailedError("the query embedded to a zero or non-finite vector")
    return vector / norm
