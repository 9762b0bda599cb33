"""LongMemEval and LoCoMo as inspect datasets and tasks (the official files from LCA_DATA, and the fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from protocols.evals.locomo.dataset import locomo_samples
from protocols.evals.longmemeval.dataset import longmemeval_samples
from protocols.harness.benchmarks import as_hf_dataset, load_history
from tests.fakes import FakeHashingEmbedder
from tests.protocols.test_harness import fake_agent

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "fixtures"


def test_locomo_loader_counts_every_quirk_and_keeps_gold_for_scorers(locomo_file):
    samples, report = locomo_samples(locomo_file)
    assert len(samples) == 1986 and report.questions == 1986
    assert report.repaired["locomo_non_string_answer"] == 6
    assert report.repaired["locomo_answer_missing_adversarial_used"] == 444  # 446 category 5, 2 with both
    # the six malformed evidence strings: "D8:6; D9:17" and three lists written with spaces are split, "D:11:26" is
    # read as D11:26 (and the well-formed "D30:05" as D30:5); "D" is malformed, D10:19 and D4:36 name no turn
    assert report.repaired["locomo_evidence_split"] == 4 and report.repaired["locomo_evidence_id_rewritten"] == 2
    assert [u.rsplit("'", 2)[1] for u in report.unparsed] == ["D10:19", "D", "D4:36"]
    by_category = {c: sum(1 for s in samples if s.metadata["category"] == c) for c in range(1, 6)}
    assert by_category == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    first = samples[0]
    assert first.metadata["gold"]["evidence"][0].startswith("locomo:conv-26:session_")
    history = load_history(first.metadata["history_ref"])
    ids = {f"{e.session_id}#{e.id}" for s in history["sessions"] for e in s["entries"]}
    assert set(first.metadata["gold"]["evidence"]) <= ids
    table = as_hf_dataset(samples[:10])
    assert table.num_rows == 10 and "gold_evidence" in table.column_names


def test_a_locomo_session_slice_replays_those_sessions_and_asks_only_questions_inside_them():
    fixture = FIXTURES / "locomo_fixture.json"
    whole, _ = locomo_samples(fixture)
    sliced, report = locomo_samples(fixture, sessions=1)
    assert 0 < len(sliced) < len(whole)
    assert report.left_out["outside_session_slice"] == len(whole) - len(sliced)
    history = load_history(sliced[0].metadata["history_ref"])
    assert len(history["sessions"]) == 1 < len(load_history(whole[0].metadata["history_ref"])["sessions"])
    kept = {f"{e.session_id}#{e.id}" for s in history["sessions"] for e in s["entries"]}
    assert all(s.metadata["gold"]["evidence"] and set(s.metadata["gold"]["evidence"]) <= kept for s in sliced)
    inside = [s.id for s in whole if s.metadata["gold"]["evidence"] and set(s.metadata["gold"]["evidence"]) <= kept]
    assert [s.id for s in sliced] == inside
    # a question is asked when the history it is told ends, so a relative time in it reads against that
    assert {s.metadata["asked_at"] for s in whole} == {"2024-03-21T18:45:00"}  # session 2's date
    assert {s.metadata["asked_at"] for s in sliced} == {"2024-03-03T19:10:00"}  # session 1's date
    with pytest.raises(ValueError, match="sessions must be 0"):
        locomo_samples(fixture, sessions=-1)


def test_longmemeval_loader_reads_compressed_files_and_marks_abstention(longmemeval_oracle):
    samples, report = longmemeval_samples(longmemeval_oracle)
    assert len(samples) == 500 and report.repaired["longmemeval_non_string_answer"] == 32
    assert sum(s.metadata["abstention"] for s in samples) == 30
    types = {s.metadata["question_type"] for s in samples}
    assert len(types) == 6
    assert all(s.metadata["history_ref"]["sha256"] == report.sha256 for s in samples)


def test_locomo_task_scores_substrate_measures_without_a_real_model(locomo_file, tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.locomo.locomo import locomo

    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    (log,) = inspect_eval(
        locomo(data=str(locomo_file), condition="transcript-recall", params="floor=0.0"),
        model=fake_agent(),
        limit=2,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success" and len(log.samples) == 2
    qa = [r for r in log.results.scores if r.scorer == "locomo_qa"]
    assert qa and "mean" in qa[0].metrics and 0.0 <= qa[0].metrics["mean"].value <= 1.0
    assert any(name.startswith(("1 ", "2 ", "4 ")) for r in qa for name in r.metrics)  # per LoCoMo category
    assert log.eval.metadata["load_report"]["questions"] == 1986
    assert log.eval.metadata["dataset_pinned_as"] == "locomo" and log.eval.task_version == "1.0.0"
    assert all("packet" in s.scores["substrate"].metadata for s in log.samples)


def test_longmemeval_fixture_loads_with_its_quirks_counted_and_history_by_reference():
    samples, report = longmemeval_samples(FIXTURES / "longmemeval_fixture.json")
    assert [s.id for s in samples] == ["fx_q1", "fx_q2", "fx_q3_abs"] and report.questions == 3
    assert report.repaired["longmemeval_non_string_answer"] == 1 and samples[1].target == "25"
    assert [s.metadata["abstention"] for s in samples] == [False, False, True]
    assert samples[1].metadata["gold"]["evidence"] == [
        "lme:fx_q2:answer_fx_2#lme:fx_q2:answer_fx_2:1",
        "lme:fx_q2:answer_fx_3#lme:fx_q2:answer_fx_3:1",
    ]
    assert samples[0].metadata["asked_at"] == "2024-04-20T09:15:00"
    ref = samples[0].metadata["history_ref"]
    assert ref["loader"] == "protocols.evals.longmemeval.dataset:load_history"
    history = load_history(ref)
    ids = {f"{e.session_id}#{e.id}" for s in history["sessions"] for e in s["entries"]}
    assert set(samples[0].metadata["gold"]["evidence"]) <= ids and len(history["sessions"]) == 3


def test_locomo_fixture_history_is_loaded_by_the_loader_its_reference_names():
    samples, report = locomo_samples(FIXTURES / "locomo_fixture.json")
    assert report.questions == len(samples) == 3 and not report.unparsed
    ref = samples[0].metadata["history_ref"]
    assert ref["loader"] == "protocols.evals.locomo.dataset:load_history" and ref["id"] == "fixture-1"
    history = load_history(ref)
    ids = {f"{e.session_id}#{e.id}" for s in history["sessions"] for e in s["entries"]}
    assert all(set(s.metadata["gold"]["evidence"]) <= ids for s in samples)
    with pytest.raises(ValueError, match="names no loader"):
        load_history({"dataset": "locomo", "file": ref["file"], "id": "fixture-1"})


def test_a_benchmark_task_ranks_its_conditions_stores_by_its_folders_retrieval_config(tmp_path, monkeypatch):
    """The LoCoMo task's full-lca and transcript-recall recall through LoCoMo's retrieval.yaml, the file its
    retrieval figures are measured with, and the task's metadata says which ranking it was."""
    from inspect_ai import eval as inspect_eval

    import conditions.recall as recall_conditions
    from protocols.bench.retrieval.config import dataset_config
    from protocols.evals.locomo.locomo import locomo

    opened = []
    original = recall_conditions._SubstrateCondition._open

    def spy(self, root):
        substrate = original(self, root)
        opened.append(substrate.index.retrieval)
        return substrate

    monkeypatch.setattr(recall_conditions._SubstrateCondition, "_open", spy)
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    expected = dataset_config("locomo")
    assert expected.context_weight > 0  # LoCoMo's file differs from the store's defaults
    (log,) = inspect_eval(
        locomo(data=str(FIXTURES / "locomo_fixture.json"), condition="transcript-recall"),
        model=fake_agent(),
        limit=1,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success"
    assert opened and all(config == expected for config in opened)
    assert log.eval.metadata["retrieval_config"] == expected.to_dict()
    assert log.eval.metadata["recall_weights"] == {"temporal": 0.0}  # LoCoMo's recall-weights.yaml
    from protocols.evals.longmemeval.longmemeval import longmemeval

    task = longmemeval(data=str(FIXTURES / "longmemeval_fixture.json"), condition="full-lca")
    # its folder has no recall-weights.yaml
    assert task.metadata["recall_weights"] == {} and task.metadata["retrieval_config"]


def test_full_lca_recalls_by_the_protocols_weights_unless_its_own_parameter_says_otherwise(tmp_path):
    from conditions import build_condition
    from conditions.base import ConditionRuntime

    runtime = ConditionRuntime(workdir=tmp_path, recall_weights={"temporal": 0.0, "authority": 0.2})
    weights = build_condition("full-lca").attach(runtime).recall_config().weights
    assert (weights.temporal, weights.authority, weights.experience) == (0.0, 0.2, 0.05)
    mine = build_condition("full-lca", weights="temporal=0.1").attach(runtime).recall_config().weights
    assert (mine.temporal, mine.authority) == (0.1, 0.2)
    plain = build_condition("full-lca").attach(ConditionRuntime(workdir=tmp_path)).recall_config().weights
    assert plain.temporal == 0.05  # no protocol file: recall's defaults
