"""lca bench retrieval on small files in the official formats, with the fake embedder: every retriever asks a
real store built through the importers, and its ranking is the store's own."""

from __future__ import annotations

import argparse
import json
import lzma
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

import protocols.cli as cli
from lca.importers import file_sha256, import_locomo
from lca.params import ParameterError
from lca.recall import RecallContext
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from protocols.bench.retrieval.config import AskedConfig, dataset_config, grid_variants
from protocols.bench.retrieval.runners import run_dataset
from protocols.bench.retrieval.stores import HaystackStore
from protocols.bench.retrieval_bench import add_arguments, held_out
from protocols.evals.benchmark import BenchmarkResult
from protocols.evals.datasets import retrieval_spec
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"


def run(dataset, path, retriever, tmp_path, configs=None, **kw):
    return run_dataset(
        dataset,
        path,
        retriever,
        embedder=FakeHashingEmbedder(max_input_tokens=200),
        limit=None,
        progress=lambda x: x,
        workdir=tmp_path / "work",
        configs=configs or {"default": AskedConfig(RetrievalConfig())},
        **kw,
    )


def lme_file(tmp_path) -> Path:
    def session(texts, gold_turn=None):
        turns = []
        for i, text in enumerate(texts):
            answer = {"has_answer": i == gold_turn} if gold_turn is not None else {}
            turns.append({"role": "user", "content": text, **answer})
            turns.append({"role": "assistant", "content": "noted"})
        return turns

    filler = [session([f"thoughts about topic {n} and weather {n}"]) for n in range(8)]
    records = [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "What breed is my dog Rex?",
            "answer": "a beagle",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_rex"],
            "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
            "haystack_sessions": filler + [session(["hello", "My dog Rex is a beagle"], gold_turn=1)],
            "answer_session_ids": ["answer_rex"],
        },
        {
            "question_id": "q2",
            "question_type": "temporal-reasoning",
            "question": "What did I cook two weeks ago?",
            "answer": "risotto",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_cook"],
            "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
            "haystack_sessions": filler + [session(["I made a mushroom risotto tonight"], gold_turn=0)],
            "answer_session_ids": ["answer_cook"],
        },
        {
            "question_id": "q3_abs",
            "question_type": "single-session-user",
            "question": "What is my cat's name?",
            "answer": "unknown",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": ["s0"],
            "haystack_dates": ["2023/05/01 (Mon) 10:00"],
            "haystack_sessions": filler[:1],
            "answer_session_ids": [],
        },
    ]
    path = tmp_path / "lme.json.xz"
    path.write_bytes(lzma.compress(json.dumps(records).encode()))
    return path


def locomo_record() -> dict:
    turns_1 = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat last week."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "What did you name the cat?"},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "Pebble, after the beach stones."},
    ]
    turns_2 = [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "I started climbing at the Granite Loft gym."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Tax forms are due soon, ugh."},
    ]
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns_1,
            "session_2_date_time": "3:00 pm on 9 June, 2023",
            "session_2": turns_2,
            "session_3_date_time": "a date key with no session",
        },
        "qa": [
            {"question": "What is the name of Ana's cat?", "answer": "Pebble", "evidence": ["D1:3"], "category": 4},
            {
                "question": "Where did Ben start climbing on 7 June, 2023?",
                "answer": "Granite Loft",
                "evidence": ["D2:1; D9:99", "D"],
                "category": 4,
            },
            {
                "question": "What gym does Ben climb at?",
                "answer": "Granite Loft",
                "evidence": ["D:2:01"],
                "category": 4,
            },
        ],
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana named her new grey cat Pebble.", "D1:3"], ["Ana adopted a cat.", ["D1:1", "D1:3"]]]
            },
            "session_2_observation": {"Ben": [["Ben climbs at the Granite Loft gym.", "D2:1"]]},
        },
        "session_summary": {
            "session_1_summary": "Ana adopted a grey cat and named it Pebble.",
            "session_2_summary": "Ben took up climbing at the Granite Loft.",
        },
    }


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid", "resonance"])
def test_longmemeval_retrieval_finds_the_evidence_and_drops_abstention(tmp_path, retriever):
    configs = {"default": AskedConfig(dataset_config("longmemeval")), "rrf": AskedConfig(RetrievalConfig())}
    reports = run("longmemeval", lme_file(tmp_path), retriever, tmp_path, configs)
    report = reports["default"]
    assert report["strict"]["n"] == 2 and report["lenient"]["n"] == 2 and report["questions"] == 3
    # BM25 retrieves only turns sharing a term: "cook" never meets "made a risotto"
    assert report["strict"]["session"]["recall_any@10"] == (0.5 if retriever == "bm25" else 1.0)
    rows = report["per_question"]
    assert [r["question_id"] for r in rows] == ["q1", "q2", "q3_abs"] and rows[0]["question"].startswith("What breed")
    # user turns only are units: the assistant's "noted" never appears among the retrieved ids
    assert all(not unit.endswith("_2") for r in rows for unit in r["retrieved"])
    if retriever in ("bm25", "hybrid"):
        assert rows[0]["retrieved"][0] == "answer_rex_3"  # "My dog Rex is a beagle" (turn 3 of its session)
    assert set(reports) == {"default", "rrf"} and reports["rrf"]["questions"] == 3
    users = run("longmemeval", lme_file(tmp_path), retriever, tmp_path, configs, roles="user")["default"]
    assert users["strict"]["n"] == 2 and [r["question_id"] for r in users["per_question"]][0] == "q1"


def test_locomo_retrieval_on_the_committed_fixture(tmp_path):
    report = run("locomo", FIXTURE, "hybrid", tmp_path, {"default": AskedConfig(dataset_config("locomo"))})["default"]
    assert report["items"] == 3 and report["overall"]["recall@25"] == 1.0
    assert set(report["by_category"]) == {"1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "5 adversarial"}
    row = report["per_item"][0]
    assert {"question_id", "question", "retrieved", "evidence"} <= set(row) and row["question_id"].endswith(":0")


def test_locomo_questions_are_asked_when_their_conversation_ends(tmp_path, monkeypatch):
    """LoCoMo's questions carry no date: the bench asks each at its conversation's last session date, as the
    locomo task does, so search and recall read a relative time in it against the same moment."""
    asked = []
    rank = HaystackStore.rank

    def spy(self, query, retriever, *, as_of=None, config=None):
        asked.append(as_of)
        return rank(self, query, retriever, as_of=as_of, config=config)

    monkeypatch.setattr(HaystackStore, "rank", spy)
    run("locomo", FIXTURE, "hybrid", tmp_path, {"default": AskedConfig(dataset_config("locomo"))})
    assert len(asked) == 3 and set(asked) == {datetime(2024, 3, 21, 18, 45)}  # session 2 of the fixture


def test_locomo_recall_counts_evidence_ids_that_name_no_turn(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([locomo_record()]))
    report = run("locomo", path, "hybrid", tmp_path, {"default": AskedConfig(dataset_config("locomo"))})["default"]
    assert report["items"] == 3
    assert report["unparsed_evidence_ids"] == 2  # "D9:99" names no turn, "D" is malformed; both counted
    assert report["repaired_evidence_ids"] == {"locomo_evidence_id_rewritten": 1, "locomo_evidence_split": 1}
    assert [item["evidence"] for item in report["per_item"]] == [["D1:3"], ["D2:1"], ["D2:1"]]  # "D:2:01" is D2:1
    assert report["overall"]["recall@5"] == 1.0


def test_the_benchmarks_ranking_is_the_stores_search_and_recall(tmp_path):
    """What the benchmark scores for a query is exactly what Substrate.search (hybrid) and Substrate.recall
    (resonance) return for the same store and query."""
    sessions, _ = import_locomo(FIXTURE)
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    config = dataset_config("locomo")
    store = HaystackStore(tmp_path / "bench", sessions, embedder, config=config)
    reference = Substrate(tmp_path / "ref", embedder=embedder, retrieval=config)
    reference.import_sessions(sessions)
    try:
        for query in ("Which climbing gym does Ben go to?", "What did Ana adopt?", "tax forms"):
            hits = reference.search(query, k=100, pool=100)
            expected = list(dict.fromkeys(h.pointer.entry_id for h in hits))
            assert store.rank(query, "hybrid") == expected
            recall = reference.recall(RecallContext(query=query), config=store.recall_config())
            recalled = list(dict.fromkeys(c.source.split("#", 1)[1].split("[", 1)[0] for c in recall.candidates))
            assert recalled and store.rank(query, "resonance")[: len(recalled)] == recalled
            assert store.rank(query, "bm25") == list(
                dict.fromkeys(h.pointer.entry_id for h in reference.search(query, k=100, mode="lexical", pool=100))
            )
        # a resonance run's recall settings reach recall: the same as asking the store's recall with them
        asked = AskedConfig(replace(config, bm25_weight=0.0), {"weights.temporal": 0.0, "recall.mmr_lambda": 0.5})
        changed = replace(
            store.recall_config(),
            mmr_lambda=0.5,
            weights=replace(store.recall_config().weights, temporal=0.0),
            retrieval=replace(config, bm25_weight=0.0),
        )
        assert store.recall_config(asked) == changed
        for query in ("Which climbing gym does Ben go to?", "tax forms"):
            recall = reference.recall(RecallContext(query=query), config=changed)
            recalled = list(dict.fromkeys(c.source.split("#", 1)[1].split("[", 1)[0] for c in recall.candidates))
            assert store.rank(query, "resonance", config=asked)[: len(recalled)] == recalled
    finally:
        store.close()
        reference.close()


def test_resonance_runs_set_grid_and_ablate_recall_settings():
    from protocols.bench.retrieval_bench import checked_config, run_configs

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--dataset", "locomo", "--retriever", "resonance"]
    args = parser.parse_args([*base, "--set", "weights.temporal=0", "--set", "recall.mmr_lambda=0.5", "--ablate"])
    asked = checked_config(args)
    assert asked.recall == {"weights.temporal": 0.0, "recall.mmr_lambda": 0.5}
    configs = run_configs(args, asked)
    # each resonance term that is on gets its own row; temporal is already off, similarity is never ablated
    assert {"without weights.experience=0", "without weights.authority=0", "without weights.risk=0"} <= set(configs)
    assert "without weights.temporal=0" not in configs and "without weights.similarity=0" not in configs
    assert configs["without weights.risk=0"].recall["recall.mmr_lambda"] == 0.5  # the run's settings kept
    assert configs["without bm25_weight=0"].retrieval.bm25_weight == 0.0
    grid = grid_variants(asked, ["weights.authority=0,0.2"], resonance=True)
    assert grid["weights.authority=0.2"].recall["weights.authority"] == 0.2
    for bad, reason in (
        (["--set", "weights.bogus=1"], "unknown name 'weights.bogus'"),
        (["--set", "temporal=0"], "a resonance weight is set as weights.temporal"),
        (["--set", "weights.risk=-1"], ">= 0"),
        (["--set", "recall.policy=sometimes"], "unknown policy"),
        (["--set", "weights.risk=1", "--set", "weights.risk=2"], "given twice"),
    ):
        with pytest.raises(ParameterError, match=re.escape(reason)):
            checked_config(parser.parse_args([*base, *bad]))
    hybrid = parser.parse_args(["--dataset", "locomo", "--set", "weights.temporal=0"])
    with pytest.raises(ParameterError, match="only --retriever resonance ranks by"):
        checked_config(hybrid)
    # a resonance run starts from the weights of the task's recall-weights.yaml, which --set overrides
    assert checked_config(parser.parse_args(base)).recall == {"weights.temporal": 0.0}
    assert checked_config(parser.parse_args([*base, "--set", "weights.temporal=0.05"])).recall == {
        "weights.temporal": 0.05
    }
    assert checked_config(parser.parse_args(["--dataset", "longmemeval", "--retriever", "resonance"])).recall == {}
    assert checked_config(parser.parse_args(["--dataset", "locomo"])).recall == {}  # hybrid: no recall


def test_sentence_keys_follow_the_datasets_file_stay_off_for_the_baselines_and_are_not_a_grid_axis():
    """Both benchmarks' files keep sentence keys (what their tasks' stores keep too); the plain baselines build
    plain stores unless asked; a grid asks one built store, so a store-build field is refused there."""
    from protocols.bench.retrieval_bench import checked_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert dataset_config("longmemeval").sentence_keys and dataset_config("locomo").sentence_keys
    assert not RetrievalConfig().sentence_keys  # the store's default keeps the index within its budget
    built = {
        (retriever, flag): checked_config(
            parser.parse_args(["--dataset", "longmemeval", "--retriever", retriever, *flag])
        )
        for retriever in ("bm25", "dense", "hybrid", "resonance")
        for flag in ((), ("--sentence-keys", "on"), ("--sentence-keys", "off"))
    }
    for (retriever, flag), asked in built.items():
        expected = flag[1] == "on" if flag else retriever in ("hybrid", "resonance")
        assert asked.retrieval.sentence_keys is expected, (retriever, flag)
    with pytest.raises(ParameterError, match="sentence_keys is how the stores are built"):
        grid_variants(AskedConfig(RetrievalConfig()), ["sentence_keys=on,off"])


def test_window_keys_follow_locomos_file_stay_off_for_the_baselines_and_are_not_a_grid_axis():
    """LoCoMo's file keeps window keys (its dialog turns lean on their neighbours); the store's default and
    LongMemEval's do not; bm25 and dense build plain stores; the window's shape is how a store is built."""
    from protocols.bench.retrieval_bench import checked_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert dataset_config("locomo").window_keys and dataset_config("locomo").window_key_weight > 0
    assert not dataset_config("longmemeval").window_keys and not RetrievalConfig().window_keys
    for retriever in ("bm25", "dense", "hybrid", "resonance"):
        asked = checked_config(parser.parse_args(["--dataset", "locomo", "--retriever", retriever]))
        assert asked.retrieval.window_keys is (retriever in ("hybrid", "resonance")), retriever
    for axis in ("window_keys=on,off", "window_key_before=1,2"):
        with pytest.raises(ParameterError, match="is how the stores are built"):
            grid_variants(AskedConfig(RetrievalConfig()), [axis])
    assert grid_variants(AskedConfig(RetrievalConfig()), ["window_key_weight=0.2,0.4"])  # a search-time weight


def test_bench_retrieval_names_a_missing_data_path(tmp_path, capsys):
    assert cli.main(["bench", "retrieval", "--dataset", "locomo", "--data", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_bench_retrieval_refuses_options_that_do_not_apply(tmp_path, capsys):
    base = ["bench", "retrieval", "--dataset", "locomo", "--data", str(FIXTURE), "--out", str(tmp_path / "x.json")]
    assert cli.main([*base, "--set", "bogus=1"]) == 2
    assert "unknown name 'bogus'; known: anchor_weight" in capsys.readouterr().err
    assert cli.main([*base, "--retriever", "dense", "--ablate"]) == 2
    assert "--retriever hybrid or resonance" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the benchmark-only ranker is gone: argparse refuses the choice
        cli.main([*base, "--retriever", "legacy"])
    assert "invalid choice: 'legacy'" in capsys.readouterr().err
    assert cli.main([*base, "--grid", "bm25_weight=1,x"]) == 2
    assert "takes a number" in capsys.readouterr().err
    assert cli.main([*base, "--roles", "user"]) == 2
    assert "--roles applies to LongMemEval" in capsys.readouterr().err


def test_dataset_configs_are_files_beside_their_tasks():
    locomo, lme = dataset_config("locomo"), dataset_config("longmemeval")
    assert (locomo.fusion, locomo.question_weight, locomo.when_weight, locomo.names_in_dense_query) == (
        "z",
        3.0,
        3.0,
        False,
    )
    assert (lme.fusion, lme.context_weight, lme.speaker_weight, lme.when_weight) == ("z", 0.0, 0.0, 0.0)


def test_a_folders_recall_weights_are_checked_and_named_by_their_file(tmp_path):
    from lca.errors import RecordFormatError
    from protocols.evals.registry import folder_recall_weights

    assert folder_recall_weights(tmp_path) == {}  # no file: recall's defaults
    file = tmp_path / "recall-weights.yaml"
    file.write_text("weights:\n  temporal: 0\n  experience: 0.1\n")
    assert folder_recall_weights(tmp_path / "task.py") == {"temporal": 0.0, "experience": 0.1}
    for text, reason in (
        ("weights:\n  recency: 0\n", "unknown term(s) ['recency']"),
        ("weights:\n  temporal: -1\n", ">= 0"),
        ("pool: 5\n", "only a 'weights' mapping"),
        ("weights: [1]\n", "only a 'weights' mapping"),
        ("weights: {", "not valid YAML"),
    ):
        file.write_text(text)
        with pytest.raises(RecordFormatError, match=re.escape(reason)) as raised:
            folder_recall_weights(tmp_path)
        assert str(file) in str(raised.value)


def test_grid_variants_cross_the_listed_values():
    variants = grid_variants(RetrievalConfig(), ["bm25_weight=0.5,1", "fusion=z,rrf"])
    assert set(variants) == {
        "bm25_weight=0.5,fusion=z",
        "bm25_weight=0.5,fusion=rrf",
        "bm25_weight=1.0,fusion=z",
        "bm25_weight=1.0,fusion=rrf",
    }
    assert variants["bm25_weight=0.5,fusion=rrf"].retrieval.bm25_weight == 0.5
    with pytest.raises(ParameterError, match="unknown name 'bogus'"):
        grid_variants(RetrievalConfig(), ["bogus=1,2"])


def test_held_out_scores_each_conversation_under_the_variant_best_on_the_others():
    def report(scores):
        rows = [{"sample_id": s, "recall@5": v} for s, v in scores]
        return {"per_item": rows, "overall": {"recall@5": sum(v for _, v in scores) / len(scores)}}

    variants = {
        "a": report([("c1", 1.0), ("c2", 0.0), ("c3", 0.0)]),
        "b": report([("c1", 0.0), ("c2", 0.5), ("c3", 0.5)]),
    }
    loco = held_out(variants, retrieval_spec("locomo"))
    # c1 held out: b is best on c2+c3 (0.5 vs 0) -> c1 scores 0; c2 held out: a (0.5) = b (0.25)? a wins -> 0
    assert loco["chosen_per_conversation"] == {"c1": "b", "c2": "a", "c3": "a"}
    assert loco["held_out"] == pytest.approx(0.0) and loco["fitted"] == pytest.approx(1 / 3)


def fake_model(monkeypatch) -> None:
    import lca.index.embedders as embedders

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(max_input_tokens=200))


def test_bench_retrieval_writes_a_benchmark_result_with_rows_checks_and_provenance(tmp_path, monkeypatch, capsys):
    fake_model(monkeypatch)
    data, out = lme_file(tmp_path), tmp_path / "longmemeval-resonance.json"
    args = ["bench", "retrieval", "--dataset", "longmemeval", "--data", str(data), "--retriever", "resonance"]
    assert cli.main([*args, "--quiet", "--cache", str(tmp_path / "cache"), "--out", str(out)]) == 0
    result = BenchmarkResult.read(out)
    assert result.benchmark == "retrieval"
    assert [row["question_id"] for row in result.rows] == ["q1", "q2", "q3_abs"]
    assert result.rows[0]["question"] == "What breed is my dog Rex?" and result.rows[0]["retrieved"]
    assert "per_question" not in result.metrics and "provenance" not in result.metrics
    assert result.metrics["strict"]["n"] == 2 and result.metrics["questions"] == 3
    strict = result.metrics["strict"]["session"]["recall_any@5"]
    assert result.checks["session recall_any@5 (strict)"] == {
        "value": strict,
        "target": ">= 0.97",
        "pass": strict >= 0.97,
    }
    assert set(result.checks) == {"session recall_any@5 (strict)", "session recall_all@5 (lenient)"}
    assert all(isinstance(c["pass"], bool) for c in result.checks.values())
    (dataset,) = result.provenance.datasets
    assert dataset.sha256 == file_sha256(data) and dataset.name == "longmemeval_s_dev"
    assert dataset.pinned_sha256 and not dataset.official  # a small file read as the pinned dev split
    assert result.provenance.embedder_id == "fake-hashing-64" and result.provenance.seeds == {}
    assert result.provenance.extra["embedding_cache"]["misses"] > 0
    assert result.config["retrieval_config"] == dataset_config("longmemeval").to_dict()
    recall = result.config["recall_config"]  # every candidate of a pool of up to 100 kept, in resonance order
    assert (recall["pool"], recall["floor"], recall["memory_quota"], recall["mmr_lambda"]) == (100, -1.0, 0, 1.0)
    assert (result.config["retriever"], result.config["roles"], result.config["limit"]) == ("resonance", "all", None)
    table = out.with_suffix(".md").read_text()
    for name, c in result.checks.items():
        assert f"| {name} | {c['value']:.4f} | >= " in table and ("PASS" if c["pass"] else "FAIL") in table
    keys = "sentence keys" if result.config["sentence_keys"] else "no sentence or window keys"
    assert f"\nstores: every turn, {keys}\n" in table  # what the figures were measured over, beside them
    assert table in capsys.readouterr().out


def test_bench_retrieval_ablate_and_grid_write_one_row_per_variant(tmp_path, monkeypatch, capsys):
    fake_model(monkeypatch)
    out = tmp_path / "locomo-hybrid.json"
    args = ["bench", "retrieval", "--dataset", "locomo", "--data", str(FIXTURE), "--quiet"]
    args += ["--set", "reply_weight=0", "--cache", str(tmp_path / "cache"), "--out", str(out)]
    assert cli.main([*args, "--ablate", "--grid", "context_weight=0,1"]) == 0
    report = BenchmarkResult.read(out)
    assert report.config["retrieval_config"]["reply_weight"] == 0.0 and "recall_config" not in report.config
    assert len(report.rows) == 3 and all(row["question_id"].startswith("fixture-1:") for row in report.rows)
    recall = report.metrics["overall"]["recall@5"]
    assert report.checks == {"recall@5 (dialog turns)": {"value": recall, "target": ">= 0.78", "pass": recall >= 0.78}}
    assert report.provenance.datasets[0].name == "locomo"
    ablation = BenchmarkResult.read(tmp_path / "locomo-hybrid-ablation.json")
    assert ablation.benchmark == "retrieval-ablation" and ablation.provenance == report.provenance
    assert "reply_weight=0" not in ablation.metrics["variants"]  # already off: nothing to ablate
    assert {"context_weight=0", "question_weight=0", "bm25_weight=0", "names_in_dense_query=on"} <= set(
        ablation.metrics["variants"]
    )
    assert set(ablation.config["variants"]) == set(ablation.metrics["variants"])
    assert all(config[name.split("=")[0]] in (0.0, True) for name, config in ablation.config["variants"].items())
    assert ablation.metrics["default"]["recall@5"] == recall
    grid = BenchmarkResult.read(tmp_path / "locomo-hybrid-grid.json")
    assert grid.benchmark == "retrieval-grid" and grid.config["grid"] == ["context_weight=0,1"]
    assert set(grid.metrics["variants"]) == {"context_weight=0.0", "context_weight=1.0"}
    loco = grid.metrics["leave_one_conversation_out"]
    assert set(loco["chosen_per_conversation"]) == {"fixture-1"}
    held = grid.checks["recall@5 (dialog turns), leave one conversation out"]
    assert held["value"] == loco["held_out"] and isinstance(held["pass"], bool)
    printed = capsys.readouterr().out
    assert "leave one conversation out" in printed and "| recall@5 (dialog turns) |" in printed
    assert (tmp_path / "locomo-hybrid-grid.md").read_text() in printed
