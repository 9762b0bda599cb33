"""Unlabelled corrections and supersessions (protocols/scenarios/labels.py, docs/scenario-format.md 'Gold events'):
the generator's ``labels`` option and ``--labels``, the ``gold_events`` a scenario file may hold and how bad ones are
refused, the data card's labelled and unlabelled counts, and the shipped unlabelled sets equal to a regeneration."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from protocols.cli import main
from protocols.harness.scenario import Scenario, load_scenarios, probe_gold, without_labels
from protocols.scenarios import generate, write_set
from protocols.scenarios.card import card_markdown, card_paths, data_card, scenario_lines
from protocols.scenarios.domains import DOMAINS
from protocols.scenarios.labels import LABEL_MODES, REPLACING_TYPES, unlabel

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "scenarios"
SMALL = DATA / "study-v1-small.jsonl"
UNLABELLED = tuple(
    DATA / name
    for name in (
        "study-v1-small-unlabelled.jsonl",
        "study-unlabelled-s101.jsonl",
        "study-unlabelled-s202.jsonl",
        "study-mixed-s303.jsonl",
    )
)
KEPT_TYPES = ("approval", "interruption")


def turn_events(scenario: dict) -> list[tuple[str, int, dict]]:
    return [
        (s["id"], n, t["event"]) for s in scenario["sessions"] for n, t in enumerate(s["turns"], 1) if t.get("event")
    ]


def without_events(scenario: dict) -> dict:
    """The scenario with every turn event and ``gold_events`` taken out: what labelling must not change."""
    data = copy.deepcopy(scenario)
    data.pop("gold_events", None)
    for session in data["sessions"]:
        for turn in session["turns"]:
            turn.pop("event", None)
    return data


def replacements(scenario: dict) -> list[tuple[str, str, str]]:
    return [(e["type"], e["of"], e["by"]) for e in Scenario.model_validate(scenario).replacement_events()]


# ---- the generator's option -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("seed", "density", "sessions"), [(18, "low", 4), (5, "medium", 3), (3, "high", 6)])
def test_labels_all_gives_the_same_bytes_as_labels_unset(seed, density, sessions):
    unset = scenario_lines(generate(seed, 6, list(DOMAINS), density, sessions))
    assert scenario_lines(generate(seed, 6, list(DOMAINS), density, sessions, labels="all")) == unset
    assert b"gold_events" not in unset


@pytest.mark.parametrize("density", ["low", "medium", "high"])
def test_labels_none_moves_every_correction_and_supersession_and_keeps_the_rest(density):
    labelled = generate(7, 6, list(DOMAINS), density, 4)
    bare = generate(7, 6, list(DOMAINS), density, 4, labels="none")
    assert len(bare) == len(labelled)
    for before, after in zip(labelled, bare, strict=True):
        on_turns = Counter(e["type"] for *_, e in turn_events(before))
        assert all(on_turns[t] for t in REPLACING_TYPES), before["id"]  # there was something to move
        assert not [e for *_, e in turn_events(after) if e["type"] in REPLACING_TYPES]
        assert Counter(g["type"] for g in after["gold_events"]) == Counter({t: on_turns[t] for t in REPLACING_TYPES})
        kept = [(s, n, e) for s, n, e in turn_events(before) if e["type"] in KEPT_TYPES]
        assert turn_events(after) == kept  # approvals and interruptions keep their labels, where they were
        assert without_events(after) == without_events(before)  # the same histories, memories and probes
        assert replacements(after) == replacements(before)  # the same events, pointer for pointer
        for moved in after["gold_events"]:
            (event,) = [e for s, n, e in turn_events(before) if (s, n) == (moved["by"]["session"], moved["by"]["turn"])]
            assert event["type"] == moved["type"] and event["of"] == moved["of"]
            assert event.get("right") == moved.get("right")


def test_labels_mixed_is_deterministic_and_moves_some_but_not_all():
    first = generate(11, 12, list(DOMAINS), "medium", 4, labels="mixed")
    assert scenario_lines(first) == scenario_lines(generate(11, 12, list(DOMAINS), "medium", 4, labels="mixed"))
    labelled = generate(11, 12, list(DOMAINS), "medium", 4)
    moved = sum(len(s.get("gold_events", ())) for s in first)
    left = sum(1 for s in first for *_, e in turn_events(s) if e["type"] in REPLACING_TYPES)
    total = sum(1 for s in labelled for *_, e in turn_events(s) if e["type"] in REPLACING_TYPES)
    assert 0 < moved < total and moved + left == total
    for before, after in zip(labelled, first, strict=True):
        assert replacements(after) == replacements(before) and without_events(after) == without_events(before)
        kept = [(s, n, e) for s, n, e in turn_events(before) if e["type"] in KEPT_TYPES]
        assert [x for x in turn_events(after) if x[2]["type"] in KEPT_TYPES] == kept


def test_mixed_choices_depend_on_the_seed_and_the_scenario():
    labelled = generate(11, 12, list(DOMAINS), "medium", 4)

    def choice(seed: int) -> list[list[tuple[str, int]]]:
        return [
            [(g["by"]["session"], g["by"]["turn"]) for g in unlabel(s, "mixed", seed=seed).get("gold_events", ())]
            for s in labelled
        ]

    assert choice(1) == choice(1) and choice(1) != choice(2)
    assert len({tuple(c) for c in choice(1)}) > 1  # not the same draw for every scenario


def test_an_unknown_labels_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="^labels: one of all, none, mixed"):
        generate(1, 2, list(DOMAINS), "low", 4, labels="some")
    with pytest.raises(ValueError, match="labels must be one of"):
        unlabel(generate(1, 1, list(DOMAINS), "low", 4)[0], "partial")
    assert LABEL_MODES == ("all", "none", "mixed")


def test_a_labelled_set_read_unlabelled_is_the_generated_unlabelled_set():
    """``without_labels`` on a loaded scenario and the generator's ``labels`` give the same scenario."""
    labelled, _ = load_scenarios(SMALL)
    bare = [Scenario.model_validate(s) for s in generate(18, 6, list(DOMAINS), "low", 4, labels="none")]
    for loaded, generated in zip(labelled, bare, strict=True):
        assert without_labels(loaded, "none", seed=18) == generated
        assert without_labels(loaded, "all") is loaded
        events = generated.replacement_events()
        assert events and not any(e["labelled"] for e in events)
        assert [e | {"labelled": True} for e in events] == loaded.replacement_events()
        assert probe_gold(generated, generated.probes[0])["events"] == events


# ---- gold_events in a file --------------------------------------------------------------------------------------
def gold_scenario(**over) -> dict:
    """Two sessions; turn s1:3 corrects s1:2 and s2:2 replaces s1:4, neither labelled; s2:3 approves s2:2."""
    scenario = {
        "schema_version": 2,
        "id": "gold",
        "sessions": [
            {
                "id": "s1",
                "started_at": "2026-03-02T09:00:00",
                "turns": [
                    {"role": "user", "content": "When does the payroll export run?"},
                    {"role": "assistant", "content": "It runs on the 20th."},
                    {"role": "user", "content": "No, the 25th."},
                    {"role": "user", "content": "We ship releases on Tuesdays."},
                ],
            },
            {
                "id": "s2",
                "started_at": "2026-03-09T09:00:00",
                "turns": [
                    {"role": "user", "content": "Anything new?"},
                    {"role": "user", "content": "Releases move to Thursdays from now on."},
                    {
                        "role": "user",
                        "content": "Yes, approved.",
                        "event": {"type": "approval", "of": {"session": "s2", "turn": 2}},
                    },
                ],
            },
        ],
        "probes": [
            {
                "id": "q1",
                "question": "When does the payroll export run?",
                "answer": "the 25th",
                "evidence": [{"session": "s1", "turn": 3}],
            }
        ],
        "gold_events": [
            {
                "type": "correction",
                "of": {"session": "s1", "turn": 2},
                "by": {"session": "s1", "turn": 3},
                "right": "the 25th",
            },
            {"type": "supersedes", "of": {"session": "s1", "turn": 4}, "by": {"session": "s2", "turn": 2}},
        ],
    }
    scenario.update(over)
    return scenario


def write(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_gold_events_load_and_reach_only_the_gold(tmp_path):
    (scenario,), _ = load_scenarios(write(tmp_path, gold_scenario()))
    events = scenario.replacement_events()
    assert [(e["type"], e["of"], e["by"], e["labelled"]) for e in events] == [
        ("correction", "gold.s1#gold.s1:2", "gold.s1#gold.s1:3", False),
        ("supersedes", "gold.s1#gold.s1:4", "gold.s2#gold.s2:2", False),
    ]
    assert probe_gold(scenario, scenario.probes[0])["events"] == events
    metas = [e.meta for s in scenario.sessions for e in scenario.entries(s)]
    assert [m["event"]["type"] for m in metas if "event" in m] == ["approval"]  # a condition sees no gold event


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda g: g[0].update(of={"session": "s1", "turn": 3}, by={"session": "s1", "turn": 2}), "must come after"),
        (lambda g: g[1].update(by={"session": "s1", "turn": 4}), "must come after"),  # by == of
        (lambda g: g[1].update(of={"session": "s2", "turn": 1}, by={"session": "s1", "turn": 3}), "must come after"),
        (lambda g: g[0].update(of={"session": "s1", "turn": 9}), "of: s1 turn 9 is not in the history"),
        (lambda g: g[1].update(by={"session": "s7", "turn": 1}), "by: s7 turn 1 is not in the history"),
        (lambda g: g[1].update(by={"session": "s2", "turn": 3}), "s2 turn 3 already labels an event"),
    ],
)
def test_a_bad_gold_event_is_refused_naming_file_line_and_field(tmp_path, mutate, reason):
    data = gold_scenario()
    mutate(data["gold_events"])
    path = write(tmp_path, gold_scenario(id="fine"), data)
    with pytest.raises(RecordFormatError) as info:
        load_scenarios(path)
    message = str(info.value)
    assert str(path) in message and "line 2" in message and "gold_events[" in message and reason in message


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda g: g[0].update(type="approval"), "gold_events.0.type"),
        (lambda g: g[1].pop("by"), "gold_events.1.by"),
        (lambda g: g[0].update(when="later"), "gold_events.0.when"),
    ],
)
def test_a_malformed_gold_event_is_refused_with_its_field(tmp_path, mutate, field):
    data = gold_scenario()
    mutate(data["gold_events"])
    with pytest.raises(RecordFormatError) as info:
        load_scenarios(write(tmp_path, data))
    assert info.value.field == field and info.value.line == 1


def test_a_version_1_file_refuses_gold_events(tmp_path):
    data = gold_scenario(schema_version=1)
    data["sessions"][1]["turns"].pop()  # no labelled event: only the gold_events are version 2
    with pytest.raises(RecordFormatError, match="'gold_events' needs schema_version 2") as info:
        load_scenarios(write(tmp_path, data))
    assert info.value.line == 1
    data.pop("gold_events")
    assert load_scenarios(write(tmp_path, data))[0][0].gold_events == ()


# ---- the card and the shipped sets -------------------------------------------------------------------------------
def independent_gold_counts(path: Path) -> dict[str, dict[str, int]]:
    """Counted here, from the loaded file, without the card module."""
    scenarios, _ = load_scenarios(path)
    labelled = Counter(t.event.type for s in scenarios for x in s.sessions for t in x.turns if t.event is not None)
    unlabelled = Counter(g.type for s in scenarios for g in s.gold_events)
    return {t: {"labelled": labelled[t], "unlabelled": unlabelled[t]} for t in REPLACING_TYPES}


def test_the_card_counts_labelled_and_unlabelled_events(tmp_path):
    cards = {}
    for labels in LABEL_MODES:
        out, markdown, _, card = write_set(
            tmp_path / f"{labels}.jsonl",
            seed=4,
            scenarios=6,
            domains=list(DOMAINS),
            density="medium",
            sessions=4,
            labels=labels,
        )
        assert card["parameters"]["labels"] == labels
        assert card["counts"]["gold_events_by_type"] == independent_gold_counts(out)
        assert ("--labels" in markdown.read_text()) == (labels != "all")
        cards[labels] = card["counts"]["gold_events_by_type"]
    for kind in REPLACING_TYPES:
        total = cards["all"][kind]["labelled"]
        assert total > 0 and cards["all"][kind]["unlabelled"] == 0
        assert cards["none"][kind] == {"labelled": 0, "unlabelled": total}
        assert sum(cards["mixed"][kind].values()) == total
    assert cards["mixed"] != cards["all"] and cards["mixed"] != cards["none"]


@pytest.mark.parametrize("path", UNLABELLED, ids=[p.name for p in UNLABELLED])
def test_a_shipped_unlabelled_set_equals_a_regeneration_with_its_cards_parameters(path):
    markdown, card_json = card_paths(path)
    card = json.loads(card_json.read_text())
    p = card["parameters"]
    assert p["labels"] in ("none", "mixed")
    regenerated = generate(p["seed"], p["scenarios"], p["domains"], p["density"], p["sessions"], p["labels"])
    assert scenario_lines(regenerated) == path.read_bytes(), "regenerate it with the command in its card"
    again = data_card(regenerated, p, file=card["file"])
    assert again == card and card_markdown(again) == markdown.read_text()
    assert card["file"] == path.relative_to(REPO).as_posix()
    assert card["counts"]["gold_events_by_type"] == independent_gold_counts(path)
    assert f"--labels {p['labels']}" in markdown.read_text()


def test_the_unlabelled_small_set_is_the_small_set_unlabelled():
    small = json.loads(card_paths(SMALL)[1].read_text())["parameters"]
    bare = json.loads(card_paths(UNLABELLED[0])[1].read_text())["parameters"]
    assert bare == {**small, "labels": "none"}
    labelled = [json.loads(line) for line in SMALL.read_text().splitlines()]
    unlabelled = [json.loads(line) for line in UNLABELLED[0].read_text().splitlines()]
    assert [without_events(s) for s in unlabelled] == [without_events(s) for s in labelled]
    assert [replacements(s) for s in unlabelled] == [replacements(s) for s in labelled]


def test_the_other_unlabelled_sets_use_other_seeds_and_every_domain():
    shipped = {
        json.loads(card_paths(DATA / f)[1].read_text())["parameters"]["seed"]
        for f in ("study-v1-small.jsonl", "study-v1.jsonl")
    }
    for path in UNLABELLED[1:]:
        p = json.loads(card_paths(path)[1].read_text())["parameters"]
        assert p["seed"] not in shipped and sorted(p["domains"]) == sorted(DOMAINS)


# ---- the command ------------------------------------------------------------------------------------------------
def test_the_command_takes_labels_and_refuses_an_unknown_mode(tmp_path, capsys):
    out = tmp_path / "bare.jsonl"
    argv = ["scenarios", "generate", "--seed", "7", "--scenarios", "3", "--density", "low", "--sessions", "3"]
    assert main([*argv, "--labels", "none", "--out", str(out)]) == 0
    assert "unlabelled (gold_events)" in capsys.readouterr().out
    assert out.read_bytes() == scenario_lines(generate(7, 3, list(DOMAINS), "low", 3, labels="none"))
    card = json.loads(card_paths(out)[1].read_text())
    assert card["parameters"]["labels"] == "none"
    assert main([*argv, "--out", str(tmp_path / "all.jsonl")]) == 0
    assert json.loads(card_paths(tmp_path / "all.jsonl")[1].read_text())["parameters"]["labels"] == "all"
    with pytest.raises(SystemExit) as info:
        main([*argv, "--labels", "some", "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2 and "--labels" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
