"""``lca fit recall``: recall's resonance weights fitted like the retrieval weights (``retrieval.Kind``), on the
candidates recall ranks (``HaystackStore.recall_parts``: each term's signed part of R, as the score adds it) and
scored by the bench's ``resonance`` retriever. The weights fitted are the terms the starting weights have on
(similarity the scale), each within its ``RESONANCE_TERMS`` bound; the file is ``weights: {TERM: value}``, the
format of a task's ``recall-weights.yaml``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from lca.errors import RecordFormatError
from protocols.bench.fit.retrieval import Kind, Ranked
from protocols.bench.retrieval.config import AskedConfig, recall_base
from protocols.bench.retrieval.stores import HaystackStore


def recall_weights_file(path: str | Path) -> dict[str, float]:
    """A ``weights: {TERM: value}`` YAML file as ``weights.TERM`` assignments, each checked as recall checks it."""
    from lca.recall.config import ResonanceWeights

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or set(data) - {"weights"} or not isinstance(data.get("weights", {}), dict):
        raise RecordFormatError("expected only a 'weights' mapping of resonance terms", path=str(path))
    ResonanceWeights.from_mapping(data.get("weights") or {}, source=str(path))
    return {f"weights.{term}": float(value) for term, value in (data.get("weights") or {}).items()}


class RecallKind(Kind):
    name = "recall"
    retriever = "resonance"
    anchor = "similarity"

    def __init__(self, start: AskedConfig) -> None:
        from lca.recall.resonance import RESONANCE_TERMS

        self.start = start
        self.weights = start.recall_config(recall_base()).weights
        self.terms = RESONANCE_TERMS
        self.names = [t.name for t in RESONANCE_TERMS if getattr(self.weights, t.name)]

    @property
    def defaults(self) -> dict[str, float]:
        return {name: float(getattr(self.weights, name)) for name in self.names}

    def upper(self) -> dict[str, float]:
        return {t.name: t.weight_bound[1] for t in self.terms if math.isfinite(t.weight_bound[1])}

    def asked(self, weights: Mapping[str, float]) -> AskedConfig:
        return AskedConfig(
            self.start.retrieval, {**self.start.recall, **{f"weights.{n}": v for n, v in weights.items()}}
        )

    def rank(self, store: HaystackStore, text: str, as_of) -> Ranked:
        return store.recall_parts(text, as_of=as_of, asked=self.start)

    def written(self, weights: Mapping[str, float]) -> dict[str, Any]:
        """The file's body: every resonance weight."""
        fitted = self.weights.with_overrides(dict(weights))
        return {"weights": {t.name: getattr(fitted, t.name) for t in self.terms}}
