"""The differential's declared compositions and the null model's threshold, on numbers small enough to check."""

from __future__ import annotations

import numpy as np
import pytest

from lca.errors import RecordFormatError
from lca.insight.differential import COMPOSITIONS, DIFFERENTIAL_COMPOSITIONS, DifferentialConfig
from lca.insight.null_model import null_threshold

STRUCTURAL = np.array([0.95, 0.40, 0.90, 0.30])
CONTENT = np.array([0.05, 0.80, 0.70, 0.10])  # a rhyme, a topical neighbour, alike in both, unlike in both


def test_every_composition_is_declared_whole_and_named_once():
    assert len(set(COMPOSITIONS)) == len(DIFFERENTIAL_COMPOSITIONS) >= 4
    for row in DIFFERENTIAL_COMPOSITIONS:
        assert row.formula and row.description
        scores = DifferentialConfig(row.name).score(STRUCTURAL, CONTENT)
        assert scores.shape == STRUCTURAL.shape and np.isfinite(scores).all()


def test_the_discount_puts_the_rhyme_first_and_the_topical_neighbour_last():
    discounted = DifferentialConfig("discounted").score(STRUCTURAL, CONTENT)
    assert np.allclose(discounted, STRUCTURAL - CONTENT)
    assert int(np.argmax(discounted)) == 0 and int(np.argmin(discounted)) == 1
    product = DifferentialConfig("product", content_weight=1.0).score(STRUCTURAL, CONTENT)
    assert np.allclose(product, STRUCTURAL * (1 - CONTENT))
    # the baseline the paper argues against ranks the topical neighbour first
    assert int(np.argmax(DifferentialConfig("content-only").score(STRUCTURAL, CONTENT))) == 1
    assert np.allclose(DifferentialConfig("structural-only").score(STRUCTURAL, CONTENT), STRUCTURAL)


def test_the_content_weight_scales_the_discount_and_zero_turns_it_off():
    half = DifferentialConfig(content_weight=0.5).score(STRUCTURAL, CONTENT)
    assert np.allclose(half, STRUCTURAL - 0.5 * CONTENT)
    assert np.allclose(DifferentialConfig(content_weight=0.0).score(STRUCTURAL, CONTENT), STRUCTURAL)


def test_ablations_name_every_other_composition():
    ablations = DifferentialConfig("discounted", 0.7).ablations()
    assert set(ablations) == set(COMPOSITIONS) - {"discounted"}
    assert all(config.content_weight == 0.7 for config in ablations.values())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"composition": "cosine"}, None),
        ({"content_weight": -1}, "content_weight"),
        ({"content_weight": True}, "content_weight"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(RecordFormatError) as caught:
        DifferentialConfig(**kwargs)
    assert caught.value.field == field
    if field is None:
        assert "discounted" in str(caught.value)  # the known names are listed


def test_the_max_statistic_is_the_quantile_of_the_best_spurious_score():
    # four records, two domains; pair scores: (0,1) same domain 0.2, (2,3) same domain 0.6, the rest cross-domain
    domains = ["a", "a", "b", "b"]
    first, second = np.array([0, 2, 0, 1, 0, 1]), np.array([1, 3, 2, 3, 3, 2])
    scores = np.array([0.2, 0.6, 0.9, 0.1, 0.1, 0.1])
    null = null_threshold(first, second, scores, domains, shuffles=300, quantile=0.5, seed=1, statistic="max")
    assert null.threshold is not None and null.informative_shuffles > 0
    assert set(null.best_spurious) <= {0.2, 0.6}  # only same-domain pairs are ever spurious
    assert null.threshold == 0.6
    again = null_threshold(first, second, scores, domains, shuffles=300, quantile=0.5, seed=1, statistic="max")
    assert again == null  # seeded
    # a same-domain pair the rules would never surface cannot be spurious
    only_low = null_threshold(
        first,
        second,
        scores,
        domains,
        eligible=np.array([True, False, True, True, True, True]),
        shuffles=300,
        quantile=0.5,
        seed=1,
        statistic="max",
    )
    assert only_low.threshold == 0.2


def _same_domain_pairs(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``count`` pairs within one of ten domains of 400 records each, scored from one standard normal: the null's
    material, more of it as a store grows."""
    rng = np.random.default_rng(seed)
    domains = [f"d{i % 10}" for i in range(4000)]
    first = rng.integers(0, 4000, count)
    second = (first + 10 * rng.integers(1, 400, count)) % 4000  # the same domain, another record
    return first, second, rng.normal(size=count), domains


def test_the_tail_statistic_stays_put_as_the_same_domain_pairs_grow_and_the_max_does_not():
    thresholds, summaries = {}, {}
    for statistic in ("tail", "max"):
        for count in (2_000, 40_000):
            first, second, scores, domains = _same_domain_pairs(count, seed=count)
            null = null_threshold(
                first, second, scores, domains, shuffles=40, quantile=0.95, seed=0, statistic=statistic, tail=0.01
            )
            assert null.statistic == statistic and null.spurious_pairs == count
            thresholds[statistic, count] = null.threshold
            summaries[statistic, count] = null.summary()
    # the pooled scores' upper 1%: the normal's 0.99 quantile (2.33) at either size
    assert abs(thresholds["tail", 2_000] - 2.33) < 0.25 and abs(thresholds["tail", 40_000] - 2.33) < 0.1
    # each shuffle's best of 20 times as many pairs: the family-wise threshold climbs with them
    assert thresholds["max", 40_000] > thresholds["max", 2_000] + 0.3 > 3.0
    # the same shuffles: the tail's record says what the max would have set
    assert summaries["tail", 40_000]["max_statistic_threshold"] == thresholds["max", 40_000]


def test_the_tail_threshold_pools_every_shuffle_and_is_seeded():
    first, second, scores, domains = _same_domain_pairs(500, seed=3)
    null = null_threshold(first, second, scores, domains, shuffles=30, quantile=0.95, seed=2, tail=0.1)
    assert null.tail == 0.1 and null.pooled_spurious > 500  # spurious pairs of 30 shuffles, pooled
    assert null.threshold is not None and 1.0 < null.threshold < 1.6  # the normal's 0.9 quantile is 1.28
    assert null == null_threshold(first, second, scores, domains, shuffles=30, quantile=0.95, seed=2, tail=0.1)
    with pytest.raises(ValueError, match="statistic"):
        null_threshold(first, second, scores, domains, shuffles=30, quantile=0.95, seed=2, statistic="mean")


def test_no_threshold_when_nothing_can_be_spurious():
    null = null_threshold(np.array([0]), np.array([1]), np.array([0.9]), ["a", "b"], shuffles=50, quantile=0.95, seed=0)
    assert null.threshold is None and "nothing can be spurious" in (null.reason or "")
