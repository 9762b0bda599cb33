"""Step (iv) of the integration cycle, the hot cycle: deliberate probes pairing the most active records with dormant
records of other domains (Living Memory's fourth gravity-well defense).

Recall returns to what it returned before (activation feeds on use), so a dormant record is looked at by nobody,
and the cycle's neighbour search only looks near each record. A probe takes the ``probe_hot`` records with the
highest activation (``lca.activation.memory_activations`` over the retrieval log; a dormant record is never hot)
and pairs each with every dormant record of another domain, neighbours or not. The cycle scores those pairs with
its own differential and centring and lets through only those its surfacing rules would (the null model's
threshold, the cluster switches), in slots of their own (``probe_max_surfaced``) so the main surfacing's best
scores cannot crowd them out; the ledger records them with origin ``probe`` (``lca.insight.reconcile``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lca.activation import DORMANT_BELOW
from lca.insight.reconcile import InsightCandidate, Reconciliation
from lca.insight.store import InsightRecord


@dataclass(frozen=True)
class HotRecord:
    """A record a probe starts from: among the most active, and not dormant."""

    id: str
    domain: str
    activation: float  # its activation term, in [0, 1]


@dataclass(frozen=True)
class ProbeReport:
    """What the cycle's probes did: from which records, over how many pairs, and what surfaced."""

    hot: tuple[HotRecord, ...]
    dormant: int  # records whose activation term is below DORMANT_BELOW: what a probe pairs the hot ones with
    pairs_scored: int
    above_threshold: int  # probe pairs above the threshold that passed the cluster rules, new to this cycle
    candidates: tuple[InsightCandidate, ...]  # surfaced by the probes
    deferred: tuple[InsightCandidate, ...]  # above the threshold, past the probes' rate limit
    reconciliations: tuple[Reconciliation, ...]
    note: str | None = None  # why no probe ran or nothing could surface, when so


def hot_and_dormant(
    records: Sequence[InsightRecord], activations: Mapping[str, float], hot: int
) -> tuple[list[int], list[int]]:
    """Row indexes into ``records`` of the ``hot`` most active records that are not dormant (most active first,
    ids breaking ties), and of every dormant one (in row order)."""
    active = [i for i, r in enumerate(records) if activations.get(r.id, 0.0) >= DORMANT_BELOW]
    active.sort(key=lambda i: (-activations[records[i].id], records[i].id))
    dormant = [i for i, r in enumerate(records) if activations.get(r.id, 0.0) < DORMANT_BELOW]
    return active[:hot], dormant


def probe_pairs(
    records: Sequence[InsightRecord],
    hot_rows: Sequence[int],
    dormant_rows: Sequence[int],
    structural: np.ndarray,
    content: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each hot row with each dormant row of another domain, as ``first < second`` row indexes with both cosines
    (``structural`` and ``content`` hold unit rows). One matrix product per space against the hot rows: a pair's
    gathered vectors would hold hot x records x dimensions floats."""
    empty = np.zeros(0, dtype=np.int64)
    if not hot_rows or not dormant_rows:
        return empty, empty, np.zeros(0), np.zeros(0)
    hot, dormant = np.asarray(hot_rows, dtype=np.int64), np.asarray(dormant_rows, dtype=np.int64)
    s_all = structural[dormant] @ structural[hot].T  # dormant x hot
    c_all = content[dormant] @ content[hot].T
    domains = np.array([r.domain for r in records])
    across = domains[dormant][:, None] != domains[hot][None, :]
    d_at, h_at = np.nonzero(across)
    first, second = np.minimum(hot[h_at], dormant[d_at]), np.maximum(hot[h_at], dormant[d_at])
    return first, second, s_all[d_at, h_at], c_all[d_at, h_at]
