"""lca bench retrieval on small files in the official formats, with the fake embedder; temporal anchors."""

from __future__ import annotations

import json
import lzma
from datetime import datetime
from pathlib import Path

import pytest

import protocols.cli as cli
from lca.index.chunker import Chunker
from lca.temporal_anchor import anchor_weight, temporal_anchor
from protocols.bench.retrieval_bench import run_locomo, run_longmemeval
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]


def lme_file(tmp_path) -> Path:
    def session(texts, gold_turn=None):
        turns = []
        for i, text in enumerate(texts):
            turns.append({"role": "user", "content": text, **({"has_answer": i == gold_turn} if gold_turn is not None else {})})
            turns.append({"role": "assistant", "content": "noted"})
        return turns
    filler = [session([f"thoughts about topic {n} and weather {n}"]) for n in range(8)]
    records = [
        {"question_id": "q1", "question_type": "single-session-user", "question": "What breed is my dog Rex?",
         "answer": "a beagle", "question_date": "2023/05/30 (Tue) 10:00",
         "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_rex"],
         "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
         "haystack_sessions": filler + [session(["hello", "My dog Rex is a beagle"], gold_turn=1)],
         "answer_session_ids": ["answer_rex"]},
        {"question_id": "q2", "question_type": "temporal-reasoning", "question": "What did I cook two weeks ago?",
         "answer": "risotto", "question_date": "2023/05/30 (Tue) 10:00",
         "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_cook"],
         "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
         "haystack_sessions": filler + [session(["I made a mushroom risotto tonight"], gold_turn=0)],
         "answer_session_ids": ["answer_cook"]},
        {"question_id": "q3_abs", "question_type": "single-session-user", "question": "What is my cat's name?",
         "answer": "unknown", "question_date": "2023/05/30 (Tue) 10:00", "haystack_session_ids": ["s0"],
         "haystack_dates": ["2023/05/01 (Mon) 10:00"], "haystack_sessions": filler[:1], "answer_session_ids": []},
    ]
    path = tmp_path / "lme.json.xz"
    path.write_bytes(lzma.compress(json.dumps(records).encode()))
    return path


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid", "resonance"])
def test_longmemeval_retrieval_finds_the_evidence_and_drops_abstention(tmp_path, retriever):
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    report = run_longmemeval(lme_file(tmp_path), retriever, embedder=embedder, chunker=Chunker(embedder), limit=None,
                             progress=lambda x: x, workdir=tmp_path / "work")
    assert report["strict"]["n"] == 2 and report["lenient"]["n"] == 2 and report["questions"] == 3
    assert report["strict"]["session"]["recall_any@10"] == 1.0
    if retriever in ("bm25", "hybrid"):
        assert report["per_question"][0]["metrics"]["session"]["recall_any@1"] == 1.0   # "Rex" / "beagle" match
    if retriever == "hybrid":
        assert report["per_question"][1]["anchor"] == "two weeks ago"
        assert report["per_question"][1]["metrics"]["session"]["recall_any@1"] == 1.0   # the anchored day wins


def test_locomo_retrieval_on_the_committed_fixture(tmp_path):
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    report = run_locomo(REPO / "data" / "fixtures" / "locomo_fixture.json", "hybrid", embedder=embedder,
                        chunker=Chunker(embedder), limit=None, progress=lambda x: x, workdir=tmp_path)
    assert report["items"] == 3 and report["overall"]["recall@25"] == 1.0
    assert set(report["by_category"]) == {"1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "5 adversarial"}


def test_bench_retrieval_names_a_missing_data_path(tmp_path, capsys):
    assert cli.main(["bench", "retrieval", "--dataset", "locomo", "--data", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_temporal_anchors_read_relative_times_against_the_question_date():
    asked = datetime(2023, 4, 22, 8, 1)   # a Saturday
    assert temporal_anchor("Who did I go with last Saturday?", asked).target == datetime(2023, 4, 15)
    assert temporal_anchor("What did I plant two weeks ago?", asked).target == datetime(2023, 4, 8)
    assert temporal_anchor("What happened 5 days ago?", asked).target == datetime(2023, 4, 17)
    assert temporal_anchor("What did I do yesterday?", asked).target == datetime(2023, 4, 21)
    assert temporal_anchor("How many plants did I buy in the last month?", asked).tolerance_days == 15.0
    assert temporal_anchor("What is my dog's name?", asked) is None and temporal_anchor("x ago", None) is None
    anchor = temporal_anchor("two weeks ago", asked)
    assert anchor_weight(anchor, datetime(2023, 4, 8, 18)) == 1.0
    assert 0 < anchor_weight(anchor, datetime(2023, 4, 10)) < 1 and anchor_weight(anchor, datetime(2023, 3, 1)) == 0.0
