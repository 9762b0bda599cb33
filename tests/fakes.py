"""Fakes for unit tests only: deterministic, fast, and named as fakes."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+|[^\w\s]")


class FakeHashingEmbedder:
    """Feature-hashing embedder: one token per word or punctuation mark, a tiny input limit to force splits."""

    def __init__(self, dimension: int = 64, max_input_tokens: int = 40, name: str = "fake-hashing") -> None:
        self._dimension = dimension
        self._max = max_input_tokens
        self.name = name
        self.calls = 0
        self.texts_embedded = 0

    @property
    def embedder_id(self) -> str:
        return f"{self.name}-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        return self._max

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(_WORD.findall(t)) + 2 for t in texts]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0] = 0.05  # a text with no words still has a direction
            for token in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dimension] += 1.0 if (value >> 32) & 1 else -1.0
            out[row] /= np.linalg.norm(out[row])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class FakeFlakyEmbedder(FakeHashingEmbedder):
    """Fails on any text containing a poison word; optionally returns a zero vector instead of raising."""

    def __init__(self, poison: str = "POISON", *, zero_vector: bool = False, **kw) -> None:
        super().__init__(**kw)
        self.poison = poison
        self.zero_vector = zero_vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = super().embed(texts)
        for row, text in enumerate(texts):
            if self.poison in text:
                if not self.zero_vector:
                    raise RuntimeError("fake embedder failure")
                out[row] = 0.0
        return out


class FakeScriptedGenerator:
    """A TextGenerator that answers from a script: ``respond(messages) -> str`` or a list of replies
    consumed in order. Records every call, so tests can check what each stage was (not) shown, the
    JSON schema each call asked for (``schemas``, None where none was given) and its decoding settings
    (``settings``: max_tokens, temperature, seed)."""

    def __init__(self, respond, *, model_id: str = "fake-scripted") -> None:
        self._respond = respond
        self._model_id = model_id
        self.calls: list[list[dict[str, str]]] = []
        self.schemas: list[dict | None] = []
        self.settings: list[dict] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    def generate(
        self, messages, *, max_tokens: int = 256, temperature: float = 0.0, seed=None, json_schema=None
    ) -> str:
        self.calls.append([dict(m) for m in messages])
        self.schemas.append(None if json_schema is None else dict(json_schema))
        self.settings.append({"max_tokens": max_tokens, "temperature": temperature, "seed": seed})
        if callable(self._respond):
            reply = self._respond(messages)
        else:
            reply = self._respond.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


class FakeSchemalessGenerator(FakeScriptedGenerator):
    """A generator written before the ``json_schema`` keyword: it refuses it like any unknown keyword."""

    def generate(self, messages, *, max_tokens: int = 256, temperature: float = 0.0, seed=None) -> str:
        return super().generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
