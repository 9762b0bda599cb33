"""The cycle's two spaces: the vectors (the signature's embedding joined by its feature set; the record's text),
their clusters, each record's nearest, and the differential of a pair read against its own kind of pair. Split from
``lca.insight.cycle`` so that each stays a module one can read whole; the cycle calls these with its config."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lca.index.embedding_cache import CachedEmbedder
from lca.insight.differential import DifferentialConfig
from lca.insight.signatures import StructuralSignature, signature_features
from lca.insight.store import InsightRecord, SignatureRow
from lca.layout import StoreLayout
from lca.ports import Embedder

# per space (structural, content): the mean of the pairs across domains and of those within one, and each kind's spread
KindStats = tuple[float, float, float, float]
Centres = tuple[KindStats, KindStats]


def differential_scores(
    differential: DifferentialConfig, s_cos: np.ndarray, c_cos: np.ndarray, cross: np.ndarray, centres: Centres | None
) -> np.ndarray:
    """The differential of pairs from their cosines, each first centred on its kind's mean (and divided by its
    space's spread) when ``centres``."""
    if centres is None:
        return differential.score(s_cos, c_cos)

    def standardized(cosines: np.ndarray, stats: KindStats) -> np.ndarray:
        across, within, across_spread, within_spread = stats
        return (cosines - np.where(cross, across, within)) / np.where(cross, across_spread, within_spread)

    return differential.score(standardized(s_cos, centres[0]), standardized(c_cos, centres[1]))


def embed_spaces(
    layout: StoreLayout,
    embedder: Embedder,
    records: Sequence[InsightRecord],
    signatures: dict[str, SignatureRow],
    *,
    features: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The structural and the content vectors of ``records``, in order, through the cycle's embedding cache; with
    ``features`` the structural vector is the signature's embedding joined by its feature set (``feature_vectors``)."""
    cached = CachedEmbedder(embedder, layout.insight_embeddings)
    try:
        structural = normalized(cached.embed([signatures[r.id].text for r in records]))
        content = cached.embed([r.text for r in records])
    finally:
        cached.close()
    if features:
        structural = normalized(np.hstack([structural, feature_vectors([signatures[r.id] for r in records])]))
    return structural, normalized(content)


def feature_vectors(rows: Sequence[SignatureRow]) -> np.ndarray:
    """Each signature's parts (``signature_features``) as a unit binary vector over the features these signatures
    hold, in sorted order: the cosine of two is the share of features they have in common (Ochiai)."""
    sets = [signature_features(StructuralSignature.model_validate(row.signature)) for row in rows]
    column = {name: i for i, name in enumerate(sorted(set().union(*sets)))}
    vectors = np.zeros((len(rows), len(column)), dtype=np.float64)
    for i, features in enumerate(sets):
        vectors[i, [column[name] for name in features]] = 1.0
    return normalized(vectors)


def kind_stats(cosines: np.ndarray, cross: np.ndarray, scale: bool) -> KindStats:
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


def normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def nearest_neighbours(vectors: np.ndarray, neighbours: int) -> np.ndarray:
    """Each record's ``neighbours`` nearest others (cosine), one row of indexes per record (fewer when the records
    are fewer); computed once per space for both the clusters and the pairs."""
    from sklearn.neighbors import NearestNeighbors

    k = min(neighbours + 1, len(vectors))
    found = NearestNeighbors(n_neighbors=k, metric="cosine").fit(vectors).kneighbors(vectors, return_distance=False)
    rows = [[int(j) for j in row if int(j) != i][: k - 1] for i, row in enumerate(found)]
    return np.array(rows, dtype=np.int64).reshape(len(vectors), max(k - 1, 0))


def structural_clusters(vectors: np.ndarray, distance: float, nearest: np.ndarray) -> np.ndarray:
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


def content_clusters(content: np.ndarray, *, distance: float, sample: int, centre: bool, seed: int) -> np.ndarray:
    """The content space's clusters (of the vectors less their mean when ``centre``): average
    linkage over every pair of at most ``sample`` records drawn with ``seed``, then every
    record in the cluster whose mean direction is nearest. Merging along a neighbour graph, as the structural space
    does, averages only the graph's short edges: content chains through it, and a 16k-record store became one
    cluster whatever the distance."""
    from sklearn.cluster import AgglomerativeClustering  # a heavy import, for the cycle only

    vectors = normalized(content - content.mean(axis=0)) if centre else content
    n = len(vectors)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    sampled = n > sample
    rows = np.arange(n)
    if sampled:
        rows = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance)
    drawn = vectors[rows]
    labels = np.asarray(model.fit_predict(drawn), dtype=np.int64)
    if not sampled:
        return labels
    centroids = normalized(np.stack([drawn[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)]))
    return np.asarray(np.argmax(vectors @ centroids.T, axis=1), dtype=np.int64)


def neighbour_pairs(nearest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each record with its nearest (``nearest_neighbours``), as unique pairs ``first[k] < second[k]``."""
    pairs = {(min(i, int(j)), max(i, int(j))) for i, row in enumerate(nearest) for j in row}
    ordered = sorted(pairs)
    return np.array([p[0] for p in ordered], dtype=np.int64), np.array([p[1] for p in ordered], dtype=np.int64)
