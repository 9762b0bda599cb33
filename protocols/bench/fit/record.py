"""A fit's held-out comparison with the defaults and the file it writes: a ``RetrievalConfig`` YAML whose header
(comments: the config reads only its fields) holds the provenance, namely data sha256, folds, seeds, the fit's
settings, the held-out scores with their intervals, the code revision and the command."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from lca.fileio import atomic_write_bytes
from protocols.analysis.result import bootstrap_ci

BOOTSTRAP_SEED = 0
RESAMPLES = 2000


@dataclass(frozen=True)
class HeldOut:
    """Fitted against defaults on the same held-out questions: means, 95% bootstrap intervals (questions
    resampled) and the paired gain; ``folds`` one line each (its groups, questions, both means)."""

    metric: str
    n: int
    fitted: float
    defaults: float
    gain: float
    fitted_interval: tuple[float, float]
    defaults_interval: tuple[float, float]
    gain_interval: tuple[float, float]
    folds: tuple[dict[str, Any], ...]

    @property
    def beats_defaults(self) -> bool:
        """The gain is above 0 and so is its interval's lower end: a gain the held-out folds show, not noise."""
        return self.gain > 0 and self.gain_interval[0] > 0

    def verdict(self) -> str:
        figures = (
            f"held-out {self.metric} over {self.n} questions: fitted {self.fitted:.4f} "
            f"[{self.fitted_interval[0]:.4f}, {self.fitted_interval[1]:.4f}], defaults {self.defaults:.4f} "
            f"[{self.defaults_interval[0]:.4f}, {self.defaults_interval[1]:.4f}], gain {self.gain:+.4f} "
            f"[{self.gain_interval[0]:+.4f}, {self.gain_interval[1]:+.4f}]"
        )
        if self.beats_defaults:
            return figures
        why = "is not above 0" if self.gain <= 0 else "has an interval reaching 0"
        return f"{figures}; the fitted weights do not beat the defaults (the gain {why}): nothing written"


def compare(
    metric: str,
    value,
    defaults: Mapping[str, Mapping[str, Any]],
    fitted: Mapping[str, Mapping[str, Any]],
    fold_of_question: Mapping[str, int],
    folds: Sequence[tuple[Sequence[str], Sequence[str]]],
    weights: Sequence[Mapping[str, float]],
) -> HeldOut:
    """The held-out comparison over the questions both rankings scored (``value`` of a row; None: unscored)."""
    paired = []
    for qid, row in defaults.items():
        if qid in fitted and (d := value(row)) is not None and (f := value(fitted[qid])) is not None:
            paired.append((qid, f, d))
    if len(paired) < 2:
        raise ValueError(f"{len(paired)} held-out questions scored: too few to compare")
    f_all = np.array([f for _, f, _ in paired])
    d_all = np.array([d for _, _, d in paired])
    per_fold = []
    for i, (_, held) in enumerate(folds):
        chosen = [j for j, (qid, _, _) in enumerate(paired) if fold_of_question.get(qid) == i]
        per_fold.append(
            {
                "held_out": list(held),
                "questions": len(chosen),
                "fitted": round(float(f_all[chosen].mean()), 4) if chosen else None,
                "defaults": round(float(d_all[chosen].mean()), 4) if chosen else None,
                "weights": dict(weights[i]),
            }
        )

    def ci(values: np.ndarray) -> tuple[float, float]:
        low, high = bootstrap_ci(values, resamples=RESAMPLES, seed=BOOTSTRAP_SEED)
        return round(low, 4), round(high, 4)

    return HeldOut(
        metric=metric,
        n=len(paired),
        fitted=round(float(f_all.mean()), 4),
        defaults=round(float(d_all.mean()), 4),
        gain=round(float((f_all - d_all).mean()), 4),
        fitted_interval=ci(f_all),
        defaults_interval=ci(d_all),
        gain_interval=ci(f_all - d_all),
        folds=tuple(per_fold),
    )


def provenance_header(provenance: Mapping[str, Any]) -> str:
    """The provenance as YAML comment lines."""
    text = yaml.safe_dump(dict(provenance), sort_keys=False, width=110, allow_unicode=True)
    return "".join(f"# {line}\n" if line else "#\n" for line in text.splitlines())


def write_config(
    path: Path, config: Mapping[str, Any], provenance: Mapping[str, Any], *, kind: str = "retrieval"
) -> None:
    """The fitted file (a RetrievalConfig, every field, or recall's ``weights:``) under its provenance header
    (atomically: a reader sees the old file or the new one)."""
    body = yaml.safe_dump(dict(config), sort_keys=False)
    what = "A RetrievalConfig" if kind == "retrieval" else "Resonance weights"
    text = f"# {what} fitted by `lca fit {kind}` (protocols/bench/fit).\n" + provenance_header(provenance)
    atomic_write_bytes(path, (text + body).encode("utf-8"))


def held_out_mapping(held: HeldOut) -> dict[str, Any]:
    out = asdict(held)
    for key in ("fitted_interval", "defaults_interval", "gain_interval"):
        out[key] = list(out[key])
    out["folds"] = list(out["folds"])
    return out
