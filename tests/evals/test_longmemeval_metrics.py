"""LongMemEval retrieval metrics: hand-checked cases, and the BM25 baseline the data README gives."""

from __future__ import annotations

import math

import pytest

from protocols.evals.longmemeval.retrieval_metrics import (
    at_k,
    average,
    question_units,
    score_ranking,
    turn_ranking_as_sessions,
)

RECORD = {
    "question_id": "q1",
    "haystack_session_ids": ["s_a", "answer_1", "answer_2"],
    "haystack_dates": ["2023/05/01 (Mon) 10:00"] * 3,
    "haystack_sessions": [
        [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}],
        [
            {"role": "user", "content": "my dog is Rex", "has_answer": True},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "bye", "has_answer": False},
        ],
        [
            {"role": "user", "content": "nothing here", "has_answer": False},
            {"role": "assistant", "content": "the answer is inside", "has_answer": True},
        ],
    ],
}


def test_units_follow_the_official_ids_and_noans_renaming():
    sessions = question_units(RECORD, "session")
    assert sessions.ids == ("s_a", "answer_1", "noans_2")  # no user-side has_answer: not gold
    assert sessions.texts[1] == "my dog is Rex bye" and sessions.gold == {"answer_1"}
    turns = question_units(RECORD, "turn")
    assert turns.ids == ("s_a_1", "answer_1_1", "noans_1_3", "noans_2_1")  # i counts every turn
    assert turns.gold == {"answer_1_1"}


def test_metrics_at_k_by_hand():
    ids = ["a", "answer_x", "b", "answer_y"]
    assert at_k([1, 0, 2, 3], ids, {"answer_x", "answer_y"}, 1) == (1.0, 0.0, 1.0)
    r_any, r_all, ndcg = at_k([0, 1, 2, 3], ids, {"answer_x", "answer_y"}, 4)
    assert (r_any, r_all) == (1.0, 1.0)
    assert ndcg == pytest.approx((1 / math.log2(2) + 1 / math.log2(4)) / (1 + 1 / math.log2(2)))
    assert at_k([0, 2], ids, set(), 2) == (0.0, 1.0, 0.0)  # no gold: any 0, all 1, ndcg 0


def test_turn_ranking_grows_k_to_cover_k_sessions():
    ids = ["s1_1", "s1_3", "answer_2_1", "s3_1"]
    # top 2 turns are both s1: k grows to 3 to cover two sessions, which brings in answer_2
    assert turn_ranking_as_sessions([0, 1, 2, 3], ids, {"answer_2_1"}, 2)[0] == 1.0
    assert turn_ranking_as_sessions([0, 1, 2, 3], ids, {"answer_2_1"}, 1)[0] == 0.0


def test_strict_drops_questions_without_gold_and_both_drop_abstention():
    def result(qid, has_gold, value):
        return {"question_id": qid, "has_gold": has_gold, "metrics": {"session": {"recall_any@5": value}, "turn": {}}}

    results = [result("a", True, 1.0), result("b", False, 0.0), result("c_abs", True, 0.0)]
    assert average(results, convention="strict") == {"n": 1, "session": {"recall_any@5": 1.0}, "turn": {}}
    assert average(results, convention="lenient")["session"]["recall_any@5"] == 0.5


@pytest.mark.slow
def test_bm25_baseline_of_the_data_readme_is_reproduced(longmemeval_s_dev):
    from rank_bm25 import BM25Okapi

    from lca.importers import load_official_json

    records = load_official_json(longmemeval_s_dev)
    runs = {"session": [], "turn": []}
    for record in records:
        for granularity in runs:
            units = question_units(record, granularity)
            scores = BM25Okapi([t.split(" ") for t in units.texts]).get_scores(record["question"].split(" "))
            ranking = sorted(range(len(scores)), key=lambda i: -scores[i])
            runs[granularity].append(
                {
                    "question_id": record["question_id"],
                    "has_gold": bool(units.gold),
                    "metrics": score_ranking(ranking, units, granularity),
                }
            )
    lenient = average(runs["session"], convention="lenient")
    strict = average(runs["session"], convention="strict")
    turn = average(runs["turn"], convention="strict")
    assert (lenient["n"], strict["n"], turn["n"]) == (230, 208, 208)
    expected = [
        (lenient, "session", "recall_all@5", 0.7652),
        (lenient, "session", "ndcg_any@5", 0.6933),
        (lenient, "session", "recall_all@10", 0.8348),
        (lenient, "session", "ndcg_any@10", 0.7128),
        (lenient, "session", "recall_any@5", 0.8000),
        (strict, "session", "recall_any@5", 0.8846),
        (strict, "session", "recall_all@5", 0.7404),
        (strict, "session", "ndcg_any@5", 0.7666),
        (strict, "session", "recall_any@10", 0.9183),
        (turn, "turn", "recall_any@5", 0.7212),
        (turn, "turn", "recall_all@5", 0.5240),
        (turn, "turn", "ndcg_any@5", 0.5425),
    ]
    for table, level, name, value in expected:
        assert table[level][name] == pytest.approx(value, abs=0.005), (level, name)
