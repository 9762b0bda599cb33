"""The dual-space differential: how alike two records are in structure, discounted by how alike they are in words.

Two records rhyme when their signatures are close and their texts are not. How the two cosines compose is a
declared table, ``DIFFERENTIAL_COMPOSITIONS``, one row per named composition, so an ablation is a name: the
content-only row is the detector the Living Memory paper argues against (it finds topical neighbours), the
structure-only row drops the discount. ``DifferentialConfig`` names the composition and its one weight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lca.errors import RecordFormatError

Composer = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


@dataclass(frozen=True)
class Composition:
    """One way to compose the structural and the content cosine of a pair into its differential."""

    name: str
    formula: str
    compose: Composer  # (structural cosines, content cosines, content weight) -> scores
    description: str


def _discounted(structural: np.ndarray, content: np.ndarray, weight: float) -> np.ndarray:
    return structural - weight * content


def _product(structural: np.ndarray, content: np.ndarray, weight: float) -> np.ndarray:
    return np.clip(structural, 0.0, 1.0) * (1.0 - weight * np.clip(content, 0.0, 1.0))


def _structural_only(structural: np.ndarray, content: np.ndarray, weight: float) -> np.ndarray:
    return structural.copy()


def _content_only(structural: np.ndarray, content: np.ndarray, weight: float) -> np.ndarray:
    return content.copy()


DIFFERENTIAL_COMPOSITIONS: tuple[Composition, ...] = (
    Composition(
        "discounted",
        "structural - w * content",
        _discounted,
        "the default: structural similarity minus the weighted content similarity; a topical neighbour (same words, "
        "other skeleton) scores near or below 0",
    ),
    Composition(
        "product",
        "structural * (1 - w * content)",
        _product,
        "both cosines clipped to [0, 1]; a pair alike in words keeps only the share of its structure the words leave",
    ),
    Composition(
        "structural-only",
        "structural",
        _structural_only,
        "ablation: no content discount (the second space alone)",
    ),
    Composition(
        "content-only",
        "content",
        _content_only,
        "the baseline detector the paper argues against: content similarity alone, for comparison on one corpus",
    ),
)
COMPOSITIONS = tuple(c.name for c in DIFFERENTIAL_COMPOSITIONS)


def composition(name: str) -> Composition:
    for row in DIFFERENTIAL_COMPOSITIONS:
        if row.name == name:
            return row
    raise RecordFormatError(f"unknown differential composition {name!r}; one of: {', '.join(COMPOSITIONS)}")


@dataclass(frozen=True)
class DifferentialConfig:
    """Which composition scores a pair, and the weight of the content cosine in it (0 <= w <= 2)."""

    composition: str = "discounted"
    content_weight: float = 1.0

    def __post_init__(self) -> None:
        composition(self.composition)  # refuses an unknown name, listing the known ones
        w = self.content_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or not 0.0 <= w <= 2.0:
            raise RecordFormatError(f"must be a finite number in [0, 2], got {w!r}", field="content_weight")

    def score(self, structural: np.ndarray, content: np.ndarray) -> np.ndarray:
        """The differential of each pair, from its two cosines (arrays of one shape)."""
        s, c = np.asarray(structural, dtype=np.float64), np.asarray(content, dtype=np.float64)
        if s.shape != c.shape:
            raise ValueError(f"structural and content cosines differ in shape: {s.shape} vs {c.shape}")
        return composition(self.composition).compose(s, c, float(self.content_weight))

    def ablations(self) -> dict[str, DifferentialConfig]:
        """This config under every other composition, by name (the weight kept)."""
        return {
            name: DifferentialConfig(name, self.content_weight) for name in COMPOSITIONS if name != self.composition
        }
