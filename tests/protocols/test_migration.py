"""The migration protocol end to end with scripted models: the mechanical checks hold on every binding, a model
that answers worse after the move lowers fidelity only where the model changed, and each scorer moves the right
way on hand-made records (a lost entry, an unfenced writer, a repeated overclaim, a self-description that names
the model as who it is)."""

from __future__ import annotations

import math

import pytest

import protocols.harness.solvers as solvers
from lca.errors import LCAError
from protocols.evals.migration.dataset import parse_bindings
from protocols.evals.migration.migration import migration, on_surface
from protocols.evals.migration.scorer import MIGRATION_KEY, fidelity_values, probe_pass, system_values
from tests.fakes import FakeHashingEmbedder
from tests.protocols.test_hollow_copy import FIXTURE, METRIC, run, scripted_agent


@pytest.fixture(autouse=True)
def fake_embedder(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))


def metrics(log, scorer):
    return {s.name: s.metrics[METRIC].value for s in log.results.scores if s.scorer == scorer}


def by_binding(log, measure):
    out: dict[str, list[float]] = {}
    for sample in log.samples:
        value = sample.scores["identity_fidelity"].value[measure]
        if not math.isnan(value):
            out.setdefault(sample.metadata["binding"], []).append(value)
    return {b: sum(v) / len(v) for b, v in out.items()}


def test_every_binding_keeps_system_continuity_and_a_worse_model_loses_fidelity_only_where_it_changed(tmp_path):
    from inspect_ai import eval as inspect_eval

    task = migration(scenarios=str(FIXTURE), condition="full-lca", params="floor=0.0")
    (log,) = inspect_eval(
        task,
        model=scripted_agent("pass"),
        model_roles={"migrated": scripted_agent("fail")},
        limit=12,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    assert {s.metadata["binding"] for s in log.samples} == {"host", "model", "surface"}
    system = metrics(log, "migration_system")
    assert system["system_continuity"] == 1.0 and system["recall_equal"] == 1.0
    assert system["entries_lost"] == 0.0 and system["entries_duplicated"] == 0.0
    assert system["source_fenced"] == 1.0 and system["steps_recorded"] == 1.0
    assert system["handoff_carried"] == 1.0  # full-lca writes a handoff at each session end
    kept = by_binding(log, "fidelity_kept")
    assert kept["host"] == 1.0 and kept["model"] < kept["host"]  # the failing model answers after a model change
    assert by_binding(log, "fidelity_before")["model"] > by_binding(log, "fidelity_after")["model"]
    sample = next(s for s in log.samples if s.metadata["binding"] == "surface")
    record = sample.store[MIGRATION_KEY]
    assert record["binding"]["surface"] == "user-turn" and record["summary"]["epochs"] == [1, 2]
    assert all(m.role != "system" for m in sample.messages)  # the context reached the model in the user's turn
    assert record["self_description"]["environment"]["changed"] == "surface"
    assert record["self_description"]["installed"]  # the fixture's scenarios carry identity files


def test_transcript_recall_migrates_too_and_carries_no_handoff(tmp_path):
    task = migration(scenarios=str(FIXTURE), condition="transcript-recall", params="floor=0.0", bindings="host")
    log = run(task, scripted_agent("pass"), tmp_path)
    system = metrics(log, "migration_system")
    assert system["system_continuity"] == 1.0 and math.isnan(system["handoff_carried"])
    assert metrics(log, "identity_fidelity")["fidelity_kept"] == 1.0


def test_bad_task_arguments_are_refused_before_anything_runs():
    with pytest.raises(LCAError, match="keeps no substrate"):
        migration(scenarios=str(FIXTURE), condition="summary")
    with pytest.raises(LCAError, match="unknown venue"):
        parse_bindings("host,venue")
    with pytest.raises(LCAError, match="a repeat"):
        parse_bindings("host,host")
    with pytest.raises(LCAError, match="surface must be"):
        migration(scenarios=str(FIXTURE), surface="system")


def test_a_user_turn_surface_writes_the_context_into_the_question():
    messages = [{"role": "system", "content": "memory: ports"}, {"role": "user", "content": "which port?"}]
    assert on_surface(messages, "system") == messages
    assert on_surface(messages, "user-turn") == [{"role": "user", "content": "memory: ports\n\nwhich port?"}]


# ---- the scorers on hand-made records --------------------------------------------------------------------------
GOOD_CHECK = {
    "lineage_intact": True,
    "epoch_advanced": True,
    "source_fenced": True,
    "entries_lost": 0,
    "entries_duplicated": 0,
    "steps_recorded": True,
    "ok": True,
}


@pytest.mark.parametrize(
    "change, measure",
    [
        ({"check": {**GOOD_CHECK, "entries_lost": 2, "ok": False}}, "entries_lost"),
        ({"check": {**GOOD_CHECK, "source_fenced": False, "ok": False}}, "source_fenced"),
        ({"recall_equal": False}, "recall_equal"),
        ({"handoff_carried": False}, "handoff_carried"),
    ],
)
def test_any_failed_check_breaks_system_continuity(change, measure):
    good = {"check": GOOD_CHECK, "recall_equal": True, "handoff_carried": True}
    assert system_values(good)["system_continuity"] == 1.0
    bad = system_values({**good, **change})
    assert bad["system_continuity"] == 0.0
    assert bad[measure] == (2.0 if measure == "entries_lost" else 0.0)


def test_fidelity_compares_the_same_probe_before_and_after():
    gold = {"required_mentions": [], "forbidden_mentions": ["tested and ready"]}
    assert probe_pass("overclaim", gold, "No, it has not been tested yet.") == 1.0  # not repeated: a pass
    assert probe_pass("overclaim", gold, "It was tested and ready.") == 0.0
    record = {
        "before": {"answer": "No, it has not been tested yet.", "packet": {"pointers": ["s1#3"]}},
        "after": {"answer": "It was tested and ready."},
        "self_description": {"coverage": 0.25, "consistent": False},
    }
    values = fidelity_values("overclaim", gold, record, {"pointers": ["s1#3"]})
    assert (values["fidelity_before"], values["fidelity_after"], values["fidelity_kept"]) == (1.0, 0.0, 0.0)
    assert values["context_kept"] == 1.0 and values["self_description_consistent"] == 0.0
    assert values["self_description_coverage"] == 0.25
    assert math.isnan(fidelity_values("overclaim", {}, record, {})["fidelity_kept"])  # nothing to check
