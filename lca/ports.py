"""The only seams between the substrate and models: plain typing.Protocols."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors.

    ``embedder_id`` names the exact model; a store records it with every vector so
    vectors from two models are never mixed. ``max_input_tokens`` is the real limit
    the model reads (special tokens included); the chunker splits to it.
    """

    @property
    def embedder_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text occupies, special tokens included."""

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every content token of ``text`` (special tokens excluded)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimension), float32, rows of unit norm: the texts a store keeps (passages)."""

    def embed_query(self, text: str) -> np.ndarray:
        """One question on the latency path (search, recall). For a symmetric model equal to ``embed([text])[0]``
        within 1e-6; a model trained with query and passage prefixes (e5) embeds it as a query instead."""


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


@runtime_checkable
class TextGenerator(Protocol):
    """A model that continues a conversation; implementations live outside the substrate.

    ``json_schema``, when given, asks for an answer that is one JSON value valid under it (constrained
    decoding where the runtime has it, a provider's structured output otherwise): small models follow a
    grammar where they ignore a described format. Callers still parse and check the answer.
    """

    @property
    def model_id(self) -> str: ...

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> str: ...


@runtime_checkable
class StructuralSigner(Protocol):
    """Turns a record's text into its structural signature, as a raw answer the substrate validates.

    The answer is one JSON object meant to be valid under ``lca.insight.signatures.SIGNATURE_JSON_SCHEMA``;
    the caller never trusts it (``lca.insight.signatures.validate_signature``). ``model_id`` and
    ``prompt_version`` are the provenance a stored signature carries: the same record, model and prompt version
    give the same signature from a deterministic signer, so a rebuild reproduces the stored ones. The default
    signer is the summarizer role (``lca.insight.distill.SummarizerSigner``); a corpus that knows its records'
    structure can sign them itself behind this same port.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def prompt_version(self) -> str: ...

    def sign(self, text: str) -> str:
        """The raw answer for one record's text."""
