"""The one result record every benchmark writes: an exact JSON round trip, unknown fields refused, provenance
with the code revision, the clean flag and each dataset checked against the pins of the protocols' eval.yaml,
and a rerun that replaces a result file says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from protocols.evals.benchmark import (
    BenchmarkResult,
    build_provenance,
    code_revision,
    dataset_provenance,
    jsonable,
    write_result,
)
from protocols.evals.registry import EVALS_ROOT, ProtocolRegistry

REPO = Path(__file__).resolve().parents[3]


def _record(tmp_path: Path, **overrides) -> BenchmarkResult:
    data = tmp_path / "data.json"
    data.write_text('[{"question": "q"}]')
    fields = {
        "benchmark": "recall",
        "metrics": {"latency": {"search": {"p50_ms": 11.785, "n": 200}}, "ratio": 1.435, "ok": True},
        "checks": {"recall_p95_ms": {"value": 21.01, "target": "<= 50.0", "pass": True}},
        "config": {"args": {"queries": 200}, "targets": {"recall_p95_ms": 50.0}},
        "rows": [{"query": 0, "search_ms": 10.5, "recall_ms": 14.0}, {"query": 1, "search_ms": 9.0, "recall_ms": 13.0}],
        "provenance": build_provenance(
            embedder_id="fake/embedder@1",
            datasets=[dataset_provenance(data)],
            seeds={"order": 7},
            wall_seconds=1.23456,
            load={"before": [0.5, 0.4, 0.3]},
            extra={"cache": {"hits": 3}},
        ),
    }
    return BenchmarkResult(**{**fields, **overrides})


def test_a_result_round_trips_through_json_exactly(tmp_path):
    result = _record(tmp_path)
    text = result.to_json()
    again = BenchmarkResult.from_json(text)
    assert again == result and again.to_json() == text
    data = json.loads(text)
    assert list(data) == ["format", "benchmark", "metrics", "checks", "config", "rows", "provenance"]
    assert data["metrics"]["latency"]["search"]["n"] == 200 and isinstance(
        data["metrics"]["latency"]["search"]["n"], int
    )
    assert again.rows[1]["recall_ms"] == 13.0 and again.provenance.wall_seconds == 1.235
    assert again.all_pass is True and _record(tmp_path, checks={}).all_pass is None
    failing = _record(tmp_path, checks={"x": {"value": 1, "pass": False}, "y": {"value": 2, "pass": True}})
    assert failing.all_pass is False


def test_a_file_that_is_not_a_result_record_is_refused_naming_the_field(tmp_path):
    data = _record(tmp_path).to_dict()
    with pytest.raises(RecordFormatError, match="field 'surprise'"):
        BenchmarkResult.from_dict({**data, "surprise": 1}, path="r.json")
    with pytest.raises(RecordFormatError, match="field 'provenance.tree_clean'"):
        BenchmarkResult.from_dict({**data, "provenance": {**data["provenance"], "tree_clean": "maybe"}})
    legacy = {"benchmark": "recall", "latency": {}, "provenance": {"code_version": "0.1.0"}}
    with pytest.raises(RecordFormatError, match="r.json, field 'format': not a benchmark result of format 1"):
        BenchmarkResult.from_dict(legacy, path="r.json")
    with pytest.raises(RecordFormatError, match="not JSON"):
        BenchmarkResult.from_json("{", path="r.json")


def test_provenance_names_the_revision_the_clean_flag_cores_versions_and_date(tmp_path):
    from lca.provenance import code_version

    prov = _record(tmp_path).provenance
    assert prov.code_version == code_version()
    if (REPO / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{7,12}", prov.revision or "")
        assert prov.tree_clean is (not code_version().endswith(".dirty"))
    assert prov.cores["cpu_count"] and prov.cores["affinity"] and prov.cores["affinity"] <= prov.cores["cpu_count"]
    assert set(prov.versions) == {"numpy", "faiss", "torch", "sentence_transformers", "bm25s"}
    assert prov.versions["numpy"]  # read from the installed distribution
    assert prov.date[:2] == "20" and prov.seeds == {"order": 7} and prov.embedder_id == "fake/embedder@1"
    assert prov.load == {"before": [0.5, 0.4, 0.3]} and prov.extra == {"cache": {"hits": 3}}


def test_code_revision_reads_the_code_version():
    assert code_revision("0.1.0+g6c35e5987566") == ("6c35e5987566", True)
    assert code_revision("0.1.0+g8db5e2f9ac2b.dirty") == ("8db5e2f9ac2b", False)
    assert code_revision("0.1.0") == (None, None)  # not from a checkout


def _registry_pinning(tmp_path: Path, sha256: str) -> ProtocolRegistry:
    """A protocol registry whose locomo dataset pins ``sha256``."""
    folder = tmp_path / "evals" / "locomo"
    folder.mkdir(parents=True)
    text = (EVALS_ROOT / "locomo" / "eval.yaml").read_text()
    (folder / "eval.yaml").write_text(re.sub(r"sha256: [0-9a-f]{64}", f"sha256: {sha256}", text))
    return ProtocolRegistry(tmp_path / "evals")


def test_a_dataset_is_official_only_when_its_sha256_is_pinned(tmp_path):
    import hashlib

    official = tmp_path / "locomo10.json"
    official.write_text('[{"sample_id": "conv-1"}]')
    pin = hashlib.sha256(official.read_bytes()).hexdigest()
    registry = _registry_pinning(tmp_path, pin)
    pinned = dataset_provenance(official, "locomo", registry=registry)
    assert (pinned.name, pinned.sha256, pinned.pinned_sha256, pinned.official) == ("locomo", pin, pin, True)
    assert dataset_provenance(official, registry=registry).name == "locomo"  # named by the pin it matches

    edited = tmp_path / "locomo10-edited.json"
    edited.write_text('[{"sample_id": "conv-2"}]')
    changed = dataset_provenance(edited, "locomo", registry=registry)
    assert (changed.name, changed.pinned_sha256, changed.official) == ("locomo", pin, False)
    assert changed.sha256 != pin
    unnamed = dataset_provenance(edited, registry=registry)
    assert (unnamed.name, unnamed.pinned_sha256, unnamed.official) == (None, None, False)


def test_the_pins_come_from_the_protocols_eval_yaml():
    from protocols.evals import protocol_metadata
    from protocols.evals.benchmark import pinned_datasets

    pins = pinned_datasets()
    assert pins["locomo"] == protocol_metadata("locomo").dataset("locomo").sha256
    assert pins["longmemeval_s_dev"] == protocol_metadata("longmemeval").dataset("longmemeval_s_dev").sha256


def test_a_rerun_replaces_the_result_file_and_says_which_run_it_held(tmp_path, capsys):
    out = tmp_path / "sub" / "recall.json"
    first = _record(tmp_path)
    assert write_result(first, out) is None
    assert capsys.readouterr().err == "" and BenchmarkResult.read(out) == first
    second = _record(tmp_path, metrics={"ratio": 2.0})
    note = write_result(second, out)
    assert note is not None and f"replaced {out}" in note and first.provenance.date in note
    assert first.provenance.code_version in note and note in capsys.readouterr().err
    assert BenchmarkResult.read(out) == second
    assert [p.name for p in out.parent.iterdir()] == ["recall.json"]  # no temporary file left behind


def test_jsonable_turns_config_objects_into_plain_json():
    from lca.recall import RecallConfig

    config = jsonable({"recall": RecallConfig(), "path": Path("a/b"), "pair": (1, 2)})
    assert config["recall"]["floor"] == RecallConfig().floor and isinstance(config["recall"]["weights"], dict)
    assert config["path"] == "a/b" and config["pair"] == [1, 2]
    json.dumps(config)
