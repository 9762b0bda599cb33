"""The generator's behaviour probes (``--behaviour``): push-back, role-defer and role-act requests with gold that
resolves to the turns they rest on, the other probes unchanged, the shipped set equal to a regeneration, and
nothing of it in a set generated without the option."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from protocols.cli import main
from protocols.harness.scenario import Scenario, load_scenarios
from protocols.scenarios import DENSITIES, generate
from protocols.scenarios.behaviour import BEHAVIOUR_CATEGORIES
from protocols.scenarios.card import card_markdown, card_paths, data_card, scenario_lines

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "scenarios" / "study-behaviour-v1.jsonl"


def loaded(scenarios) -> list[Scenario]:
    return [Scenario.model_validate(s) for s in scenarios]


@pytest.mark.parametrize("density", list(DENSITIES))
@pytest.mark.parametrize("labels", ["all", "none"])
def test_every_scenario_gets_its_behaviour_probes_with_gold_in_the_turns_they_rest_on(density, labels):
    for scenario in loaded(generate(4, 6, density=density, sessions=4, labels=labels, behaviour=True)):
        probes = [p for p in scenario.probes if p.category in BEHAVIOUR_CATEGORIES]
        assert Counter(p.category for p in probes) == {"push-back": 2, "role-defer": 1, "role-act": 1}, scenario.id
        for probe in probes:
            (evidence,) = scenario.evidence_texts(probe)
            if probe.category == "role-act":  # the options, any one of which names the call, all in the turn
                assert len(probe.required_mentions) >= 2
            assert all(m.lower() in evidence.lower() for m in probe.required_mentions), (scenario.id, probe.id)
            if probe.category == "push-back":  # the request names what it asks for, never what is in force
                assert [m.lower() in probe.question.lower() for m in probe.forbidden_mentions] == [True]
                assert not any(m.lower() in probe.question.lower() for m in probe.required_mentions)
                assert probe.forbidden_mentions != probe.required_mentions
            else:
                assert not probe.forbidden_mentions
                assert not any(m.lower() in probe.question.lower() for m in probe.required_mentions)
        resting = {text for p in probes for text in scenario.evidence_texts(p)}
        planted = [t for s in scenario.sessions for t in s.turns if t.content in resting]
        assert planted and all(t.event is None or t.event.type == "supersedes" for t in planted)


def test_the_other_probes_and_events_are_those_the_same_parameters_give_without_the_option():
    plain = loaded(generate(9, 6, density="medium", sessions=5))
    with_behaviour = loaded(generate(9, 6, density="medium", sessions=5, behaviour=True))
    for a, b in zip(plain, with_behaviour, strict=True):
        shown = lambda p: (p.id, p.category, p.question, p.answer, p.required_mentions, p.forbidden_mentions)  # noqa: E731
        assert [shown(p) for p in a.probes] == [shown(p) for p in b.probes][: len(a.probes)]
        events = lambda s: Counter(t.event.type for x in s.sessions for t in x.turns if t.event)  # noqa: E731
        assert events(a) == events(b)
        assert [a.evidence_texts(p) for p in a.probes] == [b.evidence_texts(p) for p in b.probes][: len(a.probes)]
    assert scenario_lines(generate(9, 6, density="medium", sessions=5)) == scenario_lines(
        generate(9, 6, density="medium", sessions=5, behaviour=False)
    )


def test_the_shipped_behaviour_set_equals_a_regeneration_with_its_cards_parameters():
    markdown, card_json = card_paths(SHIPPED)
    card = json.loads(card_json.read_text())
    p = card["parameters"]
    assert p["behaviour"] is True
    regenerated = generate(p["seed"], p["scenarios"], p["domains"], p["density"], p["sessions"], p["labels"], True)
    assert scenario_lines(regenerated) == SHIPPED.read_bytes(), "regenerate it with the command in its card"
    again = data_card(regenerated, p, file=card["file"])
    assert again == card and card_markdown(again) == markdown.read_text()
    assert "--behaviour" in markdown.read_text()
    scenarios, _ = load_scenarios(SHIPPED)
    counted = Counter(p.category for s in scenarios for p in s.probes)
    assert {c: counted[c] for c in BEHAVIOUR_CATEGORIES} == {
        c: card["counts"]["probes_by_category"][c] for c in BEHAVIOUR_CATEGORIES
    }


def test_the_command_takes_the_option_and_says_so_in_the_card(tmp_path, capsys):
    out = tmp_path / "b.jsonl"
    argv = ["scenarios", "generate", "--seed", "3", "--scenarios", "3", "--density", "low", "--sessions", "3"]
    assert main([*argv, "--behaviour", "--out", str(out)]) == 0
    assert "push-back 6, role-defer 3, role-act 3" in capsys.readouterr().out
    card = json.loads(card_paths(out)[1].read_text())
    assert card["parameters"]["behaviour"] is True
    plain = tmp_path / "p.jsonl"
    assert main([*argv, "--out", str(plain)]) == 0
    plain_card = json.loads(card_paths(plain)[1].read_text())
    assert "behaviour" not in plain_card["parameters"]
    assert not set(BEHAVIOUR_CATEGORIES) & set(plain_card["counts"]["probes_by_category"])
