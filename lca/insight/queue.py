"""The review queue: the ledger's insight hypotheses as a reviewer reads them (``lca insights``).

Waiting for review are the proposed and the resurfaced ones (a resurfaced one carries its earlier refutations as
questions); ``everything`` adds the dormant, promoted and held ones. Each shows its records, domains, trajectory
(the score each cycle gave it) and, for ``show``, each record's signature and the start of its text. A refusal is a
``hypothesis_refuted`` event: the entry turns dormant and stays in the ledger.

Each item carries its centrality, the mean of its records' link-graph centrality as the last cycle refreshed it
(``lca.insight.centrality``): among equal scores the item that would connect more of the store comes first, and
``order="centrality"`` ranks by it outright.

Each carries its last adversarial review (``lca.insight.review``): the rule, the outcome and every lens's verdict,
score and reason, as the ledger recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.insight.centrality import record_centrality
from lca.insight.reconcile import INSIGHT_TYPES, MEMBER_PREFIX
from lca.insight.review import last_review
from lca.insight.store import SignatureStore, insight_records
from lca.insight.taxonomy import record_taxonomy
from lca.ledger import Hypothesis, Ledger

WAITING = ("proposed", "resurfaced")
ORDERS = ("score", "centrality")


@dataclass(frozen=True)
class QueueItem:
    id: str
    status: str
    type: str  # insight, or insight-probe: first proposed by a hot-cycle probe
    claim: str
    records: tuple[str, ...]
    domains: tuple[str, ...]
    trajectory: tuple[dict[str, Any], ...]
    questions: tuple[str, ...]  # the reasons it was refused before
    centrality: float | None = None  # the mean of its current records' (None before a refresh, or with none current)
    review: Mapping[str, Any] | None = None  # its last lens review: rule, outcome, review_score, verdicts (None: none)

    @property
    def last_score(self) -> float | None:
        return float(self.trajectory[-1]["score"]) if self.trajectory else None


def _item(h: Hypothesis, centrality: Mapping[str, float] | None = None) -> QueueItem:
    domains: set[str] = set()
    for event in h.history:
        domains |= set(event.get("domains") or ())
    records = tuple(sorted(m[len(MEMBER_PREFIX) :] for m in h.members if m.startswith(MEMBER_PREFIX)))
    known = [centrality[r] for r in records if r in centrality] if centrality is not None else []
    return QueueItem(
        id=h.id,
        status=h.status,
        type=h.type,
        claim=h.claim,
        records=records,
        domains=tuple(sorted(domains)),
        trajectory=tuple(h.trajectory),
        questions=tuple(r.get("reason", "") for r in h.refutations),
        centrality=round(sum(known) / len(known), 6) if known else None,
        review=_review_summary(h),
    )


def _review_summary(h: Hypothesis) -> dict[str, Any] | None:
    last = last_review(h)
    if last is None:
        return None
    keys = ("cycle", "at", "rule", "outcome", "review_score", "reviewed", "verdicts")
    return {k: last.get(k) for k in keys}


def review_queue(home: Path | str, *, everything: bool = False, order: str = "score") -> list[QueueItem]:
    """The insight hypotheses waiting for review (all of them with ``everything``): best last score first, the more
    central first among equal scores; ``order="centrality"``: the more central first, then by score."""
    if order not in ORDERS:
        raise LCAError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    centrality = record_centrality(home)
    hypotheses = Ledger(home).state().hypotheses.values()
    items = [
        _item(h, centrality) for h in hypotheses if h.type in INSIGHT_TYPES and (everything or h.status in WAITING)
    ]

    def score(i: QueueItem) -> float:
        return -(i.last_score if i.last_score is not None else -1e9)

    def central(i: QueueItem) -> float:
        return -(i.centrality if i.centrality is not None else -1.0)

    if order == "centrality":
        return sorted(items, key=lambda i: (central(i), score(i), i.id))
    return sorted(items, key=lambda i: (score(i), central(i), i.id))


def insight_detail(home: Path | str, hypothesis: str) -> dict[str, Any]:
    """One insight hypothesis with each of its records' domain, signature text and opening words."""
    h = Ledger(home).state().hypotheses.get(hypothesis)
    if h is None or h.type not in INSIGHT_TYPES:
        raise LCAError(f"no insight hypothesis {hypothesis!r} in the ledger (lca insights list shows them)")
    centrality = record_centrality(home) or {}
    item = _item(h, centrality)
    records = {r.id: r for r in insight_records(home)[0]}
    taxonomy = record_taxonomy(home)
    signed = {row.source: row for row in SignatureStore(home).signatures().values()}
    members = []
    for rid in item.records:
        record, row = records.get(rid), signed.get(rid)
        members.append(
            {
                "id": rid,
                "domain": record.domain if record else None,
                "text": (record.text[:240] if record else "(no longer a current record)"),
                "signature": row.text if row else None,
                "signed_by": f"{row.model} ({row.prompt_version})" if row else None,
                "centrality": centrality.get(rid),
                "schemas": [t.__dict__ for t in taxonomy.get(rid, ())],  # established schemas covering it
            }
        )
    return {"item": item, "members": members, "history": list(h.history)}


def refute(home: Path | str, hypothesis: str, *, reason: str, by: str) -> None:
    """A reviewer's refusal: the entry turns dormant (never deleted) and keeps the reason as a future question."""
    if not reason.strip() or not by.strip():
        raise LCAError("refuting an insight needs a reason and a reviewer's name")
    ledger = Ledger(home)
    h = ledger.state().hypotheses.get(hypothesis)
    if h is None or h.type not in INSIGHT_TYPES:
        raise LCAError(f"no insight hypothesis {hypothesis!r} in the ledger (lca insights list shows them)")
    ledger.append(
        "hypothesis_refuted", hypothesis, {"reason": reason.strip(), "by": by.strip(), "members": sorted(h.members)}
    )
