"""One integration cycle on a planted corpus, measured against the corpus's gold.

``planted_store`` writes the records as memory files of a store (each record's domain its project), so the cycle
reads them as it reads a user's memories; ``measure_cycle`` runs ``lca.insight.integrate`` there (the product's
cycle, nothing re-implemented) with the gold's rhymes and topical pairs also scored, and ``cycle_measures`` reads
the result against the gold:

- the pairs above the null model's threshold (surfaced and deferred alike: the rate limit only delays a
  candidate) with their precision, recall and false-discovery rate, and the same for the rate-limited surfaced
  pairs alone;
- the differential of every topical pair (alike in words, different in skeleton; it should centre on 0) and of
  every rhyme, with their content and structural cosines.

The content-only detector, the baseline the Living Memory paper argues against, is the same cycle with the
``content-only`` composition over neighbours in the content space and no cluster rule (``CONTENT_ONLY``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from lca.insight import DifferentialConfig, IntegrationConfig, IntegrationResult, integrate
from lca.memory import Authority, MemoryRecord, MemoryStore, MemoryType, Privacy
from lca.ports import Embedder, StructuralSigner
from protocols.evals.insight.corpus import PlantedRecord, gold_pairs, topical_pairs

CREATED = datetime(2026, 1, 1)


def content_only(config: IntegrationConfig) -> IntegrationConfig:
    """``config`` as the content-only detector: content cosine alone, neighbours found in the content space, no
    cluster rule (a rule in the structural space would bring structure back in)."""
    return replace(
        config,
        differential=DifferentialConfig("content-only", config.differential.content_weight),
        neighbour_space="content",
        require_shared_structural_cluster=False,
        require_distinct_content_clusters=False,
    )


def planted_store(records: Iterable[PlantedRecord], home: Path | str) -> int:
    """Each record as a lesson memory of the store at ``home``, its domain as its project; returns the count."""
    store = MemoryStore(home)
    count = 0
    for record in records:
        memory = MemoryRecord(
            id=record.id,
            type=MemoryType.LESSON,
            projects=(record.domain,),
            created=CREATED,
            authority=Authority.REVIEWED,
            privacy=Privacy.PRIVATE,
        )
        store.write(memory, record.text + "\n")
        count += 1
    return count


def measure_cycle(
    home: Path | str,
    records: Sequence[PlantedRecord],
    signer: StructuralSigner,
    embedder: Embedder,
    config: IntegrationConfig | None = None,
    *,
    progress: bool = False,
) -> tuple[IntegrationResult, dict[str, Any]]:
    """The cycle over the planted store at ``home`` and its measures against ``records``' gold."""
    gold, topical = gold_pairs(records), topical_pairs(records)
    result = integrate(home, signer, embedder, config, progress=progress, also_score=sorted(gold | topical))
    return result, cycle_measures(result, records)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 4),
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def _pairs_of(candidates: Iterable[Any]) -> set[tuple[str, str]]:
    return {(min(p.first, p.second), max(p.first, p.second)) for c in candidates for p in c.pairs}


def cycle_measures(result: IntegrationResult, records: Sequence[PlantedRecord]) -> dict[str, Any]:
    """Precision, recall and false discoveries of the pairs above the threshold; the differential of the topical
    pairs and of the rhymes (from the cycle's ``also_scored``)."""
    gold, topical = gold_pairs(records), topical_pairs(records)
    above = _pairs_of((*result.candidates, *result.deferred))
    surfaced = _pairs_of(result.candidates)
    true_above, true_surfaced = above & gold, surfaced & gold
    scored = {(min(p.first, p.second), max(p.first, p.second)): p for p in result.also_scored}
    null = result.null
    return {
        "records": result.records,
        "signed_records": result.signed_records,
        "domains": len(result.domains),
        "gold_pairs": len(gold),
        "topical_pairs": len(topical),
        "threshold": None if null is None else null.threshold,
        "threshold_reason": None if null is None else null.reason,
        "null_statistic": None if null is None else null.statistic,
        "null_spurious_pairs": None if null is None else null.spurious_pairs,
        "max_statistic_threshold": None if null is None else null.summary()["max_statistic_threshold"],
        "pairs_scored": result.pairs_scored,
        "above_threshold_pairs": len(above),
        "true_discoveries": len(true_above),
        "false_discoveries": len(above) - len(true_above),
        "topical_discoveries": len(above & topical),
        "precision": _share(len(true_above), len(above)),
        "recall": _share(len(true_above), len(gold)),
        "false_discovery_rate": _share(len(above) - len(true_above), len(above)),
        "candidates_above": len(result.candidates) + len(result.deferred),
        "surfaced_pairs": len(surfaced),
        "surfaced_precision": _share(len(true_surfaced), len(surfaced)),
        "surfaced_candidates": len(result.candidates),
        "deferred_candidates": len(result.deferred),
        "topical_differential": _spread([scored[p].score for p in sorted(topical) if p in scored]),
        "topical_content_cosine": _spread([scored[p].content for p in sorted(topical) if p in scored]),
        "topical_structural_cosine": _spread([scored[p].structural for p in sorted(topical) if p in scored]),
        "rhyme_differential": _spread([scored[p].score for p in sorted(gold) if p in scored]),
        "rhyme_content_cosine": _spread([scored[p].content for p in sorted(gold) if p in scored]),
        "signature_valid_share": result.distill.valid_share,
        "signatures_refused": dict(result.distill.refused),
        "seconds": round(result.seconds, 3),
        "cycle_id": result.cycle_id,
    }
