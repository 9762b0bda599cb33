"""``lca fit retrieval``: the fit weighs an informative part up and a noise part down, folds never split a group,
a fit that does not beat the defaults on held-out folds writes nothing, a written file is a config the retrieval
bench reads, and bad input is one line. The pipeline runs on a fake embedder here (``tests.fakes``); the real run
is measured by the command (docs, the issue)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from lca.retrieval import RetrievalConfig
from protocols.bench.fit.model import FitError, FitSettings, LabelledQuestion, fit_weights, group_folds
from protocols.bench.fit.record import compare, write_config
from protocols.bench.fit.retrieval import TARGETS
from protocols.bench.fit.run import fit_command
from protocols.cli import build_parser, main
from tests.fakes import FakeHashingEmbedder

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "data" / "fixtures" / "locomo_fixture.json"
NAMES = ["dense_weight", "informative", "noise", "misleading"]


def synthetic(seed: int, questions: int = 60, groups: int = 6) -> list[LabelledQuestion]:
    """Twenty candidates a question, two relevant: the dense part leans to them a little, the informative part
    a lot, the noise part not at all, the misleading part away from them."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(questions):
        relevant = np.zeros(20, dtype=bool)
        relevant[rng.choice(20, 2, replace=False)] = True
        parts = rng.normal(size=(20, 4))
        parts[:, 0] += 0.5 * relevant
        parts[:, 1] += 2.0 * relevant
        parts[:, 3] -= 1.0 * relevant
        out.append(LabelledQuestion(f"q{q}", f"g{q % groups}", parts, relevant))
    return out


def test_the_fit_weighs_the_informative_part_up_and_the_rest_down():
    defaults = {"dense_weight": 1.0, "informative": 0.5, "noise": 0.5, "misleading": 0.5}
    for seed in (0, 1, 2):
        weights = fit_weights(synthetic(seed), NAMES, defaults, FitSettings(depth=18))
        assert weights["dense_weight"] == 1.0  # the anchor keeps its value: the scale
        assert weights["informative"] > 2.0 > weights["noise"] * 4
        assert weights["misleading"] == 0.0  # below the config's range: left out and the rest fitted again
        assert all(value >= 0 for value in weights.values())


def test_a_fit_without_relevant_and_irrelevant_candidates_is_refused():
    none = [LabelledQuestion("q", "g", np.zeros((3, 4)), np.zeros(3, dtype=bool))]
    with pytest.raises(FitError, match="nothing to fit"):
        fit_weights(none, NAMES, dict.fromkeys(NAMES, 1.0))


@pytest.mark.parametrize("scheme", ["leave-one-out", "grouped"])
def test_folds_never_split_a_group_and_hold_each_out_once(scheme):
    groups = [f"conv-{i % 7}" for i in range(40)]
    folds = group_folds(groups, scheme, splits=3)
    assert len(folds) == (7 if scheme == "leave-one-out" else 3)
    held = [g for _, test in folds for g in test]
    assert sorted(held) == sorted(set(groups))  # every group held out exactly once
    for train, test in folds:
        assert not set(train) & set(test)
        assert set(train) | set(test) == set(groups)
    with pytest.raises(FitError, match="at least 2"):
        group_folds(["only"], scheme)


def rows(values: dict[str, float]) -> dict[str, dict]:
    return {qid: {"question_id": qid, "recall@5": v} for qid, v in values.items()}


def test_the_comparison_refuses_a_fit_that_does_not_beat_the_defaults():
    value = TARGETS["locomo"].value
    defaults = rows({f"q{i}": float(i % 2) for i in range(40)})
    folds = [(["b"], ["a"]), (["a"], ["b"])]
    fold_of = {f"q{i}": i % 2 for i in range(40)}
    same = compare("recall@5", value, defaults, defaults, fold_of, folds, [{}, {}])
    assert same.gain == 0 and not same.beats_defaults and "nothing written" in same.verdict()
    better = rows({f"q{i}": 1.0 for i in range(40)})
    won = compare("recall@5", value, defaults, better, fold_of, folds, [{}, {}])
    assert won.beats_defaults and won.gain == 0.5 and won.gain_interval[0] > 0
    assert [fold["questions"] for fold in won.folds] == [20, 20]
    one_lucky = rows({f"q{i}": float(i % 2 or i == 0) for i in range(40)})  # one question up: noise
    assert not compare("recall@5", value, defaults, one_lucky, fold_of, folds, [{}, {}]).beats_defaults


def test_a_written_file_is_a_config_the_retrieval_bench_reads(tmp_path):
    from protocols.bench.retrieval_bench import checked_config

    fitted = RetrievalConfig(bm25_weight=0.3125, anchor_weight=2.5)
    out = tmp_path / "fitted.yaml"
    write_config(out, fitted.to_dict(), {"dataset": "locomo", "held_out": {"gain": 0.01}, "revision": "abc"})
    header = [line[2:] for line in out.read_text().splitlines() if line.startswith("# ")]
    assert yaml.safe_load("\n".join(header[1:]))["held_out"]["gain"] == 0.01
    assert RetrievalConfig.from_file(out) == fitted
    args = build_parser().parse_args(["bench", "retrieval", "--dataset", "locomo", "--config", str(out)])
    assert checked_config(args).retrieval == fitted


def fit_args(tmp_path: Path, data: Path, *more: str) -> argparse.Namespace:
    """The command's own parse of ``lca fit retrieval`` on LoCoMo-format ``data``, its files under ``tmp_path``."""
    return build_parser().parse_args(
        ["fit", "retrieval", "--dataset", "locomo", "--data", str(data), "--out", str(tmp_path / "fitted.yaml")]
        + ["--cache", str(tmp_path / "cache"), "--workdir", str(tmp_path / "work"), "--quiet", *more]
    )


def three_conversations(tmp_path: Path) -> Path:
    record = json.loads(FIXTURE.read_text())[0]
    path = tmp_path / "locomo3.json"
    path.write_text(json.dumps([record | {"sample_id": f"conv-{i}"} for i in range(3)]))
    return path


def test_a_fit_on_too_little_data_says_so_and_writes_nothing(tmp_path, capsys):
    args = fit_args(tmp_path, three_conversations(tmp_path))
    code = fit_command(args, embedder=FakeHashingEmbedder())
    said = capsys.readouterr().out
    assert code == 1
    assert "held-out recall@5 over 9 questions" in said and "nothing written" in said
    assert not Path(args.out).exists()


def test_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "retrieval", "--dataset", "nope"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("lca fit retrieval: error:")
    code = fit_command(fit_args(tmp_path, tmp_path / "missing.json"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "locomo" in err[0]
    rrf = tmp_path / "rrf.yaml"
    rrf.write_text("fusion: rrf\n")
    code = fit_command(fit_args(tmp_path, three_conversations(tmp_path), "--config", str(rrf)))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "z fusion" in err[0]
    assert not (tmp_path / "fitted.yaml").exists()


@pytest.mark.slow
def test_the_command_with_the_real_embedder_refuses_a_fit_it_cannot_show_helps(tmp_path, capsys):
    """``lca fit retrieval`` as a user runs it (MiniLM behind the embedding cache) on three copies of the fixture's
    conversation: nine questions cannot show a gain, so it says so, exits 1 and writes nothing."""
    out = tmp_path / "fitted.yaml"
    data = three_conversations(tmp_path)
    argv = ["fit", "retrieval", "--dataset", "locomo", "--data", str(data), "--out", str(out), "--quiet"]
    code = main([*argv, "--cache", str(tmp_path / "cache"), "--workdir", str(tmp_path / "work")])
    said = capsys.readouterr().out
    assert code == 1 and "nothing written" in said and "weights fitted on every group" in said
    assert not out.exists()


def test_the_parts_pass_ranks_as_the_retrieval_bench_does(tmp_path):
    """The defaults' rows the fit compares against are the bench's own ranking, question for question."""
    from protocols.bench.fit.retrieval import Kind, collect
    from protocols.bench.retrieval.config import AskedConfig, dataset_config
    from protocols.bench.retrieval.runners import run_dataset
    from protocols.evals.datasets import dataset_plugin

    data, plugin, config = three_conversations(tmp_path), dataset_plugin("locomo"), dataset_config("locomo")
    run = dict(embedder=FakeHashingEmbedder(), limit=None, progress=lambda items: items, workdir=tmp_path / "work")
    collected = collect(Kind(AskedConfig(config)), plugin, data, **run)
    bench = run_dataset(plugin, data, "hybrid", configs={"default": AskedConfig(config)}, **run)["default"]
    assert {r["question_id"]: r["retrieved"] for r in bench["per_item"]} == {
        qid: row["retrieved"] for qid, row in collected.rows.items()
    }
    assert all(q.relevant.any() for q in collected.questions)  # each question's evidence is among its candidates
    assert {q.group for q in collected.questions} == {"conv-0", "conv-1", "conv-2"}


def test_a_weight_stays_within_its_upper_bound():
    defaults = {"dense_weight": 1.0, "informative": 0.5, "noise": 0.5, "misleading": 0.5}
    weights = fit_weights(synthetic(0), NAMES, defaults, FitSettings(depth=18), upper={"informative": 0.25})
    assert weights["informative"] == 0.25 and weights["dense_weight"] == 1.0


def test_recall_parts_are_the_terms_recall_adds_and_rank_as_the_resonance_retriever(tmp_path):
    """Each recalled entry's parts, times the weights, sum to its candidate's score R; the order is the bench's."""
    from lca.importers import import_locomo
    from protocols.bench.fit.recall import RecallKind
    from protocols.bench.retrieval.config import AskedConfig, dataset_config, dataset_recall
    from protocols.bench.retrieval.stores import HaystackStore

    sessions, _ = import_locomo(FIXTURE.resolve())
    kind = RecallKind(AskedConfig(dataset_config("locomo"), dataset_recall("locomo")))
    assert kind.names[0] == "similarity" and "temporal" not in kind.names  # LoCoMo's file sets temporal to 0
    store = HaystackStore(tmp_path / "s", sessions, FakeHashingEmbedder(), config=kind.start.retrieval)
    try:
        question = "What is the name of Ana's cat?"
        entries, parts = kind.rank(store, question, None)
        assert entries == store.rank(question, "resonance", config=kind.start)
        recalled = store.recalled(question, asked=kind.start)
        first = {}
        for candidate in recalled:
            first.setdefault(candidate.source.split("#", 1)[1].split("[", 1)[0], candidate)
        for entry, part in zip(entries, parts, strict=True):
            if part is None:
                assert entry not in first
                continue
            total = sum(getattr(kind.weights, name) * value for name, value in part.items())
            assert total == pytest.approx(first[entry].score, abs=1e-9)
    finally:
        store.close()


def test_fit_recall_on_too_little_data_says_so_and_writes_nothing(tmp_path, capsys):
    args = build_parser().parse_args(
        ["fit", "recall", "--dataset", "locomo", "--data", str(three_conversations(tmp_path))]
        + ["--out", str(tmp_path / "recall.yaml"), "--workdir", str(tmp_path / "work"), "--quiet"]
    )
    assert fit_command(args, embedder=FakeHashingEmbedder()) == 1
    assert "nothing written" in capsys.readouterr().out and not (tmp_path / "recall.yaml").exists()
