"""The integration cycle, Living Memory's "sleep": signatures, two spaces, clusters, the null model, the ledger.

``integrate`` runs, in order:

1. the distillation pass (``lca.insight.distill``): a validated signature for every current record, or a refusal;
2. both spaces (``lca.insight.spaces``): each record's text (content) and its signature's canonical text
   (structure), embedded by one embedder through the embedding cache under ``index/insight-embeddings`` (the same
   MiniLM for both spaces: the second space differs by what is embedded, not by the model), the structural vector
   joined by the signature's parts as a feature set (``structural_features``);
3. candidate clusters in each space (scikit-learn's agglomerative clustering, cosine distance, average linkage):
   structure merging along each record's ``neighbours`` nearest so memory grows linearly with the records; content
   over every pair of a seeded sample, the rest assigned to the nearest cluster, its vectors centred on their mean
   first (``centre_content_clusters``);
4. pairs: each record and its ``neighbours`` nearest in the structural space (the content space for the
   content-only detector, ``neighbour_space``), scored by the differential
   (``lca.insight.differential``) of its two cosines, each centred on the mean of its kind of pair (across domains
   or within one: records of one domain share words, so without it any pair across domains would look like a
   rhyme next to the null's same-domain pairs);
5. the null model's threshold (``lca.insight.null_model``), drawn from same-domain pairs at a candidate's content
   distance;
6. surfacing: cross-domain pairs above the threshold (in one structural cluster and in different content clusters,
   each rule a config switch), joined into candidates by shared records, best first, at most ``max_surfaced`` a
   cycle; the rest are counted as deferred;
7. reconciliation with the ledger (``lca.insight.reconcile``);
8. the hot cycle (``lca.insight.probe``): the most active records paired with dormant ones of other domains, scored
   as above, surfacing under the same threshold and rules in slots of their own, recorded with origin ``probe``;
9. the centrality refresh (``lca.insight.centrality``): PageRank over the records' provenance and ledger links,
   after the ledger took this cycle's candidates, rewritten as derived data (also when nothing could be scored);
10. the adversarial review (``lca.insight.review``): every surfaced entry not yet reviewed on its current records,
    through each lens (``lca.insight.lenses``), the verdicts combined by a declared rule and recorded in the ledger;
    a refuted one turns dormant before the centrality refresh;
11. the taxonomy refresh (``lca.insight.taxonomy``): the established schemas' tags on the records they cover;
12. a report under ``insight/cycles/``, with the ledger's recovery rate (``lca.insight.recovery``).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from lca.activation import RetrievalLog, memory_activations
from lca.derived import derived_tree
from lca.errors import RecordFormatError
from lca.fileio import atomic_write_bytes
from lca.insight.centrality import Centrality, refresh_centrality
from lca.insight.differential import DifferentialConfig
from lca.insight.distill import DistillReport, distill
from lca.insight.null_model import NULL_STATISTICS, NullModel, null_threshold
from lca.insight.probe import HotRecord, ProbeReport, hot_and_dormant, probe_pairs
from lca.insight.reconcile import InsightCandidate, Reconciliation, ScoredPair, reconcile
from lca.insight.recovery import RecoveryGauge, recovery_gauge
from lca.insight.review import ReviewConfig, ReviewOutcome, review_hypotheses
from lca.insight.spaces import (
    Centres,
    content_clusters,
    differential_scores,
    embed_spaces,
    kind_stats,
    nearest_neighbours,
    neighbour_pairs,
    structural_clusters,
)
from lca.insight.store import InsightRecord, SignatureRow, insight_records
from lca.insight.taxonomy import refresh_taxonomy
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.ports import Embedder, StructuralSigner
from lca.provenance import code_version

NEIGHBOUR_SPACES = ("structural", "content")


@dataclass(frozen=True)
class IntegrationConfig:
    """Every parameter of a cycle, with its default; each switch is an ablation."""

    differential: DifferentialConfig = field(default_factory=DifferentialConfig)
    # each cosine less the mean of its kind of pair (same domain or across domains) before the differential: pairs
    # across domains share fewer words by nature, and uncentred they would outscore the null's same-domain pairs
    centre_by_pair_kind: bool = True
    # and divided by its kind's spread in that space: neither space's scale decides the composition, and a pair is
    # read against its own kind (same-domain cosines spread wider; over a pooled spread they set the null too high)
    scale_by_pair_kind: bool = True
    # the signature's parts (``signature_features``) as a unit binary vector joined to its unit embedding: MiniLM
    # reads skeletons one relation apart as near one text (0.95), the feature set counts the relation as gone
    structural_features: bool = True
    neighbours: int = 15  # per record, in the space ``neighbour_space`` names
    # where the scored pairs are found: "structural" (the default), or "content" (the content-only detector's pairs)
    neighbour_space: str = "structural"
    structural_cluster_distance: float = 0.2  # cosine distance at which agglomerative clustering stops merging
    content_cluster_distance: float = 0.6
    content_cluster_sample: int = 2000  # records whose every pair the content clustering reads; the rest are assigned
    # content clustered less the store's mean: what every text shares (a house style, the embedder's common
    # direction) is removed, so unrelated records lie near orthogonal and the distance means the same on any embedder
    centre_content_clusters: bool = True
    require_shared_structural_cluster: bool = True
    require_distinct_content_clusters: bool = True
    null_shuffles: int = 200
    # how the null reads its shuffles (``lca.insight.null_model``): "tail", the pooled spurious scores' upper
    # ``null_tail`` (a per-pair rate, steady as the store grows), or "max", the ``null_quantile`` of each one's best
    null_statistic: str = "tail"
    null_tail: float = 0.001
    null_quantile: float = 0.95
    max_surfaced: int = 5  # candidates surfaced per cycle; the rest wait (deferred, counted)
    reconcile_overlap: float = 0.5  # membership overlap at which a candidate is an entry seen again
    report_pairs: int = 20  # the best cross-domain pairs the report lists, surfaced or not
    # the hot cycle: how many of the most active records a cycle pairs with dormant ones (0: no probes, an ablation),
    # and how many probe candidates it surfaces (the rest wait, counted)
    probe_hot: int = 5
    probe_max_surfaced: int = 2
    review: ReviewConfig = field(default_factory=ReviewConfig)  # the lenses and their rule (no lenses: no review)
    seed: int = 0

    def __post_init__(self) -> None:
        for name, least in (
            ("neighbours", 1),
            ("null_shuffles", 1),
            ("max_surfaced", 0),
            ("report_pairs", 0),
            ("probe_hot", 0),
            ("probe_max_surfaced", 0),
            ("content_cluster_sample", 2),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise RecordFormatError(f"must be an integer >= {least}, got {value!r}", field=name)
        if self.null_statistic not in NULL_STATISTICS:
            raise RecordFormatError(
                f"must be one of {', '.join(NULL_STATISTICS)}, got {self.null_statistic!r}", field="null_statistic"
            )
        if self.neighbour_space not in NEIGHBOUR_SPACES:
            raise RecordFormatError(
                f"must be one of {', '.join(NEIGHBOUR_SPACES)}, got {self.neighbour_space!r}", field="neighbour_space"
            )
        for name, low, high in (
            ("structural_cluster_distance", 0.0, 2.0),
            ("content_cluster_distance", 0.0, 2.0),
            ("null_quantile", 0.0, 1.0),
            ("null_tail", 0.0, 1.0),
            ("reconcile_overlap", 0.0, 1.0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RecordFormatError(f"must be a number, got {value!r}", field=name)
            if not low < value < high and not (name == "reconcile_overlap" and value == high):
                raise RecordFormatError(f"must lie in ({low:g}, {high:g}), got {value!r}", field=name)


@dataclass(frozen=True)
class IntegrationResult:
    """The typed record of one cycle; ``to_dict`` is its report."""

    cycle_id: str
    started: float
    seconds: float
    config: dict[str, Any]
    provenance: dict[str, Any]
    records: int
    skipped: dict[str, int]
    distill: DistillReport
    signed_records: int
    domains: dict[str, int]
    clusters: dict[str, int]
    pairs_scored: int
    cross_domain_pairs: int
    null: NullModel | None
    above_threshold: int  # cross-domain pairs above the threshold that passed the cluster rules
    best_pairs: tuple[ScoredPair, ...]  # the best-scored cross-domain pairs, surfaced or not (report_pairs of them)
    candidates: tuple[InsightCandidate, ...]  # surfaced this cycle
    deferred: tuple[InsightCandidate, ...]  # above the threshold, past the rate limit
    reconciliations: tuple[Reconciliation, ...]
    note: str | None = None  # why nothing could be scored, when so
    also_scored: tuple[ScoredPair, ...] = ()  # the pairs the caller asked scored, as the cycle scores any pair
    probes: ProbeReport | None = None  # the hot cycle's (None when nothing could be scored)
    centrality: Centrality | None = None  # the refresh this cycle made (the report holds its summary)
    reviews: tuple[ReviewOutcome, ...] = ()  # the lens reviews this cycle made
    recovery: RecoveryGauge | None = None  # the ledger's recovery rate after this cycle

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["recovery"] = self.recovery.to_dict() if self.recovery is not None else None
        out["distill"]["valid_share"] = self.distill.valid_share
        out["null"] = self.null.summary() if self.null is not None else None
        out["centrality"] = self.centrality.summary() if self.centrality is not None else None
        return derived_tree(out)


def integrate(
    home: Path | str,
    signer: StructuralSigner,
    embedder: Embedder,
    config: IntegrationConfig | None = None,
    *,
    rebuild: bool = False,
    progress: bool = False,
    also_score: Sequence[tuple[str, str]] = (),
) -> IntegrationResult:
    """One integration cycle over the store at ``home`` (see the module docstring); writes its report and ledger
    events, and returns its record. ``also_score`` names record pairs to score beside the neighbour pairs (with
    the cycle's own centring; they never surface unless they are neighbour pairs too): a planted corpus's known
    pairs, measured where the cycle would not have looked."""
    config = config or IntegrationConfig()
    started, clock = time.time(), time.perf_counter()
    cycle_id = f"integrate-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    layout = StoreLayout(home)
    loaded = MemoryStore(home).load()
    records, skipped = insight_records(home, loaded=loaded)
    signatures, report = distill(home, records, signer, rebuild=rebuild, progress=progress)
    signed = [r for r in records if r.id in signatures]
    refresh_taxonomy(home, records=records)  # the records just signed take the established schemas' tags
    domains: dict[str, int] = {}
    for record in signed:
        domains[record.domain] = domains.get(record.domain, 0) + 1
    provenance = {
        "code_version": code_version(),
        "embedder": embedder.embedder_id,
        "signer": signer.model_id,
        "prompt_version": signer.prompt_version,
    }
    base: dict[str, Any] = {
        "cycle_id": cycle_id,
        "started": started,
        "config": asdict(config),
        "provenance": provenance,
        "records": len(records),
        "skipped": skipped,
        "distill": report,
        "signed_records": len(signed),
        "domains": domains,
    }
    if len(signed) < 3 or len(domains) < 2:
        note = f"{len(signed)} signed record(s) in {len(domains)} domain(s): a cycle needs 3 records and 2 domains"
        centrality = refresh_centrality(home, memories=loaded.files)
        result = IntegrationResult(
            seconds=time.perf_counter() - clock,
            clusters={},
            pairs_scored=0,
            cross_domain_pairs=0,
            null=None,
            above_threshold=0,
            best_pairs=(),
            candidates=(),
            deferred=(),
            reconciliations=(),
            note=note,
            centrality=centrality,
            recovery=recovery_gauge(Ledger(home).state()),
            **base,
        )
        return _written(layout, result)
    structural, content = embed_spaces(layout, embedder, signed, signatures, features=config.structural_features)
    nearest_s = nearest_neighbours(structural, config.neighbours)  # content's only for content-space pairs (below)
    clusters_s = structural_clusters(structural, config.structural_cluster_distance, nearest_s)
    clusters_c = content_clusters(
        content,
        distance=config.content_cluster_distance,
        sample=config.content_cluster_sample,
        centre=config.centre_content_clusters,
        seed=config.seed,
    )
    structural_pairs = config.neighbour_space == "structural"
    pairs_from = nearest_s if structural_pairs else nearest_neighbours(content, config.neighbours)
    first, second = neighbour_pairs(pairs_from)
    s_cos = np.einsum("ij,ij->i", structural[first], structural[second])
    c_cos = np.einsum("ij,ij->i", content[first], content[second])
    labels = [r.domain for r in signed]
    cross = np.array([labels[i] != labels[j] for i, j in zip(first, second)], dtype=bool)
    centres = (
        (kind_stats(s_cos, cross, config.scale_by_pair_kind), kind_stats(c_cos, cross, config.scale_by_pair_kind))
        if config.centre_by_pair_kind
        else None
    )
    scores = differential_scores(config.differential, s_cos, c_cos, cross, centres)
    distinct_content = clusters_c[first] != clusters_c[second]
    null = null_threshold(
        first,
        second,
        scores,
        labels,
        eligible=distinct_content if config.require_distinct_content_clusters else None,
        shuffles=config.null_shuffles,
        quantile=config.null_quantile,
        seed=config.seed,
        statistic=config.null_statistic,
        tail=config.null_tail,
    )
    keep = cross & (scores > (np.inf if null.threshold is None else null.threshold))
    if config.require_shared_structural_cluster:
        keep &= clusters_s[first] == clusters_s[second]
    if config.require_distinct_content_clusters:
        keep &= distinct_content
    scored = [
        ScoredPair(signed[i].id, signed[j].id, float(s_cos[k]), float(c_cos[k]), float(scores[k]))
        for k, (i, j) in enumerate(zip(first, second))
    ]
    pairs = [pair for pair, kept in zip(scored, keep) if kept]
    best = sorted((p for p, c in zip(scored, cross) if c), key=lambda p: (-p.score, p.first, p.second))
    candidates = _candidates(pairs, {r.id: r for r in signed}, signatures)
    also_scored = _also_scored(also_score, signed, structural, content, config, centres)
    surfaced, deferred = tuple(candidates[: config.max_surfaced]), tuple(candidates[config.max_surfaced :])
    reconciliations = reconcile(
        Ledger(home), surfaced, cycle=cycle_id, overlap=config.reconcile_overlap, threshold=null.threshold
    )
    spaces = _Spaces(structural, content, clusters_s, clusters_c, centres)
    probes = _probes(home, cycle_id, config, signed, signatures, spaces, null, surfaced, now=started)
    reviewed = [r.hypothesis for r in (*reconciliations, *probes.reconciliations)]
    reviews = review_hypotheses(
        home, reviewed, config.review, records=signed, signatures=signatures, memories=loaded.files, cycle=cycle_id
    )
    centrality = refresh_centrality(home, memories=loaded.files)  # after the ledger took this cycle's candidates
    result = IntegrationResult(
        seconds=time.perf_counter() - clock,
        clusters={
            "structural": int(clusters_s.max()) + 1,
            "content": int(clusters_c.max()) + 1,
        },
        pairs_scored=len(first),
        cross_domain_pairs=int(cross.sum()),
        null=null,
        above_threshold=len(pairs),
        best_pairs=tuple(best[: config.report_pairs]),
        candidates=surfaced,
        deferred=deferred,
        reconciliations=tuple(reconciliations),
        also_scored=also_scored,
        probes=probes,
        centrality=centrality,
        reviews=reviews,
        recovery=recovery_gauge(Ledger(home).state()),
        **base,
    )
    return _written(layout, result)


@dataclass(frozen=True)
class _Spaces:
    """What the cycle computed over the signed records that the hot cycle scores its pairs with."""

    structural: np.ndarray
    content: np.ndarray
    clusters_s: np.ndarray
    clusters_c: np.ndarray
    centres: Centres | None


def _probes(
    home: Path | str,
    cycle_id: str,
    config: IntegrationConfig,
    signed: Sequence[InsightRecord],
    signatures: dict[str, SignatureRow],
    spaces: _Spaces,
    null: NullModel,
    surfaced: Sequence[InsightCandidate],
    *,
    now: float,
) -> ProbeReport:
    """The hot cycle (``lca.insight.probe``): pairs of an active record with a dormant one of another domain,
    scored and kept as the neighbour pairs are; a pair both of whose records one surfaced candidate already holds
    is not new, and is left out."""
    activations = {} if config.probe_hot == 0 else _activations(home, signed, now)
    hot_rows, dormant_rows = hot_and_dormant(signed, activations, config.probe_hot)
    hot = tuple(HotRecord(signed[i].id, signed[i].domain, round(activations[signed[i].id], 6)) for i in hot_rows)

    def report(
        pairs_scored: int = 0,
        above: int = 0,
        candidates: Sequence[InsightCandidate] = (),
        reconciliations: Sequence[Reconciliation] = (),
        note: str | None = None,
    ) -> ProbeReport:
        shown, waiting = candidates[: config.probe_max_surfaced], candidates[config.probe_max_surfaced :]
        dormant = len(dormant_rows) if activations else 0
        return ProbeReport(
            hot, dormant, pairs_scored, above, tuple(shown), tuple(waiting), tuple(reconciliations), note
        )

    if config.probe_hot == 0:
        return report(note="probes are off (probe_hot = 0)")
    if not hot_rows:
        return report(note="no record is active (none recalled recently enough to be above the dormant line)")
    first, second, s_cos, c_cos = probe_pairs(signed, hot_rows, dormant_rows, spaces.structural, spaces.content)
    if not len(first):
        return report(note="no dormant record in another domain than the active ones")
    cross = np.ones(len(first), dtype=bool)
    scores = differential_scores(config.differential, s_cos, c_cos, cross, spaces.centres)
    if null.threshold is None:
        return report(len(first), note=f"no null threshold, so nothing surfaces ({null.reason})")
    keep = scores > null.threshold
    if config.require_shared_structural_cluster:
        keep &= spaces.clusters_s[first] == spaces.clusters_s[second]
    if config.require_distinct_content_clusters:
        keep &= spaces.clusters_c[first] != spaces.clusters_c[second]
    holder = {m: k for k, c in enumerate(surfaced) for m in c.members}
    pairs = [
        ScoredPair(signed[i].id, signed[j].id, float(s_cos[k]), float(c_cos[k]), float(scores[k]))
        for k, (i, j) in enumerate(zip(first, second))
        if keep[k] and (holder.get(signed[i].id) is None or holder.get(signed[i].id) != holder.get(signed[j].id))
    ]
    candidates = _candidates(pairs, {r.id: r for r in signed}, signatures)
    shown = candidates[: config.probe_max_surfaced]
    reconciled = reconcile(
        Ledger(home), shown, cycle=cycle_id, overlap=config.reconcile_overlap, origin="probe", threshold=null.threshold
    )
    return report(len(first), len(pairs), candidates, reconciled)


def _activations(home: Path | str, records: Sequence[InsightRecord], now: float) -> dict[str, float]:
    """Each record's activation term from the store's retrieval log, read and never written."""
    return memory_activations(RetrievalLog(home, record=False).by_target(), (r.id for r in records), now)


def _also_scored(
    wanted: Sequence[tuple[str, str]],
    signed: Sequence[InsightRecord],
    structural: np.ndarray,
    content: np.ndarray,
    config: IntegrationConfig,
    centres: Centres | None,
) -> tuple[ScoredPair, ...]:
    """The pairs ``wanted`` whose records were both signed, scored as the cycle scores its neighbour pairs."""
    row = {r.id: i for i, r in enumerate(signed)}
    kept = [(row[a], row[b]) for a, b in wanted if a in row and b in row and a != b]
    if not kept:
        return ()
    first, second = np.array([p[0] for p in kept]), np.array([p[1] for p in kept])
    s_cos = np.einsum("ij,ij->i", structural[first], structural[second])
    c_cos = np.einsum("ij,ij->i", content[first], content[second])
    cross = np.array([signed[i].domain != signed[j].domain for i, j in kept], dtype=bool)
    scores = differential_scores(config.differential, s_cos, c_cos, cross, centres)
    return tuple(
        ScoredPair(signed[i].id, signed[j].id, float(s_cos[k]), float(c_cos[k]), float(scores[k]))
        for k, (i, j) in enumerate(kept)
    )


def _written(layout: StoreLayout, result: IntegrationResult) -> IntegrationResult:
    path = layout.integration_report(result.cycle_id)
    atomic_write_bytes(path, (json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return result


def _candidates(
    pairs: Sequence[ScoredPair], records: dict[str, InsightRecord], signatures: dict[str, SignatureRow]
) -> list[InsightCandidate]:
    """Pairs joined into candidates where they share a record (connected components), best score first."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pair in pairs:
        parent[root(pair.first)] = root(pair.second)
    groups: dict[str, list[ScoredPair]] = {}
    for pair in pairs:
        groups.setdefault(root(pair.first), []).append(pair)
    out = []
    for group in groups.values():
        group.sort(key=lambda p: (-p.score, p.first, p.second))
        members = tuple(sorted({p.first for p in group} | {p.second for p in group}))
        out.append(
            InsightCandidate(
                members=members,
                domains=tuple(sorted({records[m].domain for m in members})),
                score=group[0].score,
                pairs=tuple(group),
                skeleton=signatures[group[0].first].text,
            )
        )
    return sorted(out, key=lambda c: (-c.score, c.members))
