"""The migration protocol end to end with scripted models: the mechanical checks hold on every binding, a model
that answers worse after the move lowers fidelity only where the model changed, and each scorer moves the right
way on hand-made records (a lost entry, an unfenced writer, a repeated overclaim, a self-description that names
the model as who it is)."""

from __future__ import annotations

import math

import pytest

import protocols.harness.solvers as solvers
from lca.errors import LCAError
from protocols.evals.migration.dataset import binding_axes, parse_bindings
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

    task = migration(
        scenarios=str(FIXTURE),
        condition="full-lca",
        params="floor=0.0",
        bindings="host,model,harness,surface,model+harness",
    )
    (log,) = inspect_eval(
        task,
        model=scripted_agent("pass"),
        model_roles={"migrated": scripted_agent("fail")},
        limit=15,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    assert {s.metadata["binding"] for s in log.samples} == {"host", "model", "harness", "surface", "model+harness"}
    system = metrics(log, "migration_system")
    assert system["system_continuity"] == 1.0 and system["recall_equal"] == 1.0
    assert system["entries_lost"] == 0.0 and system["entries_duplicated"] == 0.0
    assert system["source_fenced"] == 1.0 and system["steps_recorded"] == 1.0
    assert system["handoff_carried"] == 1.0  # full-lca writes a handoff at each session end
    assert system["intents_lost"] == 0.0
    work = metrics(log, "work_carried")  # the effect left in flight was performed exactly once after every move
    assert work == {"effect_exactly_once": 1.0, "effect_deliveries": 1.0, "stale_finish_refused": 1.0}
    assert {s.store[MIGRATION_KEY]["work"]["crash"] for s in log.samples} == {"before-effect", "after-effect"}
    kept = by_binding(log, "fidelity_kept")
    assert kept["host"] == 1.0 and kept["model"] < kept["host"]  # the failing model answers after a model change
    assert kept["harness"] == 1.0  # the same model under the scripted loop: the same behaviour
    assert by_binding(log, "fidelity_before")["model"] > by_binding(log, "fidelity_after")["model"]
    assert by_binding(log, "fidelity_after")["model+harness"] < by_binding(log, "fidelity_after")["harness"]
    for sample in log.samples:
        record = sample.store[MIGRATION_KEY]
        cost = sample.scores["migration_cost"].value
        assert cost["downtime_s"] > 0 and cost["bundle_bytes"] > 0 and cost["tokens_rederived"] > 0
        assert cost["downtime_s"] <= cost["move_seconds"] + 1e-5
        axes = record["binding"]["axes"]
        assert cost["operator_steps"] == 2 + len(set(axes) - {"host"})  # migrate, start, one choice per axis
        scripted = "harness" in axes
        assert record["binding"]["harness"] == ("scripted" if scripted else "inspect")
        assert ("appended" in record["after"]) == scripted  # the scripted loop appended the turn on the target
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
    with pytest.raises(LCAError, match="surface must be"):
        migration(scenarios=str(FIXTURE), surface="system")
    with pytest.raises(LCAError, match="harness must be"):
        migration(scenarios=str(FIXTURE), harness="inspect")
    with pytest.raises(LCAError, match="field 'bindings'.*'venue' is not an axis"):
        migration(scenarios=str(FIXTURE), bindings="host,model+venue")


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("host,venue", "'venue' is not an axis"),
        ("model+venue", "'venue' is not an axis"),
        ("host,host", "names the move host twice"),
        ("model+surface,surface+model", "names the move model+surface twice"),
        ("model+model", "an axis is repeated"),
        ("model+", "an axis is empty"),
        (" , ", "names no move"),
    ],
)
def test_bad_bindings_are_refused_naming_the_field(spec, problem):
    with pytest.raises(LCAError, match="field 'bindings'") as refused:
        parse_bindings(spec)
    assert problem in str(refused.value) and "\n" not in str(refused.value)


def test_bindings_are_single_axes_or_combined_moves_in_one_spelling():
    assert parse_bindings("host, harness") == ("host", "harness")
    assert parse_bindings("surface+model,host+model+surface,harness+model") == (
        "model+surface",
        "host+model+surface",
        "model+harness",
    )
    assert binding_axes("host+model+surface") == ("host", "model", "surface")


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
