"""How the cycle reads its two spaces, on vectors small enough to check: content clusters after the store's shared
direction is removed, each kind of pair standardized by its own spread, and the signature's feature set beside
its embedding."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from lca.insight import IntegrationConfig
from lca.insight.signatures import StructuralSignature, canonical_text, signature_features
from lca.insight.spaces import (
    content_clusters,
    differential_scores,
    feature_vectors,
    kind_stats,
    nearest_neighbours,
    normalized,
    structural_clusters,
)
from lca.insight.store import SignatureRow


def _grouped_vectors(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two groups of 20 records that share one strong direction (a house style every text has) and differ by a
    weaker one each, with noise: the shape of a store whose records are all told in one voice."""
    rng = np.random.default_rng(seed)
    dimension = 32
    shared, first, second = np.eye(dimension)[0] * 3.0, np.eye(dimension)[1], np.eye(dimension)[2]
    groups = np.repeat([0, 1], 20)
    vectors = shared + np.where(groups[:, None] == 0, first, second) + rng.normal(0, 0.05, (40, dimension))
    return normalized(vectors), groups


def _content_clusters_of(vectors: np.ndarray, config: IntegrationConfig) -> np.ndarray:
    """The content clusters as the cycle asks for them, from its config."""
    return content_clusters(
        vectors,
        distance=config.content_cluster_distance,
        sample=config.content_cluster_sample,
        centre=config.centre_content_clusters,
        seed=config.seed,
    )


def test_content_clusters_are_read_after_the_shared_direction_is_removed():
    vectors, groups = _grouped_vectors()
    config = IntegrationConfig(content_cluster_distance=0.6)
    raw = _content_clusters_of(vectors, replace(config, centre_content_clusters=False))
    assert len(set(raw)) == 1  # every record within the distance of the others: one cluster holds the store
    centred = _content_clusters_of(vectors, config)
    assert len(set(centred)) == 2
    assert all(len(set(centred[groups == g])) == 1 for g in (0, 1))  # each group its own cluster


def test_a_store_past_the_sample_is_clustered_on_a_seeded_sample_and_every_record_assigned():
    vectors, groups = _grouped_vectors()
    config = IntegrationConfig(content_cluster_sample=10)
    labels = _content_clusters_of(vectors, config)
    assert labels.shape == (40,) and len(set(labels)) == 2
    assert all(len(set(labels[groups == g])) == 1 for g in (0, 1))
    assert np.array_equal(labels, _content_clusters_of(vectors, config))  # the seed draws the same sample


def test_content_does_not_chain_into_one_cluster_along_near_neighbours():
    # points along a quarter circle, each close to the next: merged along nearest neighbours they chain into one
    # cluster, though the two ends are orthogonal; average linkage over every pair keeps them apart
    angles = np.linspace(0.0, np.pi / 2, 60)
    arc = np.zeros((60, 8))
    arc[:, 0], arc[:, 1] = np.cos(angles), np.sin(angles)
    config = IntegrationConfig(content_cluster_distance=0.1, centre_content_clusters=False)
    assert len(set(structural_clusters(arc, 0.1, nearest_neighbours(arc, 15)))) == 1
    labels = _content_clusters_of(arc, config)
    assert len(set(labels)) > 1 and labels[0] != labels[-1]


def test_each_kind_of_pair_is_standardized_by_its_own_spread():
    # within one domain the cosines spread wide (sd 0.2), across domains narrow (sd 0.05)
    within = np.array([0.2, 0.6, 0.4, 0.8, 0.0])
    across = np.array([0.15, 0.25, 0.2, 0.275, 0.125])
    cosines = np.concatenate([within, across])
    cross = np.array([False] * 5 + [True] * 5)
    across_mean, within_mean, across_spread, within_spread = kind_stats(cosines, cross, scale=True)
    assert (across_mean, within_mean) == (np.mean(across), np.mean(within))
    assert np.isclose(across_spread, across.std()) and np.isclose(within_spread, within.std())
    assert kind_stats(cosines, cross, scale=False)[2:] == (1.0, 1.0)
    # a same-domain pair two of its kind's spreads below its mean is as unusual as a cross-domain pair two of its
    # kind's spreads below its own: the content discount credits them alike (a pooled spread would credit the
    # same-domain pair about three times as much, and the null drawn from such pairs would be out of reach)
    content = np.array([within.mean() - 2 * within.std(), across.mean() - 2 * across.std()])
    structural = np.array([0.5, 0.5])
    kind = np.array([False, True])
    flat = kind_stats(np.full(4, 0.5), np.array([False, False, True, True]), True)  # no spread: 1, never 0
    assert flat == (0.5, 0.5, 1.0, 1.0)
    centres = (flat, kind_stats(cosines, cross, True))
    scores = differential_scores(IntegrationConfig().differential, structural, content, kind, centres)
    assert np.isclose(scores[0], scores[1]) and np.isclose(scores[0], 2.0)


def _row(signature: dict) -> SignatureRow:
    parsed = StructuralSignature.model_validate(signature)
    return SignatureRow("r", "h", "d", "m", "p", "a", parsed.model_dump(mode="json"), canonical_text(parsed), 0)


SKELETON = {
    "variables": [{"name": "A", "kind": "rate"}, {"name": "B", "kind": "signal"}],
    "relations": [
        {"source": "A", "effect": "increases", "target": "B"},
        {"source": "B", "effect": "decreases", "target": "A"},
    ],
    "thresholds": [{"variable": "A", "side": "above", "consequence": "release"}],
    "dynamics": ["decay"],
}


def test_the_feature_set_tells_one_skeleton_from_its_near_miss():
    same = {**SKELETON, "variables": [{"name": "C", "kind": "rate"}, {"name": "D", "kind": "signal"}]}
    same = {
        **same,
        "relations": [
            {"source": "C", "effect": "increases", "target": "D"},
            {"source": "D", "effect": "decreases", "target": "C"},
        ],
        "thresholds": [{"variable": "C", "side": "above", "consequence": "release"}],
    }
    near = {**SKELETON, "dynamics": ["decay", "delay"]}  # one dynamic more
    rows = [_row(SKELETON), _row(same), _row(near)]
    vectors = feature_vectors(rows)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.isclose(vectors[0] @ vectors[1], 1.0)  # other letters, one skeleton
    features = [signature_features(StructuralSignature.model_validate(row.signature)) for row in rows]
    shared = len(features[0] & features[2])
    expected = shared / np.sqrt(len(features[0]) * len(features[2]))
    assert np.isclose(vectors[0] @ vectors[2], expected) and expected < 0.95
