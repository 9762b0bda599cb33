"""Fitting the recall floor to one store: above off-topic questions, below on-topic restatements."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lca.calibration import calibrate_floor, load_queries
from lca.errors import RecordFormatError
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def test_calibrate_floor_separates_off_topic_from_on_topic(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry(
                    "s",
                    n,
                    f"the build pipeline for service {n} failed on step {n % 4} after the cache "
                    f"migration and we rolled back release {n}",
                )
                for n in range(1, 40)
            ]
        )
        result = calibrate_floor(
            s.index, ["what is the capital of peru", "how do whales sleep", "who wrote war and peace"], positives=30
        )
        assert result.negatives == 3 and result.positives == 30
        assert result.margin > 0 and result.positives_above_floor > 0.9
        top = [score for score, _, _ in result.highest_negatives]
        assert top == sorted(top, reverse=True) and top[0] >= result.floor
        s.save_recall_setting("floor", result.floor)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        assert s.recall_config.floor == result.floor  # persisted in <store>/recall.yaml
        with pytest.raises(RecordFormatError) as info:
            s.save_recall_setting("floor", 7.0)
        assert info.value.field == "floor"
        assert s.recall_config.floor == result.floor


def test_queries_file_skips_blank_and_comment_lines(tmp_path):
    path = tmp_path / "off_topic.txt"
    path.write_text("# off-topic probes\nwhat is the capital of peru\n\n  # indented comment\n how do whales sleep \n")
    assert load_queries(path) == ["what is the capital of peru", "how do whales sleep"]


def test_calibration_needs_a_negative(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        with pytest.raises(ValueError, match="at least one off-topic query"):
            calibrate_floor(s.index, [])


def test_off_topic_injection_rate_under_both_floors_is_measured_held_out(tmp_path):
    from lca.calibration import off_topic_injection
    from lca.recall import RecallConfig
    from lca.recall.floor import held_out_profile, store_profile

    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("s", 1, "sister lucia works night shifts nurse santa maria hospital lisbon"),
                make_entry("s", 2, "garage booked truck four thirteenth"),
                make_entry("s", 3, "capital of peru lima mountains"),
            ]
        )
        queries = ["what is the capital of peru", "how do whales sleep", "who wrote war and peace", "why is sky blue"]
        own = store_profile(s.index)
        out = off_topic_injection(s, queries, RecallConfig(), folds=2)
        assert store_profile(s.index) is own  # each fold read a refitted profile; the store's own is back after
        with held_out_profile(s.index, replace(own, ceiling=0.3)):  # recall reads the profile it is handed
            assert s.recall("why is sky blue", config=RecallConfig()).floor == pytest.approx(0.35)
        assert s.recall("why is sky blue", config=RecallConfig()).floor == pytest.approx(
            min(0.5, max(0.2, own.ceiling + 0.05)), abs=1e-6
        )
        assert out["queries"] == 4 and len(out["store_floor_by_fold"]) == 2
        assert all(0.2 <= f <= 0.5 for f in out["store_floor_by_fold"])
        # the store talks about peru's capital: a high-scoring "off-topic" question is listed, not hidden
        assert 0.0 <= out["absolute_rate"] <= out["store_rate_held_out"] <= 1.0
        assert set(out["absolute_injected"]) <= set(out["store_injected"]) <= set(queries)
        with pytest.raises(ValueError):
            off_topic_injection(s, [])


def test_primed_off_topic_questions_are_not_embedded_again_and_give_the_same_ceiling(tmp_path, monkeypatch):
    import lca.recall.floor as floor

    asked: list[str] = []

    class FakeQueryCountingEmbedder(FakeHashingEmbedder):
        def embed_query(self, text):
            asked.append(text)
            return super().embed_query(text)

    entries = [make_entry("s", n, f"the deploy of service {n} failed on the cache step") for n in range(1, 12)]
    ceilings = []
    for primed in (False, True):
        monkeypatch.setattr(floor, "_query_vectors", {})
        asked.clear()
        if primed:
            assert floor.prime_off_topic(FakeQueryCountingEmbedder())
            assert len(asked) == len(load_queries(floor.OFF_TOPIC_QUERIES)) > 0
        asked.clear()
        with Substrate(tmp_path / str(primed), embedder=FakeQueryCountingEmbedder()) as s:
            s.append(entries)
            ceilings.append(floor.off_topic_ceiling(s.index))
        assert len(asked) == (0 if primed else len(load_queries(floor.OFF_TOPIC_QUERIES)))
    assert ceilings[0] is not None and ceilings[0] == pytest.approx(ceilings[1], abs=1e-6)


def test_priming_with_an_embedder_that_gives_a_zero_vector_keeps_nothing(monkeypatch):
    import numpy as np

    import lca.recall.floor as floor

    class FakeZeroEmbedder(FakeHashingEmbedder):
        def embed_query(self, text):
            return np.zeros(self.dimension, dtype=np.float32)

    monkeypatch.setattr(floor, "_query_vectors", {})
    assert floor.prime_off_topic(FakeZeroEmbedder()) is False and floor._query_vectors == {}
