"""`lca bench index` end to end on a tiny LongMemEval-format file with the fake embedder: every step runs, the
result has its sections, and the store the steps measure is the one the public index API describes."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from tests.fakes import FakeHashingEmbedder

TOPICS = ["kitchen faucet", "tax receipts", "garden tomatoes", "climbing gym", "lentil soup", "grey cat"]


def tiny_longmemeval(path: Path) -> Path:
    def session(n: int, topic: str) -> list[dict]:
        return [
            turn
            for i in range(3)
            for turn in (
                {
                    "role": "user",
                    "content": f"Session {n}, turn {i}: I keep thinking about the {topic}. "
                    f"It came up again on day {n * 3 + i}.",
                },
                {"role": "assistant", "content": f"Noted about the {topic}."},
            )
        ]

    records = []
    for q, topic in enumerate(TOPICS):
        ids = [f"s{q}_{j}" for j in range(3)]
        records.append(
            {
                "question_id": f"q{q}",
                "question_type": "single-session-user",
                "question": f"What did I say about the {topic}?",
                "answer": topic,
                "question_date": "2023/05/30 (Tue) 10:00",
                "haystack_session_ids": ids,
                "haystack_dates": [f"2023/05/{q * 3 + j + 1:02d} (Mon) 10:00" for j in range(3)],
                "haystack_sessions": [session(q * 3 + j, topic) for j in range(3)],
                "answer_session_ids": ids[:1],
            }
        )
    path.write_bytes(lzma.compress(json.dumps(records).encode()))
    return path


@pytest.fixture
def fake_model(monkeypatch):
    import lca.index.embedders as embedders

    monkeypatch.setattr(
        embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(dimension=128, max_input_tokens=200)
    )


@pytest.mark.parametrize("keys", ["off", "on"])
def test_index_bench_runs_every_step_and_writes_its_sections(tmp_path, fake_model, capsys, keys):
    from protocols.bench import benchmark

    bench = benchmark("index")
    data = tiny_longmemeval(tmp_path / "longmemeval_s_dev.json.xz")
    out = tmp_path / "index.json"
    args = bench.parser().parse_args(
        [
            "--data",
            str(data),
            "--chunks",
            "20",
            "--memory",
            "4",
            "--queries",
            "6",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
            "--fresh",
            "--sentence-keys",
            keys,
            "--sessions",
            "2",
            "--session-turns",
            "4",
            "--mode-sizes",
            "10,500",
        ]
    )
    assert bench.run(args) == 0
    from protocols.evals.benchmark import BenchmarkResult

    record = BenchmarkResult.read(out)
    assert record.benchmark == "index" and record.all_pass is not None
    result = record.metrics
    assert list(result) == [
        "transcript_ingest",
        "memory_ingest",
        "store",
        "index_size",
        "reingest",
        "latency",
        "search_modes",
        "incremental",
    ]
    assert set(record.checks) == {
        "incremental_session_seconds",
        "hybrid_p50_ms",
        "hybrid_p95_ms",
        "index_bytes_per_chunk_beyond_text",
        "reingest_embeds_nothing",
        "ingest_with_detector_ratio",
    }
    assert record.checks["ingest_with_detector_ratio"]["value"] == result["transcript_ingest"]["detector_ratio"]
    prov = record.provenance
    assert prov.embedder_id and prov.seeds == {"selection": 20240607} and prov.wall_seconds > 0
    (dataset,) = prov.datasets
    assert (dataset.name, dataset.path, dataset.official) == ("longmemeval_s_dev", str(data), False)  # not the pin
    assert dataset.pinned_sha256 and dataset.sha256 != dataset.pinned_sha256
    assert prov.cores["cpu_count"] and prov.cores["affinity"]
    assert prov.load and set(prov.load) == {"before_ingest", "after_queries"}
    assert prov.extra["dataset_load"]["questions_sessions_distinct"] == 18
    assert result["transcript_ingest"]["new_chunks"] >= 20 and result["memory_ingest"]["files_written"] == 4
    stats = result["store"]["catalog_stats"]
    assert stats["chunks"] == result["transcript_ingest"]["new_chunks"] + result["memory_ingest"]["new_chunks"]
    assert (stats["sentence_keys"] > 0) == (keys == "on")
    assert result["index_size"]["text_bytes"] == stats["text_bytes"]
    assert set(result["index_size"]["groups_bytes"]) == {"catalog", "vectors", "lexical", "other"}
    assert result["reingest"]["embedded_texts"] == 0 and record.checks["reingest_embeds_nothing"]["pass"]
    incremental = result["incremental"]  # two sessions the store did not hold, four turns each, one at a time
    runs = incremental["runs"]
    assert [r["turns"] for r in runs] == [4, 4] and len({r["session"] for r in runs}) == 2
    assert all(r["new_chunks"] >= 4 and r["lexical_seconds"] > 0 and r["phases"]["faiss_save"]["calls"] for r in runs)
    assert incremental["chunks_before"] == stats["chunks"]
    rebuild = incremental["lexical_rebuild"]
    assert rebuild["documents"] == stats["chunks"] + sum(r["new_chunks"] for r in runs) and len(rebuild["seconds"]) == 2
    assert incremental["lexical_over_rebuild"] == round(
        incremental["lexical_seconds_median"] / rebuild["median_seconds"], 5
    )
    assert record.checks["incremental_session_seconds"]["value"] == incremental["ingest_seconds_median"]
    latency = result["latency"]
    assert latency["queries"] == 6 and set(latency["stats"]) == {
        "hybrid",
        "baseline_numpy",
        "query_embedding",
        "numpy_matmul_topk",
        "faiss_search",
        "bm25_search",
        "catalog_fetch",
    }
    assert latency["baseline_matrix"]["rows"] == result["store"]["vectors"]
    # the exact scan ranks what dense search ranks; faiss searches the vectors numpy scans
    assert latency["top10_overlap"]["dense_search_vs_numpy_mean"] == 1.0
    assert latency["top10_overlap"]["faiss_vs_numpy_mean"] >= 0.9  # ties at the 10th place may differ
    smaller, modes = result["search_modes"]["sizes"]  # a store of the first sessions, then the built one
    assert smaller["chunks"] < modes["chunks"] == stats["chunks"] and not (tmp_path / "work-modes-10").exists()
    assert modes["queries"] == 6 and modes["auto_is"] == "exact"  # tiny: exact ranks it whole, bounded its pools
    assert set(modes["stats"]) == {"exact", "bounded"} and all(m["n"] == 6 for m in modes["stats"].values())
    assert 0 < modes["top10_agreement_min"] <= modes["top10_agreement_mean"] <= 1
    assert record.config["args"]["sentence_keys"] == keys and record.config["targets"]["hybrid_p50_ms"] == 15.0
    captured = capsys.readouterr()
    assert "index benchmark" in captured.out and "exact / bounded" in captured.out and "replaced" not in captured.err

    assert bench.run(args) == 0  # a rerun to the same file replaces it and says so
    assert f"note: replaced {out} (it held the index run of {prov.date}" in capsys.readouterr().err


def test_index_bench_says_where_it_looked_when_the_dataset_is_missing(tmp_path, monkeypatch, capsys):
    import protocols.evals.data_paths as data_paths
    from protocols.bench import benchmark

    monkeypatch.setattr(data_paths, "find_data_file", lambda name, given=None: None)
    bench = benchmark("index")
    args = bench.parser().parse_args(
        ["--data", str(tmp_path / "nope"), "--out", str(tmp_path / "x.json"), "--work", str(tmp_path / "work")]
    )
    assert bench.run(args) == 2
    err = capsys.readouterr().err
    assert "LongMemEval_S dev file" in err and str(tmp_path / "nope") in err
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "work").exists()


def test_recall_bench_writes_its_record_on_the_index_benchmarks_store(tmp_path, fake_model, capsys):
    from protocols.bench import benchmark
    from protocols.evals.benchmark import BenchmarkResult

    data = tiny_longmemeval(tmp_path / "longmemeval_s_dev.json.xz")
    work, out = tmp_path / "work", tmp_path / "recall.json"
    index = benchmark("index")
    common = ["--data", str(data), "--work", str(work)]
    index_args = ["--chunks", "20", "--memory", "4", "--queries", "6", "--out", str(tmp_path / "index.json")]
    assert index.run(index.parser().parse_args([*common, *index_args])) == 0
    recall = benchmark("recall")
    args = ["--queries", "6", "--token-queries", "3", "--gravity-queries", "300", "--out", str(out)]
    assert recall.run(recall.parser().parse_args([*common, *args])) == 0
    record = BenchmarkResult.read(out)
    assert list(record.metrics) == ["store", "latency", "injected_tokens_per_turn", "gravity_well"]
    assert record.metrics["latency"]["recall"]["n"] == 6 and len(record.rows) == 6
    assert all(row["search_ms"] > 0 and row["recall_ms"] > 0 for row in record.rows)
    assert record.checks["recall_p95_ms"]["target"] == "<= 50.0"
    assert record.config["args"]["queries"] == 6 and "floor" in record.config["recall_config"]
    prov = record.provenance
    assert prov.embedder_id and prov.datasets[0].name == "longmemeval_s_dev" and prov.seeds["order"] == 7
    assert "recall benchmark on" in capsys.readouterr().out
