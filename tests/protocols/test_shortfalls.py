"""A condition that did less than it claims is flagged: in its packet, the eval log's sample metadata, the
substrate scorer's ``shortfall`` measure and `lca run`'s summary counts."""

from __future__ import annotations

from pathlib import Path

import protocols.harness.solvers as solvers
from conditions import ConditionRuntime, build_condition
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]


def mute_model():
    """inspect's mock provider that says nothing useful: a writer that proposes no memory."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def respond(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model="mute", content="I do not know.")
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


def test_full_lca_names_what_it_did_less_of(tmp_path):
    condition = build_condition("full-lca")
    condition.attach(ConditionRuntime(workdir=tmp_path, embedder=FakeHashingEmbedder()))
    condition.reset()
    try:
        assert condition.shortfalls() == {}
        condition.cycles = [{"writes": 0, "failures": 2}, {"writes": 0, "failures": 0}, {"writes": 2, "failures": 1}]
        condition.handoffs = [{"session": "s1", "items": 0}, {"session": "s2", "items": 3}]
        found = condition.shortfalls()
        assert set(found) == {"failed_cycles", "empty_handoff"}  # a cycle wrote, so memories were written
        assert "1 of 3" in found["failed_cycles"]  # a cycle that wrote despite a failure did not fail
        condition.cycles = condition.cycles[:2]
        assert "2 cycle" in condition.shortfalls()["no_memories_written"]
        assert found["empty_handoff"].endswith("s1")
        condition.set_params(consolidate=0, handoff=0)  # switched off: nothing was claimed, nothing is missing
        assert condition.shortfalls() == {}
        condition.cycles = [{"writes": 1, "failures": 0}]
        condition.set_params(consolidate=1)
        assert condition.shortfalls() == {}
    finally:
        condition.close()


def test_a_run_counts_the_samples_whose_condition_did_less(tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    from protocols.cli.run import shortfall_counts
    from protocols.evals.continuity.continuity import continuity

    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    (log,) = inspect_eval(
        continuity(condition="full-lca"), model=mute_model(), limit=2, log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success"
    for sample in log.samples:
        assert "no_memories_written" in sample.metadata["shortfalls"]
        assert sample.scores["substrate"].value["shortfall"] == 1.0
    counts = shortfall_counts(log)
    assert counts["no_memories_written"] == 2
    result = next(r for r in log.results.scores if r.scorer == "substrate" and r.name == "shortfall")
    assert result.metrics["mean"].value == 1.0


def test_a_summary_condition_whose_summarizer_wrote_nothing_says_so(tmp_path):
    from conditions import Probe, Session
    from tests.conftest import make_entry
    from tests.fakes import FakeScriptedGenerator

    generator = FakeScriptedGenerator(lambda messages: "   ")
    runtime = ConditionRuntime(workdir=tmp_path, embedder=FakeHashingEmbedder(), generators={"agent": generator})
    condition = build_condition("summary").attach(runtime)
    condition.reset()
    condition.ingest(Session("s1", (make_entry("s1", 1, "the payroll export runs on the 25th"),)))
    condition.end_session()
    packet = condition.build_context(Probe("q1", "When does payroll run?"))
    assert set(packet.notes["shortfalls"]) == {"empty_summary"} and not packet.items
