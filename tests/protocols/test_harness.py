"""The inspect harness: scenario files, the condition solvers, the computed scorers, `lca run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import protocols.cli as cli
import protocols.harness.solvers as solvers
from lca.errors import RecordFormatError
from protocols.harness.scenario import load_scenarios, scenario_samples
from protocols.harness.scorers import evidence_text_coverage, token_f1
from tests.conditions.test_contract import fake_role
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios" / "continuity-v1.jsonl"


@pytest.fixture
def fake_embedder_for_samples(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))


def fake_agent():
    """inspect's mock provider answering through the scripted roles; usage set so nothing is downloaded."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def respond(messages, tools, tool_choice, config):
        plain = [{"role": m.role, "content": m.text} for m in messages]
        text = fake_role(plain)
        if not plain or plain[0]["role"] != "system" or "memor" not in plain[0]["content"]:
            system = plain[0]["content"] if plain[0]["role"] == "system" else ""
            text = system.splitlines()[-1] if system else "I do not know."
        output = ModelOutput.from_content(model="fake-agent", content=text)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


def test_scenario_file_loads_into_one_sample_per_probe_with_gold_kept_for_scorers():
    scenarios, digest = load_scenarios(SCENARIOS)
    samples, same = scenario_samples(SCENARIOS)
    assert len(scenarios) == 6 and len(samples) == 11 and digest == same and len(digest) == 64
    sample = samples[0]
    assert sample.id == "family-facts:q1" and sample.target == "Santa Maria hospital in Lisbon"
    assert sample.metadata["gold"]["evidence"] == ["family-facts.s1#family-facts.s1:1"]
    entries = sample.metadata["history"]["sessions"][0]["entries"]
    assert entries[0]["id"] == "family-facts.s1:1" and entries[1]["kind"] == "assistant_turn"


@pytest.mark.parametrize("mutate,where", [
    (lambda d: "{not json", "line 2"),
    (lambda d: json.dumps({**d, "schema_version": 2}), "field 'schema_version'"),
    (lambda d: json.dumps({**d, "probes": [{**d["probes"][0], "evidence": [{"session": "s9", "turn": 1}]}]}),
     "is not in the history"),
    (lambda d: json.dumps({**d, "sessions": [{**d["sessions"][0], "turns": [{"role": "robot", "content": "x"}]}]}),
     "field 'sessions.0.turns.0.role'"),
    (lambda d: json.dumps({**d, "surprise": 1}), "field 'surprise'"),
])
def test_a_broken_scenario_file_is_refused_naming_file_line_and_field(tmp_path, mutate, where):
    lines = SCENARIOS.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + mutate(json.loads(lines[1])) + "\n")
    with pytest.raises(RecordFormatError) as info:
        load_scenarios(bad)
    assert str(bad) in str(info.value) and "line 2" in str(info.value) and where in str(info.value)


def test_answer_f1_and_evidence_coverage_are_computed_as_documented():
    assert token_f1("The answer is PostgreSQL 16.", "PostgreSQL 16") == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))
    assert token_f1("", "x") == 0.0 and token_f1("an apple", "Apple!") == 1.0
    assert evidence_text_coverage("Lucia works at Santa Maria in Lisbon", ["Lucia moved to Lisbon."]) == 2 / 3
    assert evidence_text_coverage("nothing relevant", ["Lucia moved to Lisbon."]) == 0.0


def test_eval_runs_conditions_and_records_substrate_measures_and_provenance(tmp_path, fake_embedder_for_samples):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.continuity.continuity import continuity

    logs = inspect_eval([continuity(condition="stateless"), continuity(condition="transcript-recall",
                                                                     params="floor=0.0")],
                        model=fake_agent(), limit=4, log_dir=str(tmp_path), display="none")
    by_task = {log.eval.task: log for log in logs}
    assert all(log.status == "success" for log in logs)
    stateless, recall = by_task["continuity-stateless"], by_task["continuity-transcript-recall"]

    def metric(log, scorer, name):   # a dict-valued scorer reports one entry per key
        result = next(r for r in log.results.scores if r.name == name and r.scorer == scorer)
        return result.metrics["mean"].value

    assert metric(stateless, "substrate", "injected_tokens") == 0.0
    assert metric(stateless, "substrate", "evidence_pointer") == 0.0
    assert metric(recall, "substrate", "evidence_pointer") > 0.5
    assert metric(recall, "substrate", "evidence_text") > metric(stateless, "substrate", "evidence_text")
    meta = recall.eval.task_args | recall.eval.metadata
    assert meta["condition"] == "transcript-recall" and meta["condition_params"]["floor"] == 0.0
    assert len(meta["dataset_sha256"]) == 64 and meta["code_version"] and meta["seed"] == 0
    sample = recall.samples[0]
    assert sample.messages[0].role == "system" and "[transcript:" in sample.messages[0].text
    assert sample.output.usage.output_tokens == 5


def test_roles_fall_back_to_the_agent_model(tmp_path, fake_embedder_for_samples):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.continuity.continuity import continuity

    (log,) = inspect_eval(continuity(condition="summary"), model=fake_agent(), limit=1, log_dir=str(tmp_path),
                          display="none")
    assert log.status == "success"
    packet = log.samples[0].scores["substrate"].metadata["packet"]
    assert packet["role_calls"]["summarizer"] >= 2     # one summary per session, by the agent model
    assert packet["items"] and packet["items"][-1]["kind"] == "summary"


def test_lca_run_refuses_unknown_names_and_unresolvable_models_before_any_sample(tmp_path, capsys):
    assert cli.main(["run", "continuity", "--conditions", "stateless,telepathy", "--model", "x/y"]) == 2
    assert "unknown condition 'telepathy'; known: adversarial-summary" in capsys.readouterr().err
    assert cli.main(["run", "hollow-copy-9", "--conditions", "stateless", "--model", "x/y"]) == 2
    assert "unknown protocol 'hollow-copy-9'; known: continuity" in capsys.readouterr().err
    assert cli.main(["run", "continuity", "--conditions", "stateless", "--model", "nosuchprovider/model",
                     "--log-dir", str(tmp_path / "logs")]) == 2
    assert "cannot be resolved" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()
    assert cli.main(["run", "continuity", "--conditions", "full-lca", "--model", "x/y", "-T",
                     "params=gravity=1"]) == 2
    assert "has no parameter 'gravity'" in capsys.readouterr().err
