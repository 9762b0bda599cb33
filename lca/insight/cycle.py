"""The integration cycle, Living Memory's "sleep": signatures, two spaces, clusters, the null model, the ledger.

``integrate`` runs, in order:

1. the distillation pass (``lca.insight.distill``): a validated signature for every current record, or a refusal;
2. both spaces: each record's text (content) and its signature's canonical text (structure), embedded by one
   embedder through the embedding cache under ``index/insight-embeddings`` (the same MiniLM for both spaces: the
   second space differs by what is embedded, not by the model), the structural vector joined by the signature's
   parts as a feature set (``structural_features``);
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
from lca.index.embedding_cache import CachedEmbedder
from lca.insight.centrality import Centrality, refresh_centrality
from lca.insight.differential import DifferentialConfig
from lca.insight.distill import DistillReport, distill
from lca.insight.null_model import NullModel, null_threshold
from lca.insight.probe import HotRecord, ProbeReport, hot_and_dormant, probe_pairs
from lca.insight.reconcile import InsightCandidate, Reconciliation, ScoredPair, reconcile
from lca.insight.recovery import RecoveryGauge, recovery_gauge
from lca.insight.review import ReviewConfig, ReviewOutcome, review_hypotheses
from lca.insight.signatures import StructuralSignature, signature_features
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
        if self.neighbour_space not in NEIGHBOUR_SPACES:
            raise RecordFormatError(
                f"must be one of {', '.join(NEIGHBOUR_SPACES)}, got {self.neighbour_space!r}", field="neighbour_space"
            )
        for name, low, high in (
            ("structural_cluster_distance", 0.0, 2.0),
            ("content_cluster_distance", 0.0, 2.0),
            ("null_quantile", 0.0, 1.0),
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
    structural, content = _spaces(layout, embedder, signed, signatures, features=config.structural_features)
    nearest_s = _nearest(structural, config.neighbours)  # content's only for content-space pairs (below)
    clusters_s = _clusters(structural, config.structural_cluster_distance, nearest_s)
    clusters_c = _content_clusters(content, config)
    pairs_from = nearest_s if config.neighbour_space == "structural" else _nearest(content, config.neighbours)
    first, second = _neighbour_pairs(pairs_from)
    s_cos = np.einsum("ij,ij->i", structural[first], structural[second])
    c_cos = np.einsum("ij,ij->i", content[first], content[second])
    labels = [r.domain for r in signed]
    cross = np.array([labels[i] != labels[j] for i, j in zip(first, second)], dtype=bool)
    centres = (
        (_kind_stats(s_cos, cross, config.scale_by_pair_kind), _kind_stats(c_cos, cross, config.scale_by_pair_kind))
        if config.centre_by_pair_kind
        else None
    )
    scores = _differential(config, s_cos, c_cos, cross, centres)
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
    reconciliations = reconcile(Ledger(home), surfaced, cycle=cycle_id, overlap=config.reconcile_overlap)
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


# per space (structural, content): the mean of the pairs across domains and of those within one, and each kind's spread
KindStats = tuple[float, float, float, float]
Centres = tuple[KindStats, KindStats]


def _differential(
    config: IntegrationConfig, s_cos: np.ndarray, c_cos: np.ndarray, cross: np.ndarray, centres: Centres | None
) -> np.ndarray:
    """The differential of pairs from their cosines, each first centred on its kind's mean (and divided by its
    space's spread) when ``centres``."""
    if centres is None:
        return config.differential.score(s_cos, c_cos)

    def standardized(cosines: np.ndarray, stats: KindStats) -> np.ndarray:
        across, within, across_spread, within_spread = stats
        return (cosines - np.where(cross, across, within)) / np.where(cross, across_spread, within_spread)

    return config.differential.score(standardized(s_cos, centres[0]), standardized(c_cos, centres[1]))


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
    scores = _differential(config, s_cos, c_cos, cross, spaces.centres)
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
    reconciled = reconcile(Ledger(home), shown, cycle=cycle_id, overlap=config.reconcile_overlap, origin="probe")
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
    scores = _differential(config, s_cos, c_cos, cross, centres)
    return tuple(
        ScoredPair(signed[i].id, signed[j].id, float(s_cos[k]), float(c_cos[k]), float(scores[k]))
        for k, (i, j) in enumerate(kept)
    )


def _written(layout: StoreLayout, result: IntegrationResult) -> IntegrationResult:
    path = layout.integration_report(result.cycle_id)
    atomic_write_bytes(path, (json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return result


def _spaces(
    layout: StoreLayout,
    embedder: Embedder,
    records: Sequence[InsightRecord],
    signatures: dict[str, SignatureRow],
    *,
    features: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The structural and the content vectors of ``records``, in order, through the cycle's embedding cache; with
    ``features`` the structural vector is the signature's embedding joined by its feature set (``_feature_vectors``)."""
    cached = CachedEmbedder(embedder, layout.insight_embeddings)
    try:
        structural = _normalized(cached.embed([signatures[r.id].text for r in records]))
        content = cached.embed([r.text for r in records])
    finally:
        cached.close()
    if features:
        structural = _normalized(np.hstack([structural, _feature_vectors([signatures[r.id] for r in records])]))
    return structural, _normalized(content)


def _feature_vectors(rows: Sequence[SignatureRow]) -> np.ndarray:
    """Each signature's parts (``signature_features``) as a unit binary vector over the features these signatures
    hold, in sorted order: the cosine of two is the share of features they have in common (Ochiai)."""
    sets = [signature_features(StructuralSignature.model_validate(row.signature)) for row in rows]
    column = {name: i for i, name in enumerate(sorted(set().union(*sets)))}
    vectors = np.zeros((len(rows), len(column)), dtype=np.float64)
    for i, features in enumerate(sets):
        vectors[i, [column[name] for name in features]] = 1.0
    return _normalized(vectors)


def _kind_stats(cosines: np.ndarray, cross: np.ndarray, scale: bool) -> KindStats:
    """The mean cosine of the pairs across domains and of those within one (0 for a kind with no pair), and each
    kind's spread when ``scale``: the standard deviation of its cosines (1 when not scaling; a kind of fewer than
    two pairs, or of no spread, takes the spread of every pair's cosine less its kind's mean, and 1 if that is none
    either)."""
    values = np.asarray(cosines, dtype=np.float64)
    across = float(values[cross].mean()) if cross.any() else 0.0
    within = float(values[~cross].mean()) if (~cross).any() else 0.0
    if not scale:
        return (across, within, 1.0, 1.0)
    pooled = float((values - np.where(cross, across, within)).std()) if len(values) >= 2 else 0.0
    pooled = pooled if pooled > 1e-9 else 1.0

    def spread(kind: np.ndarray) -> float:
        value = float(kind.std()) if kind.size >= 2 else 0.0
        return value if value > 1e-9 else pooled

    return (across, within, spread(values[cross]), spread(values[~cross]))


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _nearest(vectors: np.ndarray, neighbours: int) -> np.ndarray:
    """Each record's ``neighbours`` nearest others (cosine), one row of indexes per record (fewer when the records
    are fewer); computed once per space for both the clusters and the pairs."""
    from sklearn.neighbors import NearestNeighbors

    k = min(neighbours + 1, len(vectors))
    found = NearestNeighbors(n_neighbors=k, metric="cosine").fit(vectors).kneighbors(vectors, return_distance=False)
    rows = [[int(j) for j in row if int(j) != i][: k - 1] for i, row in enumerate(found)]
    return np.array(rows, dtype=np.int64).reshape(len(vectors), max(k - 1, 0))


def _clusters(vectors: np.ndarray, distance: float, nearest: np.ndarray) -> np.ndarray:
    """Cluster labels of ``vectors`` (agglomerative, cosine, average linkage, stopped at ``distance``), merging only
    along each record's nearest (``nearest``): the full distance matrix grows with the square of the records (16k
    records would hold 2 GB), the neighbour graph linearly. With fewer records than the cycle's ``neighbours`` the
    graph is complete and the clusters are the unrestricted ones."""
    import warnings

    from scipy.sparse import csr_matrix
    from sklearn.cluster import AgglomerativeClustering  # a heavy import, for the cycle only

    n = len(vectors)
    if n < 2 or nearest.shape[1] == 0:
        return np.zeros(n, dtype=np.int64)
    rows = np.repeat(np.arange(n), nearest.shape[1])
    graph = csr_matrix((np.ones(rows.size), (rows, nearest.ravel())), shape=(n, n))
    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance, connectivity=graph
    )
    with warnings.catch_warnings():  # a graph in several components is completed by scikit-learn, as it says
        warnings.filterwarnings("ignore", message=".*connected components.*")
        return np.asarray(model.fit_predict(vectors), dtype=np.int64)


def _content_clusters(content: np.ndarray, config: IntegrationConfig) -> np.ndarray:
    """The content space's clusters (of the vectors less their mean when ``centre_content_clusters``): average
    linkage over every pair of at most ``content_cluster_sample`` records drawn with the cycle's seed, then every
    record in the cluster whose mean direction is nearest. Merging along a neighbour graph, as the structural space
    does, averages only the graph's short edges: content chains through it, and a 16k-record store became one
    cluster whatever the distance."""
    from sklearn.cluster import AgglomerativeClustering  # a heavy import, for the cycle only

    vectors = _normalized(content - content.mean(axis=0)) if config.centre_content_clusters else content
    n = len(vectors)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    sampled = n > config.content_cluster_sample
    rows = np.arange(n)
    if sampled:
        rows = np.sort(np.random.default_rng(config.seed).choice(n, config.content_cluster_sample, replace=False))
    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=config.content_cluster_distance
    )
    sample = vectors[rows]
    labels = np.asarray(model.fit_predict(sample), dtype=np.int64)
    if not sampled:
        return labels
    centroids = _normalized(np.stack([sample[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)]))
    return np.asarray(np.argmax(vectors @ centroids.T, axis=1), dtype=np.int64)


def _neighbour_pairs(nearest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each record with its nearest (``_nearest``), as unique pairs ``first[k] < second[k]``."""
    pairs = {(min(i, int(j)), max(i, int(j))) for i, row in enumerate(nearest) for j in row}
    ordered = sorted(pairs)
    return np.array([p[0] for p in ordered], dtype=np.int64), np.array([p[1] for p in ordered], dtype=np.int64)


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
