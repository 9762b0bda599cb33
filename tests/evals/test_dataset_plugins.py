"""The dataset plug-in contract (``protocols.evals.dataset_plugin``), walked over every registered dataset the
way scikit-learn's estimator checks walk its estimators: each one's eval.yaml, its fixture imported into
sessions, its eval loader, and its retrieval adapter's questions, rows and report with the declared metric names.

A toy third dataset, registered only inside one test (``fake_dataset``, never in the table users see), shows
that a dataset is one folder and its fixture: the same contract holds, and ``lca ingest --format`` and ``lca
bench retrieval --dataset`` take it, options and all, with no edit anywhere else."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import protocols.cli as cli
from lca.importers import ImportedSession, ImportReport, file_sha256, load_official_json
from lca.types import DEFAULT_MAX_ENTRY_BYTES, EntryKind, TranscriptEntry
from protocols.evals.benchmark import BenchmarkResult
from protocols.evals.dataset_plugin import (
    DatasetPlugin,
    Haystack,
    Option,
    RetrievalAdapter,
    RetrievalQuestion,
    RetrievalSpec,
    metric_value,
    timing,
)
from protocols.evals.datasets import DATASETS
from tests.fakes import FakeHashingEmbedder


def check_contract(plugin: DatasetPlugin) -> None:
    """What every dataset plug-in owes its callers, on its own fixture."""
    metadata = plugin.metadata  # the folder's eval.yaml: files, their pins, licence, citation, fixture
    assert metadata.name == plugin.name and plugin.fixture.is_file()
    fixture = plugin.fixture

    importer = inspect.signature(plugin.importer).parameters
    assert "max_entry_bytes" in importer and all(o.keyword in importer for o in plugin.import_options)
    sessions, report = plugin.import_file(fixture, max_entry_bytes=DEFAULT_MAX_ENTRY_BYTES)
    assert sessions and report.sessions == len(sessions) and report.source_sha256 == file_sha256(fixture)
    assert report.entries == sum(len(s.entries) for s in sessions) > 0
    assert all(entry.session_id == session.session_id for session in sessions for entry in session.entries)

    samples, load_report = plugin.load(fixture)
    assert samples and load_report.questions == len(samples) and load_report.sha256 == file_sha256(fixture)

    spec = plugin.retrieval
    if spec is None:
        return
    assert spec.file in [d.name for d in metadata.datasets] and plugin.find_file(spec.file, fixture) == fixture
    adapter_class = spec.adapter_class()
    assert all(o.keyword in inspect.signature(adapter_class.__init__).parameters for o in spec.options)
    adapter = adapter_class(fixture, limit=None)
    imported = {entry.id for session in sessions for entry in session.entries}
    rows: list[dict[str, Any]] = []
    for question in adapter.questions():
        haystack = adapter.haystack(question.haystack)
        entries = [entry.id for session in haystack.sessions for entry in session.entries]
        assert set(entries) <= imported and set(haystack.unit_of) <= set(entries)
        gold = adapter.gold(question, haystack)
        if gold is None:
            continue
        ranking = list(dict.fromkeys(haystack.unit_of[e] for e in entries if e in haystack.unit_of))
        row = adapter.row(question, gold, ranking, 0.01)
        assert row["question_id"] == question.id and row["seconds"] == 0.01
        for path in spec.metrics:  # the official metrics, as declared
            assert isinstance(metric_value(row, path), float), (plugin.name, path)
        rows.append(row)
    assert rows, f"{plugin.name}: no question of the fixture can be scored"
    summary = adapter.summary(rows, [row["seconds"] for row in rows])
    assert summary[spec.rows] == rows and summary["seconds_per_question"]["total"] == pytest.approx(0.01 * len(rows))
    for name, (path, _) in spec.targets.items():
        assert isinstance(metric_value(summary, path), float), (plugin.name, name)
    assert all(isinstance(value, float) for value in adapter.headline(summary).values())
    assert all(line.startswith("|") or not line for line in adapter.table(summary))
    if spec.held_out is not None:
        assert spec.held_out.target in spec.targets
        assert all(spec.held_out.group in row and spec.held_out.metric in row for row in rows)
        assert isinstance(metric_value(summary, (spec.held_out.summary, spec.held_out.metric)), float)


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_registered_dataset_meets_the_plugin_contract(name):
    check_contract(DATASETS[name])


def test_no_test_dataset_is_registered_for_users():
    assert DATASETS and not any(name.startswith("fake") for name in DATASETS)


# ---- a toy third dataset: one folder (its eval.yaml) and its fixture, registered only in the test below ----------
TOY_RECORDS = [
    {
        "id": "h1",
        "date": "2024-03-01T10:00:00",
        "turns": ["I keep my bicycle in the blue shed.", "The weather turned cold this week.", "I like rye bread."],
        "questions": [{"id": "q1", "text": "Where is the bicycle kept?", "gold": [0]}],
    },
    {
        "id": "h2",
        "date": "2024-03-02T10:00:00",
        "turns": ["My sister lives in Porto.", "The train to Porto takes three hours."],
        "questions": [
            {"id": "q2", "text": "Where does my sister live?", "gold": [0]},
            {"id": "q3", "text": "What is in the attic?", "gold": []},  # nothing to score: counted, not asked
        ],
    },
]
TOY_EVAL_YAML = """\
name: fake_dataset
title: A toy dataset for the plug-in test
version: 0.0.1
description: a toy format registered only inside a test, never for users
task: task.py@fake_dataset
main_score: hit
datasets:
  - name: fake_dataset
    file: fake_dataset/toy.json
    description: the test's fixture
data_parameter: data
fixture: {fixture}
config:
  data: ""
measures:
  - name: hit
    kind: computed
    scorer: hit
    definition: a gold turn among the first k retrieved
"""


def import_toy(
    path: Path | str, *, haystack_ids: Sequence[str] | None = None, max_entry_bytes: int | None = None
) -> tuple[list[ImportedSession], ImportReport]:
    """The toy format's importer: one session per haystack, one user turn per line."""
    records = load_official_json(path)
    report = ImportReport(source=str(path), source_sha256=file_sha256(Path(path)))
    sessions = []
    for record in records:
        if haystack_ids and record["id"] not in haystack_ids:
            continue
        sid = f"fake:{record['id']}"
        entries = tuple(
            TranscriptEntry(f"{sid}:{n}", sid, "fake", EntryKind.USER_TURN, record["date"], text, meta={"turn": n})
            for n, text in enumerate(record["turns"])
        )
        sessions.append(ImportedSession(sid, entries))
        report.sessions += 1
        report.entries += len(entries)
    return sessions, report


def load_toy(path: Path | str):
    """The toy format's eval loader: one inspect sample per question."""
    from inspect_ai.dataset import Sample

    from protocols.harness.benchmarks import LoadReport

    report = LoadReport(str(path), file_sha256(Path(path)))
    samples = [Sample(id=q["id"], input=q["text"]) for r in load_official_json(path) for q in r["questions"]]
    report.questions = len(samples)
    return samples, report


class ToyRetrieval(RetrievalAdapter):
    """The toy format's retrieval adapter: a turn is a unit, hit@k whether a gold turn is among the first k."""

    def __init__(self, path: Path, *, limit: int | None = None) -> None:
        self.records = load_official_json(path)[:limit] if limit else load_official_json(path)
        self.sessions, _ = import_toy(path, haystack_ids=[r["id"] for r in self.records])
        self.unscored = 0

    def questions(self) -> list[RetrievalQuestion]:
        return [RetrievalQuestion(r["id"], q["id"], q["text"], q) for r in self.records for q in r["questions"]]

    def haystack(self, key: str) -> Haystack:
        sessions = [s for s in self.sessions if s.session_id == f"fake:{key}"]
        return Haystack(sessions, {e.id: f"{key}:{e.meta['turn']}" for s in sessions for e in s.entries})

    def gold(self, question: RetrievalQuestion, haystack: Haystack) -> set[str] | None:
        gold = {f"{question.haystack}:{n}" for n in question.item["gold"]}
        self.unscored += not gold
        return gold or None

    def row(self, question: RetrievalQuestion, gold: set[str], ranking: Sequence[Any], seconds: float) -> dict:
        return {
            "question_id": question.id,
            "retrieved": list(ranking[:3]),
            "seconds": seconds,
            **{f"hit@{k}": float(bool(gold & set(ranking[:k]))) for k in (1, 3)},
        }

    def summary(self, rows: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
        overall = {f"hit@{k}": sum(r[f"hit@{k}"] for r in rows) / len(rows) if rows else 0.0 for k in (1, 3)}
        return {
            "overall": overall | {"n": len(rows)},
            "unscored": self.unscored,
            "seconds_per_question": timing(seconds),
            "per_question": rows,
        }

    @staticmethod
    def headline(report: Mapping[str, Any]) -> dict[str, float]:
        return {"hit@1": report["overall"]["hit@1"], "hit@3": report["overall"]["hit@3"]}

    @staticmethod
    def table(report: Mapping[str, Any]) -> list[str]:
        o = report["overall"]
        return ["| n | hit@1 | hit@3 |", "| --- | --- | --- |", f"| {o['n']} | {o['hit@1']:.4f} | {o['hit@3']:.4f} |"]


def toy_dataset(tmp_path: Path) -> DatasetPlugin:
    """The toy dataset's folder (its eval.yaml) and fixture, written under ``tmp_path``."""
    fixture = tmp_path / "toy.json"
    fixture.write_text(json.dumps(TOY_RECORDS), encoding="utf-8")
    folder = tmp_path / "fake_dataset"
    folder.mkdir()
    (folder / "eval.yaml").write_text(TOY_EVAL_YAML.format(fixture=fixture), encoding="utf-8")
    return DatasetPlugin(
        name="fake_dataset",
        title="FakeDataset",
        folder=folder,
        importer=import_toy,
        loader=f"{__name__}:load_toy",
        import_options=(Option("--fake-haystack", "haystack_ids", "fake_dataset: a haystack to import", "append"),),
        retrieval=RetrievalSpec(
            file="fake_dataset",
            adapter=f"{__name__}:ToyRetrieval",
            rows="per_question",
            metrics=(("hit@1",), ("hit@3",)),
            targets={"hit@3": (("overall", "hit@3"), 0.5)},
            records="haystacks",
        ),
    )


def test_a_third_dataset_is_one_folder_and_its_fixture(tmp_path, monkeypatch, capsys):
    import lca.index.embedders as embedders

    toy = toy_dataset(tmp_path)
    monkeypatch.setitem(DATASETS, toy.name, toy)  # registered for this test only
    check_contract(toy)

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(max_input_tokens=200))
    store = tmp_path / "store"
    ingest = ["ingest", "--store", str(store), "--format", "fake_dataset", "--quiet", "--json", str(toy.fixture)]
    assert cli.main([*ingest, "--fake-haystack", "h2"]) == 0
    imported = json.loads(capsys.readouterr().out)["imports"][0]
    assert (imported["sessions"], imported["entries"]) == (1, 2)  # its own option reached its importer
    assert cli.main(["ingest", "--store", str(store), "--fake-haystack", "h2", str(toy.fixture)]) == 2
    assert "--fake-haystack applies to importing a file with --format fake_dataset" in capsys.readouterr().err

    out = tmp_path / "bench" / "toy.json"
    argv = ["bench", "retrieval", "--dataset", "fake_dataset", "--data", str(toy.fixture), "--quiet"]
    assert cli.main([*argv, "--cache", str(tmp_path / "cache"), "--out", str(out), "--retriever", "bm25"]) == 0
    record = BenchmarkResult.read(out)
    assert [row["question_id"] for row in record.rows] == ["q1", "q2"] and record.metrics["unscored"] == 1
    assert set(record.checks) == {"hit@3"} and record.metrics["overall"]["hit@3"] == 1.0
    assert record.provenance.datasets[0].path == str(toy.fixture) and not record.provenance.datasets[0].official
    assert "| 2 | " in out.with_suffix(".md").read_text()
