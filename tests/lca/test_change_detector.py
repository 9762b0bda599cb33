"""lca.change_detector: the model-free detector of which earlier turn a new turn corrects or replaces."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from lca.change_detector import (
    DETECTOR,
    FEATURES,
    MIN_KEPT,
    ChangeModel,
    StructuralChangeDetector,
    Tree,
    facts_of,
    names_of,
    numbers_of,
    ordered,
)
from lca.errors import RecordFormatError
from lca.types import EntryKind
from tests.conftest import make_entry

AGENT = EntryKind.ASSISTANT_TURN
BUDGET = "My weekly budget for groceries is $120."
NEW_BUDGET = "Change of plan, the grocery budget is now $150."
LONG_ANSWER = (
    "There are three flats to consider. Hartley Lofts costs $900 a month and is near the station. "
    "Bramble Court costs $850 a month with a garden. Quay House costs $1,000 a month with a gym. "
    "All three can start in April."
)


def turn(session: str, n: int, text: str, at: str, *, agent: bool = False, **kw):
    return make_entry(session, n, text, timestamp=at, kind=AGENT if agent else EntryKind.USER_TURN, **kw)


def history():
    """A user states a budget, talks of something else, then changes the budget with a change word."""
    return [
        turn("s1", 1, BUDGET, "2026-03-01T09:01:00"),
        turn("s1", 2, "Got it.", "2026-03-01T09:01:30", agent=True),
        turn("s2", 1, "Tomatoes and basil along the south fence this spring.", "2026-03-05T10:01:00"),
        turn("s2", 2, "Sounds lovely.", "2026-03-05T10:01:30", agent=True),
        turn("s3", 1, NEW_BUDGET, "2026-03-10T09:00:00"),
        turn("s3", 2, "Okay, $150 a week from now on.", "2026-03-10T09:00:30", agent=True),
    ]


def longer_history():
    """Three sessions, each with a value stated and a later change of it said in another session."""
    return [
        turn("s1", 1, BUDGET, "2026-03-01T09:00:00"),
        turn("s1", 2, "Got it.", "2026-03-01T09:00:30", agent=True),
        turn("s1", 3, "I usually swim at Northgate pool on Tuesdays.", "2026-03-01T09:01:00"),
        turn("s1", 4, "Nice routine.", "2026-03-01T09:01:30", agent=True),
        turn("s2", 1, "Please book the dentist appointment for Thursday at 3pm with Dr Patel.", "2026-03-04T08:00:00"),
        turn("s2", 2, "Booked.", "2026-03-04T08:00:30", agent=True),
        turn("s2", 3, NEW_BUDGET, "2026-03-04T08:01:00"),
        turn("s3", 1, "I switched to swimming at Riverside pool on Tuesdays now.", "2026-03-08T18:00:00"),
        turn("s3", 2, "Switch the dentist appointment to Friday at 11am instead.", "2026-03-08T18:01:00"),
        turn("s3", 3, "Done.", "2026-03-08T18:01:30", agent=True),
    ]


def pairs(entries, model: ChangeModel | None = None) -> list[tuple[str, str]]:
    detector = StructuralChangeDetector(model=model or ChangeModel(0.0))
    return [(of, by) for of, by, _ in detector.candidate_pairs(entries)]


def logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def stump(feature: int, threshold: float, left: float, right: float) -> Tree:
    return Tree((feature, -2, -2), (threshold, -2.0, -2.0), (1, -1, -1), (2, -1, -1), (0.0, left, right))


# ---- the model -----------------------------------------------------------------------------------
def test_an_empty_model_scores_every_pair_at_the_logistic_of_init():
    zeros, ones = dict.fromkeys(FEATURES, 0.0), dict.fromkeys(FEATURES, 1.0)
    for init in (-2.0, 0.0, 1.5):
        model = ChangeModel(init=init)
        assert model.confidence(zeros) == model.confidence(ones) == pytest.approx(logistic(init))
    assert ChangeModel(init=1e6).confidence(zeros) == pytest.approx(1.0)  # clamped, no overflow
    assert 0.0 < ChangeModel(init=-1e6).confidence(zeros) < 1e-20


def test_a_tree_goes_left_on_less_or_equal():
    index = FEATURES.index("overlap")
    tree = stump(index, 0.5, left=-3.0, right=4.0)
    row = [0.0] * len(FEATURES)
    row[index] = 0.5
    assert tree.predict(row) == -3.0
    row[index] = 0.5000001
    assert tree.predict(row) == 4.0
    model = ChangeModel(init=0.25, rate=0.5, trees=(tree,))
    features = dict.fromkeys(FEATURES, 0.0)
    features["overlap"] = 0.5
    assert model.confidence(features) == pytest.approx(logistic(0.25 + 0.5 * -3.0))
    features["overlap"] = 0.9
    assert model.confidence(features) == pytest.approx(logistic(0.25 + 0.5 * 4.0))


def test_trees_sum_and_a_deeper_tree_walks_to_its_leaf():
    a, b = FEATURES.index("corrects"), FEATURES.index("marks_change")
    #        0: corrects <= 0.5
    #   1: marks_change <= 0.5     2: leaf 5
    # 3: leaf -1   4: leaf 2
    deep = Tree((a, b, -2, -2, -2), (0.5, 0.5, -2, -2, -2), (1, 3, -1, -1, -1), (2, 4, -1, -1, -1), (0, 0, 5, -1, 2))
    flat = stump(FEATURES.index("overlap"), 0.3, left=0.0, right=1.0)
    model = ChangeModel(init=-1.0, rate=0.1, trees=(deep, flat))
    f = dict.fromkeys(FEATURES, 0.0)
    assert model.confidence(f) == pytest.approx(logistic(-1.0 + 0.1 * (-1 + 0)))
    f["marks_change"] = 1.0
    assert model.confidence(f) == pytest.approx(logistic(-1.0 + 0.1 * (2 + 0)))
    f["corrects"], f["overlap"] = 1.0, 0.4
    assert model.confidence(f) == pytest.approx(logistic(-1.0 + 0.1 * (5 + 1)))


def test_a_model_round_trips_and_refuses_other_features():
    model = ChangeModel(-0.5, 0.2, (stump(3, 0.25, -1.0, 1.0),), ("a.jsonl@0123",))
    assert ChangeModel.from_dict(model.to_dict()) == model
    data = model.to_dict()
    with pytest.raises(RecordFormatError) as info:
        ChangeModel.from_dict({**data, "features": [*FEATURES[:-1], "mood"]}, path="m.json")
    assert info.value.field == "features" and "m.json" in str(info.value)
    with pytest.raises(RecordFormatError):
        ChangeModel.from_dict([data])
    with pytest.raises(RecordFormatError) as info:
        ChangeModel.from_dict({k: v for k, v in data.items() if k != "init"})
    assert info.value.field == "trees"
    with pytest.raises(RecordFormatError):
        ChangeModel.from_dict({**data, "trees": [{"feature": [0]}]})


def test_the_shipped_model_loads_with_its_trees_and_provenance():
    model = ChangeModel.shipped()
    assert model.trees and model.fitted_on
    assert all(len(set(map(len, (t.feature, t.threshold, t.left, t.right, t.value)))) == 1 for t in model.trees)
    assert all(0 <= f < len(FEATURES) for t in model.trees for f, left in zip(t.feature, t.left) if left != -1)
    assert ChangeModel.from_dict(model.to_dict()) == model
    assert StructuralChangeDetector().model == model  # the default


# ---- the detector with the shipped model --------------------------------------------------------
def test_a_value_restated_with_a_change_word_supersedes_the_earlier_turn():
    (event,) = StructuralChangeDetector().observe(history())
    assert (event.kind, event.of, event.by, event.origin) == ("superseded", "s1#s1:1", "s3#s3:1", "inferred")
    assert event.detector == DETECTOR and event.at == "2026-03-10T09:00:00"
    assert event.confidence >= MIN_KEPT
    assert "marks change" in event.evidence and "number conflict" in event.evidence


def test_a_confirmation_of_the_same_value_replaces_nothing():
    entries = history()
    entries[4] = turn("s3", 1, "Yes, the grocery budget is still $120 a week.", "2026-03-10T09:00:00")
    assert StructuralChangeDetector().observe(entries) == []


def test_a_user_disagreeing_with_the_agents_claim_corrects_it():
    entries = [
        turn("s1", 1, "When does the pharmacy on Elm Street close?", "2026-03-01T09:00:00"),
        turn("s1", 2, "The pharmacy on Elm Street closes at 6pm.", "2026-03-01T09:00:30", agent=True),
        turn("s1", 3, "No, it closes at 8pm on weekdays.", "2026-03-01T09:01:00"),
    ]
    (event,) = StructuralChangeDetector().observe(entries)
    assert (event.kind, event.of, event.by) == ("corrected", "s1#s1:2", "s1#s1:3")
    assert "disagrees" in event.evidence and "adjacent agent" in event.evidence


@pytest.mark.parametrize(
    ("text", "corrects"),
    [
        ("I actually have a few other plants that I've been tending to.", False),  # emphasis, inside a sentence
        ("Next, I'm actually planning to focus on the paint job.", False),
        ("Actually, the dentist moved it to Thursday.", True),  # opening the turn
        ("It was a long day. Actually the dinner is at 8, not 7.", True),  # opening a later sentence
        ("No, actually it's the 14th.", True),
        ("Sorry, I misread the form.", True),  # the other correction words, wherever they are
    ],
)
def test_actually_corrects_where_it_opens_a_sentence(text, corrects):
    assert facts_of(turn("s1", 1, text, "2026-03-01T09:00:00"), 0).corrects is corrects


def test_a_new_value_said_with_emphasis_supersedes_and_does_not_correct():
    entries = history()
    entries[4] = turn("s3", 1, "I actually changed the grocery budget to $150 a week.", "2026-03-10T09:00:00")
    (event,) = StructuralChangeDetector().observe(entries)
    assert (event.kind, event.of, event.by) == ("superseded", "s1#s1:1", "s3#s3:1")
    assert "corrects" not in event.evidence


def test_a_correction_after_the_agent_echoed_the_users_value_replaces_the_users_turn():
    entries = [
        turn(
            "s1", 1, "The Paper 1 mock is in the week of 9 March and it'll be 1 hour 15 minutes.", "2026-03-01T09:00:00"
        ),
        turn(
            "s1",
            2,
            "OK: the Paper 1 mock in the week of 9 March, 1 hour 15 minutes.",
            "2026-03-01T09:00:30",
            agent=True,
        ),
        turn("s1", 3, "Sorry, I misread the spec. It's 1 hour 45 minutes.", "2026-03-01T09:01:00"),
    ]
    (event,) = StructuralChangeDetector().observe(entries)
    assert (event.kind, event.of, event.by) == ("corrected", "s1#s1:1", "s1#s1:3")  # the user's words, not the echo
    # the agent's own value, never said by the user, stays the agent's (as the pharmacy's closing time above)
    entries[1] = replace(entries[1], content="OK: the Paper 1 mock in the week of 9 March, 2 hours.")
    entries[2] = replace(entries[2], content="No, it's 1 hour 15 minutes, as I said.")
    found = StructuralChangeDetector().observe(entries)
    assert [(e.of, e.by) for e in found] in ([], [("s1#s1:2", "s1#s1:3")])
    assert all(e.of != "s1#s1:1" for e in found)


def test_a_constant_model_keeps_every_candidate_above_min_confidence_and_none_below():
    entries = history()
    keen = StructuralChangeDetector(model=ChangeModel(init=2.0)).observe(entries)
    assert [(e.of, e.by, e.confidence) for e in keen] == [("s1#s1:1", "s3#s3:1", round(logistic(2.0), 3))]
    assert StructuralChangeDetector(model=ChangeModel(init=-2.0)).observe(entries) == []  # 0.12 < MIN_KEPT
    low_bar = StructuralChangeDetector(model=ChangeModel(init=-2.0), min_confidence=0.1).observe(entries)
    assert [e.of for e in low_bar] == ["s1#s1:1"]


def test_the_best_candidate_of_a_turn_is_kept_and_a_tie_goes_to_the_later_turn():
    entries = [
        turn("s1", 1, BUDGET, "2026-03-01T09:00:00"),
        turn("s1", 2, "My grocery budget for the week is $120, fixed.", "2026-03-02T09:00:00"),
        turn("s2", 1, NEW_BUDGET, "2026-03-03T09:00:00"),
    ]
    assert {of for of, by in pairs(entries) if by == "s2#s2:1"} == {"s1#s1:1", "s1#s1:2"}
    found = StructuralChangeDetector(model=ChangeModel(init=2.0)).observe(entries)
    assert [e.by for e in found] == ["s1#s1:2", "s2#s2:1"]  # one event per new turn that has candidates
    assert found[1].of == "s1#s1:2"  # equal confidence: the later turn


# ---- the screen ----------------------------------------------------------------------------------
def test_another_projects_turn_is_never_a_candidate():
    def two(old_project, new_project):
        old_meta = {"project": old_project} if old_project else {}
        new_meta = {"project": new_project} if new_project else {}
        return [
            turn("s1", 1, BUDGET, "2026-03-01T09:00:00", meta=old_meta),
            turn("s2", 1, NEW_BUDGET, "2026-03-02T09:00:00", meta=new_meta),
        ]

    assert pairs(two("alpha", "beta")) == []
    assert StructuralChangeDetector(model=ChangeModel(init=5.0)).observe(two("alpha", "beta")) == []
    assert pairs(two("alpha", "alpha")) == [("s1#s1:1", "s2#s2:1")]
    assert pairs(two("alpha", None)) == [("s1#s1:1", "s2#s2:1")]  # where it was said is not known: it may be


def test_one_speakers_turn_never_replaces_another_speakers():
    def two(old_speaker, new_speaker):
        return [
            turn("s1", 1, BUDGET, "2026-03-01T09:00:00", author=old_speaker),
            turn("s2", 1, NEW_BUDGET, "2026-03-02T09:00:00", author=new_speaker),
        ]

    assert pairs(two("Tim", "John")) == []  # two people, each with a budget of their own
    assert StructuralChangeDetector(model=ChangeModel(init=5.0)).observe(two("Tim", "John")) == []
    assert pairs(two("Tim", "tim ")) == [("s1#s1:1", "s2#s2:1")]  # the same speaker returning to the subject
    assert pairs(two(None, "John")) == [("s1#s1:1", "s2#s2:1")]  # who spoke first is not known: it may be


def test_a_question_is_never_replaced_and_asking_replaces_nothing():
    asked = [
        turn("s1", 1, "Is my weekly budget for groceries $120?", "2026-03-01T09:00:00"),
        turn("s2", 1, NEW_BUDGET, "2026-03-02T09:00:00"),
    ]
    assert pairs(asked) == []
    asking = [
        turn("s1", 1, BUDGET, "2026-03-01T09:00:00"),
        turn("s2", 1, "Should the grocery budget change to $150 now?", "2026-03-02T09:00:00"),
    ]
    assert pairs(asking) == []
    stated = [replace(asked[0], content=BUDGET), asked[1]]
    assert pairs(stated) == [("s1#s1:1", "s2#s2:1")]  # the same turns, stated: a candidate


def test_the_agents_answer_right_before_is_a_candidate_and_a_decision_among_its_options_replaces_nothing():
    def after(reply: str):
        return [
            turn("s1", 1, "Which flat should I rent in April?", "2026-03-01T09:00:00"),
            turn("s1", 2, LONG_ANSWER, "2026-03-01T09:00:30", agent=True),
            turn("s1", 3, reply, "2026-03-01T09:01:00"),
        ]

    # the screen keeps the agent's turn right before; the model reads whether the user disagrees or decides
    for reply in ("Let's go with Bramble Court at $850 a month.", "No, Bramble Court costs $800 a month, not $850."):
        assert ("s1#s1:2", "s1#s1:3") in pairs(after(reply))
    assert StructuralChangeDetector().observe(after("Let's go with Bramble Court at $850 a month.")) == []
    # later, in another session: a long answer is about many things, a short claim may be replaced
    later = [
        turn("s1", 2, LONG_ANSWER, "2026-03-01T09:00:30", agent=True),
        turn("s2", 1, "Bramble Court now costs $800 a month.", "2026-03-05T09:00:00"),
    ]
    assert pairs(later) == []
    later[0] = turn("s1", 2, "Bramble Court costs $850 a month.", "2026-03-01T09:00:30", agent=True)
    assert pairs(later) == [("s1#s1:2", "s2#s2:1")]


def test_only_a_users_turn_replaces():
    entries = history()
    entries[4] = turn("s3", 1, NEW_BUDGET, "2026-03-10T09:00:00", agent=True)
    assert pairs(entries) == []
    assert StructuralChangeDetector(model=ChangeModel(init=5.0)).observe(entries) == []


@pytest.mark.parametrize("label", ["correction", "supersedes"])
def test_a_turn_with_a_host_label_infers_nothing(label):
    entries = history()
    entries[4] = turn("s3", 1, NEW_BUDGET, "2026-03-10T09:00:00", meta={"event": {"type": label, "of": "s1#s1:1"}})
    assert StructuralChangeDetector().observe(entries) == []
    assert pairs(entries) == []
    # the label's turn is still read: a later unlabelled change of the same subject replaces it
    later = turn("s4", 1, "Change of plan again, the grocery budget is now $180.", "2026-03-20T09:00:00")
    detector = StructuralChangeDetector(model=ChangeModel(init=2.0))
    detector.observe(entries)
    assert ("s3#s3:1", "s4#s4:1") in [(of, by) for of, by, _ in detector.candidate_pairs([later])]


def test_an_approval_label_does_not_stop_inference():
    entries = history()
    entries[4] = turn("s3", 1, NEW_BUDGET, "2026-03-10T09:00:00", meta={"event": {"type": "approval", "of": "s1#s1:2"}})
    assert [e.by for e in StructuralChangeDetector().observe(entries)] == ["s3#s3:1"]


# ---- determinism -----------------------------------------------------------------------------
def test_the_same_events_whatever_order_the_sessions_are_fed():
    entries = longer_history()
    expected = StructuralChangeDetector().observe(entries)
    assert len(expected) >= 2  # the history holds changes to find
    by_session: dict[str, list] = {}
    for entry in entries:
        by_session.setdefault(entry.session_id, []).append(entry)
    rng = random.Random(7)
    for _ in range(4):
        order = list(by_session)
        rng.shuffle(order)
        fed = [e for session in order for e in by_session[session]]
        assert StructuralChangeDetector().observe(fed) == expected
    assert StructuralChangeDetector().observe(list(reversed(entries))) == expected


def test_remember_then_observe_finds_what_one_observe_of_all_finds():
    entries = longer_history()
    cut = 7  # s3 is new
    whole = StructuralChangeDetector().observe(entries)
    detector = StructuralChangeDetector()
    detector.remember(entries[:cut])
    found = detector.observe(entries[cut:])
    new = {f"{e.session_id}#{e.id}" for e in entries[cut:]}
    assert found and found == [e for e in whole if e.by in new]
    assert all(detector.known(f"{e.session_id}#{e.id}") for e in entries)
    # in steps, turn by turn, as ingest feeds it
    stepwise = StructuralChangeDetector()
    assert [e for entry in entries for e in stepwise.observe([entry])] == whole


def test_a_turn_read_once_is_not_read_again():
    detector = StructuralChangeDetector()
    entries = history()
    assert detector.observe(entries)
    assert detector.observe(entries) == []
    assert detector.candidate_pairs(entries) == []


def test_candidate_pairs_screen_as_observe_reads():
    """What --fit fits on is what observe scores: every event is one of the screened pairs."""
    entries = longer_history()
    screened = set(pairs(entries))
    events = StructuralChangeDetector(model=ChangeModel(init=2.0)).observe(entries)
    assert events and {(e.of, e.by) for e in events} <= screened
    assert {by for _, by in screened} == {e.by for e in events}  # every turn with a candidate made one event


def test_turns_said_at_the_same_moment_are_read_in_session_order():
    same = "2026-03-01T09:00:00"
    a = turn("s1", 1, BUDGET, same)
    b = turn("s2", 1, NEW_BUDGET, same)
    assert [e.id for e in ordered([b, a])] == [e.id for e in ordered([a, b])]
    assert StructuralChangeDetector().observe([b, a]) == StructuralChangeDetector().observe([a, b])


# ---- values and names ----------------------------------------------------------------------------
def test_numbers_of_normalizes_money_times_dates_and_units():
    assert numbers_of("It costs $12,400 and £40, at 3pm on the 12th or 9:30, 4.5kg") == {
        "12400",
        "40",
        "3pm",
        "12th",
        "9:30",
        "4.5kg",
    }
    assert numbers_of("3 PM") == {"3pm"}
    assert numbers_of("no numbers here") == frozenset()
    assert numbers_of("v2 of model x3") == frozenset()  # a digit inside a word is not a value
    assert numbers_of("$150") == numbers_of("150")  # the currency sign is not the value


def test_numbers_of_keeps_a_percent_sign():
    assert numbers_of("a 15% discount") == {"15%"}


def test_names_of_reads_capitalized_words_that_do_not_open_a_sentence():
    assert names_of("I met Sofia in Paris. Then Paris again, with Bob.") == {"sofia", "paris", "bob"}
    assert names_of("Sofia said hi. Thanks, Marco!") == {"marco"}  # a sentence's first word is not read
    assert names_of("we said Hello There and Okay") == frozenset()  # common words are not names
    assert names_of("no capitals at all") == frozenset()


def test_ordered_sorts_by_time_and_keeps_the_order_within_a_moment():
    a = turn("s1", 1, "a", "2026-03-02T00:00:00")
    b = turn("s1", 2, "b", "2026-03-01T00:00:00")
    c = turn("s1", 3, "c", "2026-03-02T00:00:00")
    assert [e.id for e in ordered([a, b, c])] == ["s1:2", "s1:1", "s1:3"]
