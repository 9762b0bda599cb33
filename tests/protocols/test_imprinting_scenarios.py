"""The longitudinal generator for domain imprinting (protocols/evals/domain_imprinting/scenarios.py): deterministic bytes,
histories that load and grow as prefixes checkpoint by checkpoint, gold that points at the turns that teach each
lesson (in-domain only), novel cases that never name their right value and are the same for every agent, bad
parameters refused, and committed sets equal to a regeneration with their cards' parameters."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from lca.ledger import key_terms
from protocols.cli import main
from protocols.evals.domain_imprinting.scenarios import (
    Parameters,
    card_markdown,
    generate,
    lesson_schedule,
    parse_probe_id,
    parse_scenario_id,
    set_card,
)
from protocols.harness.scenario import Scenario, load_scenarios
from protocols.scenarios.card import card_paths, scenario_lines
from protocols.scenarios.lessons import FRESH_PROJECTS, check_vocabulary

REPO = Path(__file__).resolve().parents[2]
SHIPPED = [
    REPO / "data" / "scenarios" / "imprinting-v1.jsonl",
    REPO / "data" / "scenarios" / "imprinting-fixture.jsonl",
]
SMALL = Parameters(seed=3, epochs=3)


def test_the_same_parameters_give_the_same_bytes_and_another_seed_other_ones():
    assert scenario_lines(generate(SMALL)) == scenario_lines(generate(SMALL))
    assert scenario_lines(generate(Parameters(seed=4, epochs=3))) != scenario_lines(generate(SMALL))


def test_every_scenario_validates_and_each_checkpoint_is_a_prefix_of_the_next():
    scenarios = [Scenario.model_validate(s) for s in generate(SMALL)]
    by_agent = defaultdict(list)
    for s in scenarios:
        by_agent[parse_scenario_id(s.id)[0]].append(s)
    assert len(by_agent) == 3 and all(len(line) == 4 for line in by_agent.values())
    for line in by_agent.values():
        assert [parse_scenario_id(s.id)[1] for s in line] == [0, 1, 2, 3]
        assert [s.sessions[0].id for s in line] == ["onboarding"] * 4 and len(line[0].sessions) == 1
        for earlier, later in zip(line, line[1:], strict=False):
            assert later.sessions[: len(earlier.sessions)] == earlier.sessions
            assert len(later.sessions) == len(earlier.sessions) + SMALL.sessions_per_epoch
    onboardings = {json.dumps(line[0].sessions[0].model_dump()) for line in by_agent.values()}
    identities = {json.dumps(line[0].identity) for line in by_agent.values()}
    assert len(onboardings) == 1 and len(identities) == 1  # identical agents until their work starts


def test_cases_are_the_same_for_every_agent_in_domain_for_one_and_new_work_on_a_fresh_project():
    scenarios = [Scenario.model_validate(s) for s in generate(SMALL)]
    by_checkpoint = defaultdict(list)
    for s in scenarios:
        by_checkpoint[parse_scenario_id(s.id)[1]].append(s)
    histories = " ".join(t.content for s in scenarios for ses in s.sessions for t in ses.turns).lower()
    for group in by_checkpoint.values():
        questions = [[(p.id, p.question) for p in s.probes] for s in group]
        assert all(q == questions[0] for q in questions)  # identical questions for every agent
        for s in group:
            agent, _ = parse_scenario_id(s.id)
            for p in s.probes:
                probe_domain, _ = parse_probe_id(p.id)
                assert (p.category == "in-domain") == (probe_domain == agent)
                assert p.project in FRESH_PROJECTS and p.project not in histories
                assert p.answer.lower() not in p.question.lower()  # a case never names its right value
                assert p.required_mentions == (p.answer,)
                if p.category == "out-of-domain":
                    assert p.evidence == () and p.forbidden == ()


def test_in_domain_gold_points_at_the_teaching_turns_and_grows_with_the_schedule():
    scenarios = {s["id"]: Scenario.model_validate(s) for s in generate(SMALL)}
    schedule = lesson_schedule(SMALL)
    for scenario in scenarios.values():
        agent, k = parse_scenario_id(scenario.id)
        turns = {s.id: s.turns for s in scenario.sessions}
        for probe in scenario.probes:
            if probe.category != "in-domain":
                continue
            _, lesson = parse_probe_id(probe.id)
            plan = schedule[agent][lesson]
            exposures = sum(1 for e in plan["exposures"][:k] if e)
            assert len(probe.evidence) == exposures  # one teaching turn per exposure so far
            assert (plan["introduced"] <= k) == bool(probe.evidence)
            for ref in probe.evidence:
                turn = turns[ref.session][ref.turn - 1]
                if turn.role == "user":  # a correction: the user's turn names the right value and carries the event
                    assert turn.event.type == "correction" and probe.answer in turn.content
                else:  # an approved proposal or application: the next turn approves it
                    approval = turns[ref.session][ref.turn]
                    assert approval.event.type == "approval" and approval.event.of == ref
                    assert probe.answer in turn.content
            for ref in probe.forbidden:  # the agent's mistaken turns, each corrected by the next turn
                assert turns[ref.session][ref.turn].event.of == ref
                assert probe.forbidden_mentions[0] in turns[ref.session][ref.turn - 1].content
            if probe.evidence:  # the novel case is not a copy of what taught it
                taught = set().union(*(key_terms(turns[r.session][r.turn - 1].content) for r in probe.evidence))
                assert len(key_terms(probe.question) & taught) <= 4


def test_the_vocabulary_holds_and_bad_parameters_are_refused_naming_them():
    check_vocabulary()
    for bad, word in [
        (Parameters(seed=1, domains=("software-engineering",)), "domains"),
        (Parameters(seed=1, domains=("software-engineering", "cooking")), "cooking"),
        (Parameters(seed=1, epochs=0), "epochs"),
        (Parameters(seed=1, decisions=9), "decisions"),
        (Parameters(seed=1, reinforce=1.5), "reinforce"),
    ]:
        with pytest.raises(ValueError, match=word):
            generate(bad)
    with pytest.raises(ValueError, match="not a domain-imprinting scenario id"):
        parse_scenario_id("se-18-001")


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_committed_set_equals_a_regeneration_with_its_cards_parameters(path):
    markdown, card_json = card_paths(path)
    card = json.loads(card_json.read_text())
    p = card["parameters"]
    params = Parameters(**{**p, "domains": tuple(p["domains"])})
    regenerated = generate(params)
    assert scenario_lines(regenerated) == path.read_bytes(), "regenerate it with the command in its card"
    again = set_card(regenerated, params, file=card["file"])
    assert again == card and card_markdown(again) == markdown.read_text()
    assert card["file"] == path.relative_to(REPO).as_posix()
    load_scenarios(path)


def test_the_command_writes_the_set_and_its_card(tmp_path, capsys):
    out = tmp_path / "imprint.jsonl"
    args = ["scenarios", "longitudinal", "--seed", "5", "--domains", "software-engineering,research-assistance"]
    assert main([*args, "--epochs", "2", "--out", str(out)]) == 0
    assert "2 agents x 3 checkpoints: 6 scenarios" in capsys.readouterr().out
    markdown, card_json = card_paths(out)
    assert markdown.exists() and json.loads(card_json.read_text())["parameters"]["epochs"] == 2
    params = Parameters(seed=5, domains=("software-engineering", "research-assistance"), epochs=2)
    assert out.read_bytes() == scenario_lines(generate(params))
    assert main(["scenarios", "longitudinal", "--seed", "5", "--reinforce", "2", "--out", str(out)]) == 2
    assert "--reinforce" in capsys.readouterr().err
