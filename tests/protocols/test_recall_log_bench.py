"""``lca bench recall-log``'s soak loop over a real store (a fake embedder): the log rotates, compacts and drops
segments, never exceeds its bound, and what it keeps stays readable."""

from __future__ import annotations

import pytest

from lca.recall import RecallConfig
from lca.recall_log import MIN_MAX_BYTES
from lca.substrate import Substrate
from protocols.bench.recall_log import soak
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


@pytest.mark.slow  # a soak: 1,500 recalls, about 15 s
def test_the_log_stays_under_its_bound_while_recalls_go_on(tmp_path):
    config = RecallConfig(floor=0.0, log_max_bytes=MIN_MAX_BYTES)
    with Substrate(tmp_path / "s", embedder=FakeHashingEmbedder(), recall_config=config) as substrate:
        substrate.append(
            [make_entry("s1", n, f"note {n} about the deploy window and port {6000 + n}") for n in range(150)]
        )
        substrate.ingest()
        metrics = soak(substrate, ["which port", "deploy window", "note 7"], 1500, 50, progress=False)
        assert metrics["dropped_segments"] >= 1 and metrics["segments"] >= 1  # it rotated and dropped
        assert metrics["largest_bytes_seen"] <= metrics["max_bytes"] == MIN_MAX_BYTES
        assert 0 < metrics["records_readable"] < 1500  # the oldest went with their segments; the rest read back
        check = next(c for c in substrate.health().checks if c.name == "recall_log")
        assert check.status.value == "ok" and "dropped" in check.detail
