"""The recall log stays under its bound (issue 53): rotated, compacted, oldest segments dropped, read across
segments by the cycle and rewound by the imprinting bench; health reports its size; bad bounds are refused."""

from __future__ import annotations

import json
import random

import pytest

from lca.consolidation.cycle import Consolidator
from lca.errors import RecordFormatError
from lca.recall import RecallConfig, RecallContext
from lca.recall_log import MIN_MAX_BYTES, RecallLog
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def record(n: int, rng: random.Random) -> dict:
    """About the size of a real record (24 KB with its candidate rows), and about as compressible."""
    rows = [
        {"source": f"transcript:s#{rng.randrange(10**6)}", "score": rng.random(), "injected": rng.random() < 0.1}
        for _ in range(300)
    ]
    return {"at": 1000.0 + n, "n": n, "candidates": rows}


def test_the_log_stays_under_its_bound_and_keeps_the_newest_records(tmp_path):
    log = RecallLog(tmp_path / "logs" / "recall.jsonl", max_bytes=MIN_MAX_BYTES)
    rng = random.Random(7)
    sizes = []
    for n in range(1500):  # about 36 MB of records through a 1 MiB bound
        log.append(record(n, rng))
        if n % 25 == 0:
            sizes.append(log.size().bytes)
    size = log.size()
    assert max(sizes) <= MIN_MAX_BYTES and size.bytes <= MIN_MAX_BYTES
    assert size.segments >= 2 and size.dropped_segments > 0
    kept = [r["n"] for r in log.records()]
    assert kept == list(range(kept[0], 1500))  # contiguous, oldest first, ending with the newest
    assert kept[0] > 0  # the oldest were dropped
    newest = [json.loads(line)["n"] for _, line in zip(range(3), log.lines_backwards(), strict=False)]
    assert newest == [1499, 1498, 1497]


def test_the_cycle_finds_what_was_injected_in_a_rotated_segment(tmp_path):
    path = tmp_path / "recall.jsonl"
    log = RecallLog(path, max_bytes=MIN_MAX_BYTES)
    rng = random.Random(1)
    log.append({"at": 5000.0, "candidates": [{"source": "memory:rotated-rule[0:9]", "injected": True}]})
    for n in range(60):  # enough to rotate the first record into a compacted segment
        log.append({**record(n, rng), "at": 5001.0 + n})
    assert log.size().segments >= 1
    assert "rotated-rule" in Consolidator._injected_since(path, since=4000.0)
    assert "rotated-rule" not in Consolidator._injected_since(path, since=5000.5)


def test_a_rewind_undoes_a_rotation_byte_for_byte(tmp_path):
    path = tmp_path / "recall.jsonl"
    log = RecallLog(path, max_bytes=MIN_MAX_BYTES)
    rng = random.Random(3)
    for n in range(15):
        log.append(record(n, rng))
    before_bytes, before_state = path.read_bytes(), log.state()
    segments = sorted(p.name for p in tmp_path.iterdir())
    for n in range(15, 40):  # the probes: they rotate the active file away
        log.append(record(n, rng))
    assert log.state() != before_state
    log.rewind(before_state)
    assert path.read_bytes() == before_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == segments


@pytest.mark.parametrize("bad", [0, MIN_MAX_BYTES - 1, "64MB", True, 1.5e6])
def test_a_bound_that_is_not_an_integer_of_at_least_a_mebibyte_is_refused_naming_the_field(bad):
    with pytest.raises(RecordFormatError) as caught:
        RecallConfig.from_mapping({"log_max_bytes": bad}, source="recall.yaml")
    assert caught.value.field == "log_max_bytes" and "recall.yaml" in str(caught.value)


def test_recall_writes_through_the_bounded_log_health_reports_it_and_a_replica_writes_nothing(tmp_path):
    config = RecallConfig(floor=0.0, log_max_bytes=MIN_MAX_BYTES)
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder(), recall_config=config) as s:
        s.append([make_entry("s", n, f"turn {n} about the deploy rota") for n in range(1, 6)])
        for _ in range(3):
            s.recall(RecallContext("when is the deploy rota"))
        check = s.health().check("recall_log")
        assert check.status.value == "ok" and check.data["max_bytes"] == MIN_MAX_BYTES
        assert check.data["bytes"] == s.layout.recall_log.stat().st_size > 0
        assert len(s.layout.recall_log.read_text().splitlines()) == 3
        # a log from before rotation, bigger than the bound, is named until the next recall rotates it
        with open(s.layout.recall_log, "ab") as handle:
            handle.write((json.dumps({"at": 1.0, "pad": "x" * 100}) + "\n").encode() * 15000)
        assert s.health().check("recall_log").status.value == "warn"
        s.recall(RecallContext("when is the deploy rota"))
        assert s.health().check("recall_log").status.value == "ok"
    from lca.bundle import export_bundle, import_bundle

    export_bundle(tmp_path / "store", tmp_path / "b")
    import_bundle(tmp_path / "b", tmp_path / "replica", rebuild=lambda root: None)
    with Substrate(tmp_path / "replica", embedder=FakeHashingEmbedder(), recall_config=config) as replica:
        replica.reindex()
        before = replica.recall_log().size().bytes
        replica.recall(RecallContext("when is the deploy rota"))
        assert replica.recall_log().size().bytes == before
