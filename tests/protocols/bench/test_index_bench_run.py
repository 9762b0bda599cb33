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
        ]
    )
    assert bench.run(args) == 0
    result = json.loads(out.read_text())
    assert list(result) == [
        "benchmark",
        "targets",
        "transcript_ingest",
        "memory_ingest",
        "store",
        "index_size",
        "reingest",
        "latency",
        "checks",
        "all_pass",
        "provenance",
    ]
    assert result["transcript_ingest"]["new_chunks"] >= 20 and result["memory_ingest"]["files_written"] == 4
    stats = result["store"]["catalog_stats"]
    assert stats["chunks"] == result["transcript_ingest"]["new_chunks"] + result["memory_ingest"]["new_chunks"]
    assert (stats["sentence_keys"] > 0) == (keys == "on")
    assert result["index_size"]["text_bytes"] == stats["text_bytes"]
    assert set(result["index_size"]["groups_bytes"]) == {"catalog", "vectors", "lexical", "other"}
    assert result["reingest"]["embedded_texts"] == 0 and result["checks"]["reingest_embeds_nothing"]["pass"]
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
    assert result["provenance"]["args"]["sentence_keys"] == keys
    assert "index benchmark" in capsys.readouterr().out


def test_index_bench_says_where_it_looked_when_the_dataset_is_missing(tmp_path, monkeypatch, capsys):
    import protocols.data_paths as data_paths
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
