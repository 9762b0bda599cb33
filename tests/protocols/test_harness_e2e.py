"""All six conditions on the shipped scenarios with the real local model (SmolLM2 via lca-local)
and the real embedder; checks the substrate measures differ as they must."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow
CONDITIONS = ["stateless", "identity-only", "summary", "transcript-recall", "full-lca", "adversarial-summary"]


def test_six_conditions_end_to_end_with_the_local_model(tmp_path):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.continuity.continuity import continuity

    logs = inspect_eval(
        [continuity(condition=name) for name in CONDITIONS],
        model="lca-local/smollm2",
        limit=2,
        log_dir=str(tmp_path),
        display="none",
    )
    by = {log.eval.task.removeprefix("continuity-"): log for log in logs}
    assert {name: log.status for name, log in by.items()} == {name: "success" for name in CONDITIONS}

    def measures(name):
        return [s.scores["substrate"].value for s in by[name].samples]

    def packets(name):
        return [s.scores["substrate"].metadata["packet"] for s in by[name].samples]

    for m in measures("stateless"):  # never any evidence in context
        assert m["injected_tokens"] == 0 and m["evidence_pointer"] == 0 and m["evidence_text"] == 0
    assert all(p["items"] and p["items"][0]["kind"] == "identity" for p in packets("identity-only"))
    assert all(m["evidence_pointer"] == 0 for m in measures("identity-only"))
    assert sum(m["evidence_pointer"] for m in measures("transcript-recall")) >= 1  # usually has it
    assert sum(m["evidence_pointer"] for m in measures("full-lca")) >= 1
    for name in CONDITIONS:
        for packet in packets(name):
            assert packet["injected_tokens"] <= packet["budget_tokens"]
    for packet, full in zip(packets("adversarial-summary"), packets("full-lca"), strict=True):
        assert packet["notes"]["full_lca_injected"] == full["injected_tokens"]  # measured on the same history
        assert packet["injected_tokens"] <= full["injected_tokens"]
    for log in logs:
        assert log.eval.metadata["dataset_sha256"] and log.eval.metadata["code_version"]
        for sample in log.samples:
            assert sample.output.usage and sample.output.usage.output_tokens > 0
