"""Which user turns set a standing rule (lca.standing_rules): the reading the handoff carries forward, so it
must catch rules said in many ways and leave descriptive uses of the same words alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lca.context import classify_turn
from lca.standing_rules import standing_rule
from tests.conftest import make_entry

LABELLED = Path(__file__).resolve().parents[2] / "data" / "calibration" / "standing-rules-v1.jsonl"


@pytest.mark.parametrize(
    "text",
    [
        "From now on, always give distances in kilometres, never in miles.",
        "Ground rules for anything you write for me: never call the wool 'organic'.",
        "Before anything else: anything you write that's going to the bank uses hectolitres.",
        "One thing I've promised the parents and want to stick to all season: everyone plays half of every match.",
        "Quick one. Please never suggest sleep training where she is left to cry.",
        "Our policy is that volunteers are never named in public posts without consent.",
        "Can you make that your default for every concert programme you help with?",  # a request, not a question
        "One house rule: always finish with the line 'Need a lift? Call Maureen.'",  # quotes a question
        "I'd like every quote you draft to state that it's valid for 30 days.",
        "Anything that ends up on a label or a listing has to say it contains sulphites.",  # the outputs it governs
        "Rules we agreed at the committee: loans are 14 days, one renewal.",  # named as rules by who set them
    ],
)
def test_a_rule_said_in_many_ways_is_read_as_one(text):
    assert standing_rule(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "I've never done a budget this organised before.",
        "June's always thin for veg.",
        "Lindqvist never operates, she's our medicine person.",
        "Which dbt tests should be non-negotiable on every mart?",  # asks about a rule; sets none
        "Never mind the spreadsheet, I found the error.",
        "Tried it: one gel every 40 minutes, always with a few sips of water.",
        "Now decorating and flooring for the rest of the flat.",
        "The staging database listens on port 6543, not the default 5432.",
        "There's a loud bang in the pipes every time the kitchen tap is shut off.",
        "Cedar it is. It'll be outside all year.",
        "Whatever ends up in the pot should be fine.",  # no obligation on what ends up there
        "Everything that appears in the paper is out of date by Friday.",
    ],
)
def test_the_same_words_said_descriptively_or_asked_are_not_a_rule(text):
    assert standing_rule(text) is None


def _labelled(part: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if part is None or int(r["id"][1:]) % 2 == part]


def _scores(rows: list[dict], says_rule) -> tuple[float, float]:
    hits = [says_rule(r["text"]) for r in rows]
    true_pos = sum(1 for r, h in zip(rows, hits, strict=True) if h and r["label"] == "rule")
    recall = true_pos / sum(1 for r in rows if r["label"] == "rule")
    precision = true_pos / max(1, sum(hits))
    return recall, precision


def test_on_the_held_out_half_of_the_labelled_set_it_finds_most_rules_and_few_false_ones():
    """The odd ids were never used to adjust the cues (data/calibration/README.md): 25 of 40 rules found, 3 of
    60 other messages taken for one, on 2026-12-04. The handoff carries what it finds into every later
    session, so precision matters more than recall."""
    rows = _labelled(part=1)
    assert len(rows) == 100 and {r["label"] for r in rows} == {"rule", "other"}
    recall, precision = _scores(rows, lambda t: standing_rule(t) is not None)
    assert recall >= 0.6 and precision >= 0.85


def test_it_is_far_more_precise_than_the_pruning_classifiers_instruction_reading():
    """classify_turn protects instruction-like turns softly, where a false alarm costs little; carried into
    every handoff it would have filled the constraints with "I've never done this" (precision about 0.4)."""

    def instruction(text: str) -> bool:
        return classify_turn(make_entry("x", 1, text)).label == "instruction"

    rows = _labelled()
    _, ours = _scores(rows, lambda t: standing_rule(t) is not None)
    _, theirs = _scores(rows, instruction)
    assert ours >= 0.9 and theirs <= 0.6
