"""Fitting the recall floor to one store: above off-topic questions, below on-topic restatements."""

from __future__ import annotations

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
