"""Living-memory dynamics: base-level activation with diversity weighting, and UCB wildcards.

Base-level activation follows ACT-R: ``B = ln(sum_j w_j * t_j^-d)`` over a record's whole
access history, with power-law decay (``d`` = 0.5) and logarithmic saturation built in.
The weight ``w_j`` is the query-diversity correction: each access counts ``1 / n`` where
``n`` is how often the record was reached by queries of the same shape, so fifty
differently-shaped queries earn more than one query asked fifty times. The shape of a
query is a 16-bit random-hyperplane hash of its vector.

Wildcards reserve a mode-dependent share of the injected items for relevant but dormant
records, chosen by an upper-confidence bonus that shrinks as a record is examined;
precision mode runs at zero temperature (no wildcards). Wildcards are always labeled.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lca.fileio import append_bytes
from lca.layout import StoreLayout

DECAY = 0.5
# an activation term below this is a dormant record: recall's wildcards offer such records, the integration cycle's
# probes pair them with the most active ones
DORMANT_BELOW = 0.5
WILDCARD_MODES = {"precision": (0.0, 0.0), "balanced": (0.2, 0.3), "explore": (0.4, 1.0)}  # share, temperature


def query_shape(vector: np.ndarray, *, bits: int = 16, seed: int = 7) -> int:
    """A coarse, stable signature of a query: which side of ``bits`` fixed random hyperplanes it lies on."""
    planes = np.random.default_rng(seed).standard_normal((bits, vector.shape[0])).astype(np.float32)
    signs = (planes @ vector) > 0
    return int(sum(1 << i for i, s in enumerate(signs) if s))


@dataclass(frozen=True)
class Access:
    target: str
    at: float
    shape: int
    wildcard: bool = False


def base_level_activation(
    accesses: Sequence[Access], now: float, *, decay: float = DECAY, diversity: bool = True, min_age_s: float = 1.0
) -> float:
    """ACT-R base level, ln of decayed, diversity-weighted accesses; -inf for a record never accessed."""
    if not accesses:
        return float("-inf")
    per_shape = Counter(a.shape for a in accesses)
    total = 0.0
    for a in accesses:
        weight = 1.0 / per_shape[a.shape] if diversity else 1.0
        total += weight * max(min_age_s, now - a.at) ** (-decay)
    return math.log(total)


def activation_term(activation: float, *, center: float = -6.0, scale: float = 1.5) -> float:
    """Map a base level to [0, 1] with a logistic; a never-accessed record scores 0."""
    if activation == float("-inf"):
        return 0.0
    return 1.0 / (1.0 + math.exp(-(activation - center) / scale))


def memory_activations(
    history: Mapping[str, Sequence[Access]], memory_ids: Iterable[str], now: float
) -> dict[str, float]:
    """Each memory's activation term, from the accesses to any of its chunks (``RetrievalLog.by_target`` keys a
    chunk ``memory:<id>[start:end]``): recall reaches a record through its parts, so the record is as active as
    all of them together. A memory never recalled scores 0."""
    wanted = set(memory_ids)
    pooled: dict[str, list[Access]] = {m: [] for m in wanted}
    for target, accesses in history.items():
        if target.startswith("memory:"):
            memory_id = target[len("memory:") :].split("[", 1)[0]
            if memory_id in wanted:
                pooled[memory_id].extend(accesses)
    return {m: activation_term(base_level_activation(pooled[m], now)) for m in sorted(wanted)}


def ucb_bonus(examined: int, total_examinations: int, temperature: float) -> float:
    """Upper-confidence exploration bonus: large for rarely examined records, decays as they are examined."""
    if temperature <= 0:
        return 0.0
    return temperature * math.sqrt(math.log(total_examinations + 2) / (examined + 1))


class RetrievalLog:
    """Append-only log of which records recall injected, when, for which query shape.

    Written on the recall path, so appends are not fsync'd: a crash may lose the last few
    access events (derived learning signal), never transcript history. Reads are
    incremental: only bytes appended since the last read are parsed.
    """

    def __init__(self, root: Path | str, *, record: bool = True) -> None:
        self.path = StoreLayout(root).retrieval_log
        self.recording = record  # False: a store this process may not write is read, and its use not logged
        self._offset = 0
        self._by_target: dict[str, list[Access]] = defaultdict(list)

    def record(self, accesses: Iterable[Access]) -> None:
        lines = "".join(json.dumps(a.__dict__, sort_keys=True) + "\n" for a in accesses)
        if not lines or not self.recording:
            return
        append_bytes(self.path, lines.encode(), durable=False)

    def by_target(self) -> dict[str, list[Access]]:
        size = self.path.stat().st_size if self.path.exists() else 0
        if size < self._offset:  # replaced by a shorter log: replay from the start
            self._offset, self._by_target = 0, defaultdict(list)
        if size > self._offset:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(size - self._offset)
            complete = data[: data.rfind(b"\n") + 1]
            for line in complete.decode("utf-8").splitlines():
                if line.strip():
                    access = Access(**json.loads(line))
                    self._by_target[access.target].append(access)
            self._offset += len(complete)
        return self._by_target


def top_share(counts: Mapping[Any, int], n_records: int, fraction: float = 0.01) -> float:
    """Share of all recalls taken by the top ``fraction`` of records (the gravity-well figure); ``counts`` is keyed
    by whatever names a record (only the counts are read)."""
    total = sum(counts.values())
    if not total:
        return 0.0
    k = max(1, int(round(n_records * fraction)))
    return sum(sorted(counts.values(), reverse=True)[:k]) / total
