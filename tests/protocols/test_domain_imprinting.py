"""Domain imprinting's scorers on hand-made cases (passing and failing ones, and NaN where a measure does not
apply), its samples' metadata, and the task end to end with inspect's mockllm: an agent that reads its context
applies in-domain lessons and not out-of-domain ones, one that repeats the mistake scores it, and the per-checkpoint
curves come out of the log."""

from __future__ import annotations

import math

import pytest

import protocols.harness.solvers as solvers
from protocols.evals.domain_imprinting.dataset import FIXTURE, imprinting_samples
from protocols.evals.domain_imprinting.scorer import behaviour_values, checkpoint_curves, context_values
from protocols.harness.scenario import load_scenarios
from tests.conditions.test_contract import fake_role
from tests.fakes import FakeHashingEmbedder

GOLD = {
    "evidence": ["a.s1#a.s1:2", "a.s2#a.s2:5"],
    "forbidden": ["a.s1#a.s1:1"],
    "required_mentions": ["6543"],
    "forbidden_mentions": ["5432"],
}


def packet(*items):
    return {
        "pointers": sorted({p for i in items for p in i["pointers"]}),
        "items": list(items),
        "injected_text": "\n".join(i["text"] for i in items),
    }


def item(kind, text, *pointers, tokens=10):
    return {"kind": kind, "text": text, "pointers": list(pointers), "tokens": tokens}


# ---- the substrate level --------------------------------------------------------------------------------------
def test_a_teaching_turn_in_the_context_counts_and_the_mistake_kept_out_counts():
    held = packet(item("transcript", "No, the staging database listens on 6543.", "a.s1#a.s1:2"))
    v = context_values("in-domain", GOLD, held)
    assert v["lesson_in_context"] == 1.0 and v["seen_lesson_in_context"] == 1.0
    assert v["lesson_turns_share"] == 0.5 and v["mistake_kept_out"] == 1.0
    assert math.isnan(v["off_domain_recalled_tokens"]) and math.isnan(v["off_domain_quiet"])


def test_a_context_without_the_lesson_or_with_the_mistake_fails():
    chatter = packet(item("transcript", "Standup moved to a quarter past ten.", "a.s1#a.s1:7"))
    assert context_values("in-domain", GOLD, chatter)["lesson_in_context"] == 0.0
    mistake = packet(
        item("transcript", "No, the staging database listens on 6543.", "a.s1#a.s1:2"),
        item("transcript", "I'll run the backfill on port 5432.", "a.s1#a.s1:1"),
    )
    v = context_values("in-domain", GOLD, mistake)
    assert v["lesson_in_context"] == 1.0 and v["mistake_kept_out"] == 0.0  # the mistaken turn got in
    summary = packet(item("summary", "The backfill uses port 5432.", tokens=5))  # the wrong value, no pointer
    assert context_values("in-domain", GOLD, summary)["mistake_kept_out"] == 0.0
    negated = packet(item("summary", "The port is not 5432.", tokens=5))
    assert context_values("in-domain", GOLD, negated)["mistake_kept_out"] == 1.0


def test_a_lesson_not_met_yet_scores_zero_in_the_curve_and_nan_where_it_cannot_apply():
    unseen = {**GOLD, "evidence": [], "forbidden": []}
    v = context_values("in-domain", unseen, packet())
    assert v["lesson_in_context"] == 0.0
    assert all(math.isnan(v[k]) for k in ("seen_lesson_in_context", "lesson_turns_share", "mistake_kept_out"))


def test_out_of_domain_counts_recalled_noise_not_standing_items():
    noisy = packet(
        item("identity", "You are an assistant.", tokens=7), item("transcript", "x", "b.s1#b.s1:3", tokens=12)
    )
    v = context_values("out-of-domain", {**GOLD, "evidence": [], "forbidden": []}, noisy)
    assert v["off_domain_recalled_tokens"] == 12.0 and v["off_domain_quiet"] == 0.0
    assert math.isnan(v["lesson_in_context"])
    quiet = context_values("out-of-domain", GOLD, packet(item("handoff", "last time: ...", tokens=30)))
    assert quiet["off_domain_quiet"] == 1.0 and quiet["off_domain_recalled_tokens"] == 0.0


# ---- the behaviour level --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "answer,applied,repeated",
    [
        ("Connect on port 6543.", 1.0, 0.0),
        ("postgres://staging:6543/app", 0.0, 0.0),  # lexical: a value glued into a URL is one word, not matched
        ("Use port 6543, not 5432.", 1.0, 0.0),  # the wrong value negated is not asserted
        ("Use port 5432.", 0.0, 1.0),
        ("Port 6543 or maybe 5432.", 0.0, 1.0),
        ("I'm not sure which port, 6543?", 0.0, 0.0),  # a hedge is not an application
        ("Connect to staging.", 0.0, 0.0),
    ],
)
def test_the_answer_applies_the_lesson_or_repeats_the_mistake(answer, applied, repeated):
    v = behaviour_values("in-domain", GOLD, answer)
    assert (v["lesson_applied"], v["mistake_repeated"]) == (applied, repeated)
    assert math.isnan(v["off_domain_applied"])
    out = behaviour_values("out-of-domain", GOLD, answer)
    assert out["off_domain_applied"] == applied and math.isnan(out["lesson_applied"])


def test_samples_carry_the_agent_checkpoint_and_case_and_other_files_are_refused(tmp_path):
    samples, digest, meta = imprinting_samples(FIXTURE)
    assert meta["checkpoints"] == [0, 1] and len(meta["agents"]) == 2 and len(digest) == 64
    first = samples[0].metadata["imprinting"]
    assert first["checkpoint"] == 0 and first["in_domain"] == (first["agent"] == first["probe_domain"])
    from lca.errors import RecordFormatError

    other = tmp_path / "other.jsonl"
    other.write_text((FIXTURE.read_text().splitlines()[0].replace('"imprint-', '"other-', 1)) + "\n")
    with pytest.raises(RecordFormatError, match="not a domain-imprinting scenario id"):
        imprinting_samples(other)


def test_a_checkpoint_selection_keeps_those_checkpoints_of_every_agent_and_refuses_unknown_ones():
    from lca.errors import RecordFormatError
    from protocols.evals.domain_imprinting.dataset import parse_checkpoints

    everything, _, _ = imprinting_samples(FIXTURE)
    later, _, meta = imprinting_samples(FIXTURE, checkpoints=(1,))
    assert {s.metadata["imprinting"]["checkpoint"] for s in later} == {1}
    assert {s.metadata["imprinting"]["agent"] for s in later} == set(meta["agents"]) and len(meta["agents"]) == 2
    assert [s.id for s in later] == [s.id for s in everything if s.metadata["imprinting"]["checkpoint"] == 1]
    assert meta["checkpoints"] == [1] and meta["checkpoints_in_file"] == [0, 1]
    assert sum(meta["cases"].values()) == len(later) < len(everything)
    assert parse_checkpoints(" 4,0,4 ") == (0, 4) and parse_checkpoints("") == ()
    from lca.params import ParameterError

    with pytest.raises(ParameterError, match="-T 'checkpoints=0,last': .*'last'"):
        parse_checkpoints("0,last")
    with pytest.raises(RecordFormatError, match=r"checkpoints \[7\] not in the file \(it has \[0, 1\]\)"):
        imprinting_samples(FIXTURE, checkpoints=(1, 7))
    from protocols.evals.domain_imprinting.domain_imprinting import domain_imprinting

    task = domain_imprinting(scenarios=str(FIXTURE), checkpoints="1")  # the task parameter -T checkpoints=1
    assert len(task.dataset) == len(later) and task.metadata["checkpoints"] == [1]
    with pytest.raises(ParameterError, match="checkpoints=first"):  # a one-line CLI error, not a traceback
        domain_imprinting(scenarios=str(FIXTURE), checkpoints="first")


# ---- end to end with mockllm ----------------------------------------------------------------------------------
def scripted_agent(script: str):
    """``reader``: answers a case with its right value when the context it was given holds that value, else says it
    does not know; ``wrong``: always answers with the case's wrong value (or nothing useful)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    scenarios, _ = load_scenarios(FIXTURE)
    cases = {p.question: p for s in scenarios for p in s.probes}

    def respond(messages, tools, tool_choice, config):
        plain = [{"role": m.role, "content": m.text} for m in messages]
        case = cases.get(plain[-1]["content"].strip())
        if case is None:
            text = fake_role(plain)
        elif script == "reader":
            context = "\n".join(m["content"] for m in plain[:-1])
            text = f"Use {case.answer}." if case.answer in context else "I don't know."
        else:
            text = f"Use {case.forbidden_mentions[0]}." if case.forbidden_mentions else "Use the usual one."
        output = ModelOutput.from_content(model=f"scripted-{script}", content=text)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


@pytest.fixture
def fake_embedder(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))


def test_the_score_moves_the_right_way_end_to_end(fake_embedder, tmp_path):
    from inspect_ai import eval as inspect_eval

    from protocols.evals.domain_imprinting.domain_imprinting import domain_imprinting

    def run(script):
        task = domain_imprinting(scenarios=str(FIXTURE), params="consolidate=0;floor=0.0")
        (log,) = inspect_eval(task, model=scripted_agent(script), log_dir=str(tmp_path / script), display="none")
        assert log.status == "success", log.error
        return log

    reader, wrong = run("reader"), run("wrong")
    got = {r.name: r.metrics["applicable_mean"].value for r in reader.results.scores if "applicable_mean" in r.metrics}
    bad = {r.name: r.metrics["applicable_mean"].value for r in wrong.results.scores if "applicable_mean" in r.metrics}
    assert got["lesson_applied"] > got["off_domain_applied"] == 0.0  # only the domain's history holds its lessons
    assert got["mistake_repeated"] == 0.0 and bad["mistake_repeated"] == 1.0 and bad["lesson_applied"] == 0.0
    assert got["lesson_in_context"] > 0.0 and got["lesson_in_context"] == bad["lesson_in_context"]  # context only
    curves = checkpoint_curves(reader.samples)
    assert curves["in-domain"][0]["lesson_in_context"] == 0.0  # nothing met at onboarding
    assert curves["in-domain"][1]["lesson_in_context"] > 0.0
    assert curves["in-domain"][1]["lesson_applied"] > curves["in-domain"][0]["lesson_applied"] == 0.0
    assert "lesson_in_context" not in curves["out-of-domain"][1]  # NaN there: skipped
