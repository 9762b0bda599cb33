"""A study names the embedder its conditions' stores are built with (issue 54): declared in the document (default
minilm), checked against the registry before anything runs, used by every sample's store and recorded in the
run's provenance by its model id. A fake is registered under a test-only name; nothing real is loaded."""

from __future__ import annotations

import json

import pytest
from inspect_ai.log import read_eval_log

import protocols.harness.solvers as solvers
from lca.errors import LCAError
from lca.index.embedder_choice import EMBEDDERS, EmbedderOption
from protocols.harness import tasks
from protocols.study import load_study
from protocols.study.runner import StudyRunner, run_study
from tests.fakes import FakeHashingEmbedder
from tests.protocols.test_hollow_copy import scripted_agent
from tests.study.test_runner import raters, write_study


class NamedFake(FakeHashingEmbedder):
    def __init__(self, name: str) -> None:
        super().__init__(max_input_tokens=200, name=name)
        self.source = name


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    made: list[NamedFake] = []

    def make() -> NamedFake:
        made.append(NamedFake("fake-b"))
        return made[-1]

    monkeypatch.setitem(EMBEDDERS, "fake-b", EmbedderOption("fake-b", "a test fake", make))
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    monkeypatch.setattr(solvers, "_EMBEDDER_NAME", None)  # restored after: the process's choice is global
    monkeypatch.setattr(StudyRunner, "model_factory", staticmethod(lambda model: scripted_agent("pass")))
    monkeypatch.setattr(solvers, "prime_off_topic", lambda embedder: None)
    return made


def test_the_harness_builds_every_store_with_the_embedder_it_is_told_to_use(fakes):
    assert solvers.use_embedder("minilm") == "minilm" and tasks.embedder_id() == "fake-hashing-64"  # kept
    assert solvers.use_embedder("fake-b") == "fake-b"
    assert tasks.embedder_id() == "fake-b-64" and solvers.shared_embedder().embedder_id == "fake-b-64"
    runtime = solvers.sample_runtime({}, {}, seed=0)
    assert runtime.embedder.embedder_id == "fake-b-64" and len(fakes) == 1  # made once, shared
    with pytest.raises(LCAError, match="unknown embedder 'nonsuch'"):
        solvers.use_embedder("nonsuch")


def test_a_study_naming_an_embedder_uses_it_and_records_it_in_its_provenance(tmp_path, fakes):
    path = write_study(tmp_path)
    assert load_study(path).embedder == "minilm"  # the default, unchanged
    path.write_text(path.read_text() + "embedder: fake-b\n")
    assert load_study(path).embedder == "fake-b"
    options = dict(exploratory=True, display="none", rater_factory=raters(disagree=False), echo=lambda line: None)
    result = run_study(path, out=tmp_path / "out", **options)
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["embedder"] == "fake-b" and manifest["embedder_id"] == "fake-b-64"
    logs = sorted((result.run_dir / "logs" / "hollow_copy").glob("*.eval"))
    assert logs and all(read_eval_log(str(f), header_only=True).eval.metadata["embedder"] == "fake-b-64" for f in logs)
    assert fakes and sum(f.texts_embedded for f in fakes) > 0  # the samples' stores embedded with it


def test_an_embedder_the_registry_does_not_know_is_refused_before_anything_runs(tmp_path):
    path = write_study(tmp_path)
    path.write_text(path.read_text() + "embedder: nonsuch\n")
    with pytest.raises(LCAError, match="embedder.*unknown embedder 'nonsuch'"):
        load_study(path)
