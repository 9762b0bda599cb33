"""The inspect harness: scenario files, the condition solvers, the computed scorers, `lca run`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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


@pytest.mark.parametrize(
    "mutate,where",
    [
        (lambda d: "{not json", "line 2"),
        (lambda d: json.dumps({**d, "schema_version": 3}), "field 'schema_version'"),
        (
            lambda d: json.dumps({**d, "probes": [{**d["probes"][0], "evidence": [{"session": "s9", "turn": 1}]}]}),
            "is not in the history",
        ),
        (
            lambda d: json.dumps(
                {**d, "sessions": [{**d["sessions"][0], "turns": [{"role": "robot", "content": "x"}]}]}
            ),
            "field 'sessions.0.turns.0.role'",
        ),
        (lambda d: json.dumps({**d, "surprise": 1}), "field 'surprise'"),
    ],
)
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

    logs = inspect_eval(
        [continuity(condition="stateless"), continuity(condition="transcript-recall", params="floor=0.0")],
        model=fake_agent(),
        limit=4,
        log_dir=str(tmp_path),
        display="none",
    )
    by_task = {log.eval.task: log for log in logs}
    assert all(log.status == "success" for log in logs)
    stateless, recall = by_task["continuity-stateless"], by_task["continuity-transcript-recall"]

    def metric(log, scorer, name):  # a dict-valued scorer reports one entry per key
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
    assert sample.messages[0].role == "system" and sample.messages[0].text.startswith("[1] transcript:")
    assert sample.output.usage.output_tokens == 5


def test_roles_fall_back_to_the_agent_model(tmp_path, fake_embedder_for_samples):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.continuity.continuity import continuity

    (log,) = inspect_eval(
        continuity(condition="summary"), model=fake_agent(), limit=1, log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success"
    packet = log.samples[0].scores["substrate"].metadata["packet"]
    assert packet["role_calls"]["summarizer"] >= 2  # one summary per session, by the agent model
    assert packet["items"] and packet["items"][-1]["kind"] == "summary"


def test_lca_run_refuses_unknown_names_and_unresolvable_models_before_any_sample(tmp_path, capsys):
    assert cli.main(["run", "continuity", "--conditions", "stateless,telepathy", "--model", "x/y"]) == 2
    assert "unknown condition 'telepathy'; known: adversarial-summary" in capsys.readouterr().err
    assert cli.main(["run", "hollow-copy-9", "--conditions", "stateless", "--model", "x/y"]) == 2
    err = capsys.readouterr().err
    assert "unknown protocol 'hollow-copy-9'; known: " in err and "continuity" in err and "hollow_copy" in err
    assert (
        cli.main(
            [
                "run",
                "continuity",
                "--conditions",
                "stateless",
                "--model",
                "nosuchprovider/model",
                "--log-dir",
                str(tmp_path / "logs"),
            ]
        )
        == 2
    )
    assert "cannot be resolved" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()
    assert cli.main(["run", "continuity", "--conditions", "full-lca", "--model", "x/y", "-T", "params=gravity=1"]) == 2
    assert "has no parameter 'gravity'" in capsys.readouterr().err


def test_shared_role_calls_run_an_identical_call_once_even_when_asked_concurrently():
    import threading
    import time

    shared = solvers.SharedRoleCalls(capacity=2)
    ran: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow_call():
        ran.append("slow")
        started.set()
        release.wait(5)
        return "summary"

    results = []
    first = threading.Thread(target=lambda: results.append(shared.run("k", slow_call)))
    first.start()
    started.wait(5)
    second = threading.Thread(target=lambda: results.append(shared.run("k", slow_call)))
    second.start()
    time.sleep(0.05)  # the second asker is now waiting on the first call
    release.set()
    first.join(5)
    second.join(5)
    assert ran == ["slow"] and sorted(results) == [("summary", False), ("summary", True)]
    assert shared.run("k", lambda: "other") == ("summary", True)
    assert shared.run("j", lambda: "other") == ("other", False)  # another prompt is another call

    def failing():
        raise RuntimeError("fake model failure")

    with pytest.raises(RuntimeError):
        shared.run("f", failing)
    assert shared.run("f", lambda: "retried") == ("retried", False)  # a failure is not remembered
    shared.run("m", lambda: "x")
    assert len(shared._calls) <= 2  # bounded: the oldest finished calls go first


def test_samples_of_one_history_share_the_summarizer_calls(tmp_path, fake_embedder_for_samples, monkeypatch):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.continuity.continuity import continuity

    monkeypatch.setattr(solvers, "SHARED_ROLE_CALLS", solvers.SharedRoleCalls())
    prompts: list[str] = []
    agent = fake_agent()
    api_generate = agent.api.generate

    async def counting(input, tools, tool_choice, config):
        if input and "memory summary" in input[0].text:
            prompts.append(input[-1].text)
        return await api_generate(input, tools, tool_choice, config)

    agent.api.generate = counting
    scenarios, _ = load_scenarios(SCENARIOS)
    probes = len(scenarios[0].probes)
    assert probes >= 2
    (log,) = inspect_eval(
        continuity(condition="summary"), model=agent, limit=probes, log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success"
    packets = [s.scores["substrate"].metadata["packet"] for s in log.samples]
    asked = sum(p["role_calls"]["summarizer"] for p in packets)
    shared_calls = sum(p["role_calls_shared"]["summarizer"] for p in packets)
    assert len(prompts) == len(set(prompts)) == asked - shared_calls  # each distinct prompt reached the model once
    assert asked == probes * packets[0]["role_calls"]["summarizer"] and shared_calls == asked - len(prompts) > 0
    summaries = {next(i["text"] for i in p["items"] if i["kind"] == "summary") for p in packets}
    assert len(summaries) == 1  # every probe of the history sees the one summary of it


def test_the_shared_embedder_embeds_a_text_once_per_process(monkeypatch):
    import lca.index.embedders as embedders

    embedded: list[str] = []

    class FakeCountingEmbedder(FakeHashingEmbedder):
        def embed(self, texts):
            embedded.extend(texts)
            return super().embed(texts)

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", FakeCountingEmbedder)
    monkeypatch.setattr(solvers, "_EMBEDDER", None)
    shared = solvers.shared_embedder()
    assert solvers.shared_embedder() is shared
    embedded.clear()  # the warm-up
    first = shared.embed(["Caroline went to a support group.", "Melanie paints sunsets."])
    again = shared.embed(["Melanie paints sunsets.", "Caroline went to a support group.", "A new turn."])
    assert embedded == ["Caroline went to a support group.", "Melanie paints sunsets.", "A new turn."]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[1], first[0])
    assert shared.embedder_id == FakeCountingEmbedder().embedder_id


def test_a_sample_building_its_context_holds_the_shared_embedder_alone():
    """While one thread holds ``exclusive()`` (its recall is being timed), another thread's embedding waits; the
    holder's own calls go through, and token counts (the tokenizer, not the model) never wait."""
    import threading

    shared = solvers.LockedEmbedder(FakeHashingEmbedder())
    holding, release, other_done = threading.Event(), threading.Event(), threading.Event()
    counted: list[int] = []

    def holder():
        with shared.exclusive():
            shared.embed_query("my own query")  # re-entrant: the holder is not blocked by its own hold
            holding.set()
            release.wait(5)

    def other():
        counted.extend(shared.count_tokens(["a turn being ingested"]))
        shared.embed(["a turn being ingested"])
        other_done.set()

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(5)
    second = threading.Thread(target=other)
    second.start()
    assert not other_done.wait(0.3)  # its embedding waits for the hold
    assert counted  # ... but its token count did not
    release.set()
    first.join(5)
    assert other_done.wait(5)
    second.join(5)
