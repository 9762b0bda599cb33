"""The consolidation cycle as a second detector of replacement events (lca.consolidation.replacements): the writer
proposes "this line replaces / corrects / adds to that one", the verifier checks it against the sources and in a
reviewer call of its own, and what passes is an ``event_inferred`` in the ledger that recall acts on. Scripted
writer and reviewer; the model-free detector at ingest is off, so every event here is the cycle's."""

from __future__ import annotations

import json

import pytest

from lca.consolidation import ConsolidationConfig
from lca.consolidation.parsing import parse_writer_output, parse_writer_relations
from lca.consolidation.prompts import REPLACEMENT_SYSTEM, WRITER_REPLACES
from lca.consolidation.replacements import REVIEWED_CONFIDENCE, UNVERIFIED_CONFIDENCE
from lca.events import ReplacementEvent, event_id
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator
from tests.lca.test_consolidation import say

OLD, REPLY, NEW = "s1#s1:1", "s1#s1:2", "s1#s1:3"
QUESTION = "where is the team offsite"


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), infer_events=False) as s:
        say(
            s,
            "s1",
            "The team offsite is in Lisbon on May 3rd.",
            "Noted: the offsite is in Lisbon on May 3rd.",
            "Change of plan: the team offsite moves to Porto on May 3rd.",
        )
        yield s


def writer(*relations, memories=True):
    """A JSON writer: one memory from line 3 and the relations given as (later, earlier, relation, why)."""
    answer: dict = {"memories": []}
    if memories:
        answer["memories"] = [{"type": "fact", "claim": "The team offsite is in Porto on May 3rd.", "lines": [3]}]
    answer["replaces"] = [{"later": a, "earlier": b, "relation": rel, "why": why} for a, b, rel, why in relations]
    return FakeScriptedGenerator(lambda messages: json.dumps(answer), model_id="fake-writer")


def reviewer(replacement="accept", supported=True):
    """Accepts every memory candidate; answers a replacement review with ``replacement`` (an exception is raised)."""

    def respond(messages):
        if messages[0]["content"] == REPLACEMENT_SYSTEM:
            if isinstance(replacement, BaseException):
                raise replacement
            said = {"reasoning": "The later line only adds a detail.", "supported": supported}
            return json.dumps({**said, "contradicts": "none", "verdict": replacement})
        return json.dumps(
            {"reasoning": "Line 3 says it.", "supported": True, "contradicts": "none", "verdict": "accept"}
        )

    return FakeScriptedGenerator(respond, model_id="fake-reviewer")


def replacement_calls(generator):
    return [call for call in generator.calls if call[0]["content"] == REPLACEMENT_SYSTEM]


def inferred_in_ledger(home):
    return [e for e in home.ledger.events() if e.kind == "event_inferred"]


def held_back(home, turn):
    """Why recall (RecallConfig defaults) left ``turn`` out, or None when it was injected or not a candidate."""
    result = home.recall(QUESTION)
    return next((c.why_not for c in result.candidates if c.source.startswith(f"transcript:{turn}[")), None)


MOVED = (3, 1, "replaces", "the offsite moved from Lisbon to Porto")


def test_an_accepted_replacement_is_an_inferred_event_in_the_ledger_and_recall_holds_the_old_turn_back(home):
    assert "superseded" not in (held_back(home, OLD) or "")
    r = reviewer()
    result = home.checkpoint(writer(MOVED), reviewer=r)
    (check,) = result.replacements
    assert (check.verdict, check.of, check.by, check.recorded) == ("accept", OLD, NEW, True)
    assert check.event == event_id(OLD, NEW) and check.confidence == REVIEWED_CONFIDENCE
    assert result.counts["replacements"] == {
        "proposed": 1,
        "accepted": 1,
        "rejected": 0,
        "refused": 0,
        "failed": 0,
        "known": 0,
        "recorded": 1,
        "adds_to": 0,
    }
    (logged,) = inferred_in_ledger(home)
    expected = ReplacementEvent(
        "superseded",
        OLD,
        NEW,
        "inferred",
        "consolidation",
        REVIEWED_CONFIDENCE,
        "the offsite moved from Lisbon to Porto",
        "2026-03-02T10:00:03",
    )
    assert logged.subject == expected.id and logged.data == expected.to_dict()
    assert home.events.events() == [expected]
    assert "superseded" in held_back(home, OLD)  # held back for a question about the present
    assert held_back(home, NEW) is None
    # the check was a reviewer call of its own, shown only the claim and the two lines it names
    (call,) = replacement_calls(r)
    task = call[-1]["content"]
    assert "Lisbon on May 3rd." in task and "moves to Porto" in task and "Noted:" not in task
    assert "Line 3 says it." not in json.dumps(call)  # nothing of the candidate's review reaches it
    cycle = next(e for e in home.ledger.events() if e.kind == "cycle_completed")
    assert cycle.data["counts"]["replacements"]["recorded"] == 1


def test_the_writer_is_asked_for_relations_between_its_own_lines(home):
    w = writer(MOVED)
    home.checkpoint(w, reviewer=reviewer())
    assert WRITER_REPLACES in w.calls[0][0]["content"]
    relation = w.schemas[0]["properties"]["replaces"]["items"]["properties"]
    assert relation["later"] == relation["earlier"] == {"enum": [1, 2, 3]}
    assert relation["relation"] == {"enum": ["replaces", "corrects", "adds to"]}


def test_a_proposal_naming_a_line_the_writer_was_not_shown_is_refused_counted_and_never_recorded(home):
    r = reviewer()
    result = home.checkpoint(writer((9, 1, "corrects", "the date was wrong")), reviewer=r)
    (check,) = result.replacements
    assert check.verdict == "refused" and check.event is None and not check.recorded
    assert "line 9 names no turn the transcript holds" in check.reason
    assert result.counts["replacements"]["proposed"] == 1 and result.counts["replacements"]["refused"] == 1
    (failure,) = result.failures
    assert (failure.stage, failure.kind) == ("replacement", "unknown_turn")
    assert replacement_calls(r) == [] and inferred_in_ledger(home) == [] and home.events.events() == []
    assert [v.verdict for v in result.verdicts] == ["accept"]  # the candidates of that answer are still reviewed


def test_a_replacement_the_reviewer_rejects_is_not_recorded(home):
    result = home.checkpoint(writer(MOVED), reviewer=reviewer("reject", supported=False))
    (check,) = result.replacements
    assert check.verdict == "reject" and not check.recorded
    assert check.reason.startswith("reviewer rejected it: The later line only adds a detail.")
    assert result.counts["replacements"]["rejected"] == 1 and result.counts["replacements"]["recorded"] == 0
    assert inferred_in_ledger(home) == [] and home.events.events() == []
    assert "superseded" not in (held_back(home, OLD) or "")
    report = json.loads(home.layout.cycle_report(result.cycle_id).read_text())
    assert report["replacements"][0]["reason"] == check.reason  # its reason is in the cycle report


@pytest.mark.parametrize("answer", ["accept", RuntimeError("reviewer down")])
def test_a_reviewer_that_says_yes_without_support_or_fails_records_nothing(home, answer):
    result = home.checkpoint(writer(MOVED), reviewer=reviewer(answer, supported=False))
    (check,) = result.replacements
    assert check.verdict == ("failed" if isinstance(answer, BaseException) else "reject")
    assert inferred_in_ledger(home) == []


def test_mechanical_checks_reject_before_the_reviewer_is_asked(home):
    r = reviewer()
    result = home.checkpoint(
        writer(
            (1, 3, "replaces", "backwards"),  # the "later" line was said first
            (3, 3, "corrects", "itself"),
            (2, 1, "adds to", "the assistant repeats it"),  # no replacement: recorded as nothing
        ),
        reviewer=r,
    )
    verdicts = [(c.verdict, c.reason) for c in result.replacements]
    assert verdicts[0] == ("reject", "line 1 was not said after line 3")
    assert verdicts[1] == ("reject", "line 3 was not said after line 3")
    assert verdicts[2][0] == "adds_to"
    counts = result.counts["replacements"]
    assert (counts["proposed"], counts["rejected"], counts["adds_to"], counts["recorded"]) == (2, 2, 1, 0)
    assert replacement_calls(r) == [] and inferred_in_ledger(home) == []


def test_turns_that_share_no_content_word_are_not_a_replacement(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), infer_events=False) as home:
        say(home, "s1", "The team offsite is in Lisbon.", "Thanks!", "Grandma bakes bread on Sundays.")
        r = reviewer()
        result = home.checkpoint(writer((3, 1, "replaces", "unrelated")), reviewer=r)
    (check,) = result.replacements
    assert (check.verdict, check.reason) == ("reject", "the two turns share no content word")
    assert replacement_calls(r) == []


def test_infer_replacements_off_asks_nothing_and_records_nothing(home):
    w, r = writer(MOVED), reviewer()
    result = home.checkpoint(w, reviewer=r, config=ConsolidationConfig(infer_replacements=False))
    assert result.replacements == () and result.counts["replacements"]["proposed"] == 0
    assert WRITER_REPLACES not in w.calls[0][0]["content"] and "replaces" not in w.schemas[0]["properties"]
    assert replacement_calls(r) == [] and inferred_in_ledger(home) == [] and home.events.events() == []
    assert [v.verdict for v in result.verdicts] == ["accept"] and result.failures == ()
    assert "superseded" not in (held_back(home, OLD) or "")


def test_without_verification_an_inferred_replacement_is_marked_never_held(home):
    r = reviewer()
    result = home.checkpoint(writer(MOVED), reviewer=r, config=ConsolidationConfig(verify=False))
    (check,) = result.replacements
    assert check.verdict == "accept" and check.confidence == UNVERIFIED_CONFIDENCE and check.recorded
    assert r.calls == []
    ((rep,),) = home.events.replacements(hold=0.8, mark=0.5).values()
    assert rep.status == "marked" and rep.event.detector == "consolidation"


def test_a_repeated_cycle_records_nothing_twice(home):
    def crash(note):  # the cycle dies after recording its events, before it completes: the span is read again
        raise RuntimeError("host crashed")

    w = writer(MOVED, MOVED)  # one pair proposed twice in one answer is checked once
    with pytest.raises(RuntimeError):
        home.checkpoint(w, reviewer=reviewer(), trigger="pre_compaction", handoff=crash)
    assert len(inferred_in_ledger(home)) == 1
    r = reviewer()
    again = home.checkpoint(writer(MOVED), reviewer=r)
    (check,) = again.replacements
    assert check.verdict == "known" and not check.recorded and check.event == event_id(OLD, NEW)
    assert replacement_calls(r) == []  # the ledger held it: not reviewed again
    assert len(inferred_in_ledger(home)) == 1 and len(home.events.events()) == 1


def test_a_pair_a_person_already_decided_is_neither_reviewed_nor_recorded(home):
    home.ledger.append("event_rejected", event_id(OLD, NEW), {"by": "ana", "reason": "the offsite did not move"})
    r = reviewer()
    result = home.checkpoint(writer(MOVED), reviewer=r)
    assert [c.verdict for c in result.replacements] == ["known"] and replacement_calls(r) == []
    assert inferred_in_ledger(home) == [] and "superseded" not in (held_back(home, OLD) or "")


def test_relations_are_read_from_json_a_cut_answer_and_the_line_format():
    answer = {
        "memories": [],
        "replaces": [
            {"later": 3, "earlier": 1, "relation": "corrects", "why": "the date"},
            {"later": "x", "earlier": 1, "relation": "corrects", "why": "?"},
        ],
    }
    assert parse_writer_relations(json.dumps(answer)) == ([("corrects", 3, 1, "the date")], 1)
    cut = json.dumps(answer)[:-30]
    assert parse_writer_relations(cut) == ([("corrects", 3, 1, "the date")], 0)
    text = "fact | The offsite is in Porto. | 3\ncorrects | 3 | 1 | the city\nadd to | 2 | 1 | detail\nreplaces | a | 1"
    assert parse_writer_relations(text) == ([("corrects", 3, 1, "the city"), ("adds to", 2, 1, "detail")], 1)
    assert parse_writer_output(text) == ([("fact", "The offsite is in Porto.", [3])], [], 0)  # not read as noise
