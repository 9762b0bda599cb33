from __future__ import annotations

import math

import numpy as np
import pytest

from lca.activation import (
    Access,
    RetrievalLog,
    activation_term,
    base_level_activation,
    memory_activations,
    query_shape,
    top_share,
    ucb_bonus,
)


def accesses(n: int, *, shapes: int, start: float = 0.0, step: float = 60.0) -> list[Access]:
    return [Access("m", start + i * step, i % shapes) for i in range(n)]


def test_fifty_different_queries_earn_more_than_one_query_fifty_times():
    now = 50 * 60.0 + 3600
    diverse = base_level_activation(accesses(50, shapes=50), now)
    repeated = base_level_activation(accesses(50, shapes=1), now)
    assert diverse > repeated + math.log(10)  # 50 shapes vs 1: the repeated query counts about once
    assert base_level_activation(accesses(50, shapes=1), now, diversity=False) == pytest.approx(diverse)


def test_power_law_decay_and_logarithmic_saturation():
    history = accesses(10, shapes=10)
    early = base_level_activation(history, 1_000.0)
    late = base_level_activation(history, 100_000.0)
    assert late < early
    # decay is a power law: 10x older accesses weigh 10^-0.5 as much
    single = [Access("m", 0.0, 1)]
    assert base_level_activation(single, 1000.0) - base_level_activation(single, 10_000.0) == pytest.approx(
        0.5 * math.log(10)
    )
    # saturation: doubling the (equally aged) history adds only ln 2
    many = [Access("m", 0.0, i) for i in range(200)]
    assert base_level_activation(many, 500.0) - base_level_activation(many[:100], 500.0) == pytest.approx(math.log(2))
    assert base_level_activation([], 10.0) == float("-inf") and activation_term(float("-inf")) == 0.0
    assert 0.0 < activation_term(early) < 1.0


def test_ucb_bonus_decays_with_examination_and_precision_mode_is_zero():
    assert ucb_bonus(0, 100, 1.0) > ucb_bonus(5, 100, 1.0) > ucb_bonus(50, 100, 1.0) > 0
    assert ucb_bonus(0, 100, 0.0) == 0.0


def test_query_shape_is_stable_and_separates_directions():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(64).astype(np.float32)
    assert query_shape(v) == query_shape(v * 3)
    assert query_shape(v) != query_shape(-v)


def test_retrieval_log_replays_history(tmp_path):
    log = RetrievalLog(tmp_path)
    log.record([Access("memory:a", 1.0, 3), Access("memory:a", 2.0, 4, wildcard=True), Access("memory:b", 2.0, 3)])
    again = RetrievalLog(tmp_path).by_target()
    assert [a.at for a in again["memory:a"]] == [1.0, 2.0] and again["memory:a"][1].wildcard
    assert len(again["memory:b"]) == 1


def test_top_share():
    assert top_share({"a": 90, "b": 5, "c": 5}, n_records=100) == pytest.approx(0.9)
    assert top_share({}, n_records=10) == 0.0


def test_a_memory_is_as_active_as_all_its_chunks_together_and_one_never_recalled_is_dormant():
    now = 10_000.0
    history = {
        "memory:m1[0:40]": [Access("memory:m1[0:40]", now - 60, 1)],
        "memory:m1[40:90]": [Access("memory:m1[40:90]", now - 120, 2)],
        "memory:m10[0:10]": [Access("memory:m10[0:10]", now - 5, 3)],  # another id with m1 as its prefix
        "transcript:s#e1[0:5]": [Access("transcript:s#e1[0:5]", now - 5, 4)],
    }
    got = memory_activations(history, ["m1", "m2"], now)
    pooled = [*history["memory:m1[0:40]"], *history["memory:m1[40:90]"]]
    assert got == {"m1": activation_term(base_level_activation(pooled, now)), "m2": 0.0}
    assert got["m1"] > activation_term(base_level_activation(history["memory:m1[0:40]"], now))
