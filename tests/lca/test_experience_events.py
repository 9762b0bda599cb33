"""E learns from real events: the transcript's explicit approvals and corrections, the verifier's
contradictions, and the cycle's uses and prevented mistakes (which also move the memory file's
counters, never its content hash). Generators are scripted fakes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
import yaml

from lca.errors import RecordFormatError
from lca.experience import ExperienceLog, count_on_memory, events_from_entries, experience_of, turn_events
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.recall import RecallConfig, experience_term
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        yield s


def turn(session, n, text, event=None, *, day=2):
    return make_entry(
        session,
        n,
        text,
        timestamp=f"2026-03-{day:02d}T10:00:{n:02d}",
        kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
        meta={"event": event} if event else {},
    )


def correction(of, right="Thursday"):
    return {"type": "correction", "of": of, "right": right}


def memory_on(substrate, memory_id, *entries, body=None, session="s1"):
    record = MemoryRecord(
        id=memory_id,
        type=MemoryType.DECISION,
        created=datetime(2026, 3, 1, tzinfo=UTC),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session=session, entries=entries),),
    )
    return substrate.memory.write(record, body or f"{memory_id} rests on {', '.join(entries)}.")


def e_of(substrate, target):
    return experience_term(substrate.experience.counts().get(target, {}))


def writer(*replies):
    queue = list(replies)
    return FakeScriptedGenerator(lambda messages: queue.pop(0) if len(queue) > 1 else queue[0], model_id="fake-writer")


def reviewer(supported="yes", contradicts="none", verdict="accept"):
    reply = (
        f"REASONING: Checked the cited lines.\nSUPPORTED: {supported}\nCONTRADICTS: {contradicts}\nVERDICT: {verdict}"
    )
    return FakeScriptedGenerator(lambda messages: reply, model_id="fake-reviewer")


HISTORY = [
    turn("s1", 1, "When do we deploy the release?"),
    turn("s1", 2, "We deploy the release on Friday."),
]


# ---- explicit events from the transcript ------------------------------------------------------
def test_a_correction_lowers_E_for_the_corrected_turn_and_the_memories_resting_on_it(home):
    home.append(HISTORY)
    memory_on(home, "deploy-friday", "s1:2")
    memory_on(home, "deploy-question", "s1:1")  # rests on another turn: untouched
    targets = ("transcript:s1#s1:2", "memory:deploy-friday")
    assert [e_of(home, t) for t in targets] == [0.5, 0.5]  # no history yet
    home.append([turn("s1", 3, "No, the release goes out on Thursday.", correction("s1#s1:2"))])
    assert all(e_of(home, t) < 0.5 for t in targets)
    assert e_of(home, "memory:deploy-question") == 0.5 and e_of(home, "transcript:s1#s1:1") == 0.5
    events = [line for line in home.experience.path.read_text().splitlines() if line]
    assert len(events) == 2 and all('"span": "s1#s1:3"' in e and '"corrected"' in e for e in events)


def test_an_approval_raises_E_for_the_turn_and_its_memory(home):
    home.append(HISTORY)
    memory_on(home, "deploy-friday", "s1:2")
    home.append([turn("s1", 3, "Yes, exactly right.", {"type": "approval", "of": "s1#s1:2"})])
    assert e_of(home, "transcript:s1#s1:2") > 0.5 and e_of(home, "memory:deploy-friday") > 0.5
    assert home.experience.recorded("memory:deploy-friday", "approved", "s1#s1:3")
    assert not home.experience.recorded("memory:deploy-friday", "approved", "s1#s1:2")


def test_replaying_the_same_entries_records_nothing_new(home):
    home.append(HISTORY)
    memory_on(home, "deploy-friday", "s1:2")
    fix = turn("s1", 3, "No, Thursday.", correction("s1#s1:2"))
    home.append([fix])
    size = home.experience.path.stat().st_size
    home.append([*HISTORY, fix])  # the same history again
    again = events_from_entries([fix], home.memory_files(), transcript=home.transcript)
    assert len(again) == 2 and home.experience.record_new(again) == []
    assert home.experience.path.stat().st_size == size
    assert home.experience.counts()["memory:deploy-friday"] == {"corrected": 1}
    # a cycle over the same span sees the correction again and adds nothing either
    result = home.checkpoint(writer("NONE"), reviewer=reviewer())
    assert [e for e in result.experience_events if e["kind"] == "corrected"] == []
    assert home.experience.path.stat().st_size == size


def test_a_memory_written_with_the_correction_in_view_is_not_counted_as_corrected(home):
    home.append(HISTORY)
    memory_on(home, "deploy-thursday", "s1:2", "s1:3")  # cites the corrected turn and the correction
    home.append([turn("s1", 3, "No, Thursday.", correction("s1#s1:2"))])
    assert "memory:deploy-thursday" not in home.experience.counts()
    memory_on(home, "deploy-approved", "s1:2", "s1:4")
    home.append([turn("s1", 4, "Thursday it is, good.", {"type": "approval", "of": "s1#s1:2"})])
    assert home.experience.counts()["memory:deploy-approved"] == {"approved": 1}  # an approval still counts


def test_a_source_range_covers_the_turns_between_its_ends(home):
    home.append([*HISTORY, turn("s1", 3, "And the notes go out after.")])
    ranged = MemoryRecord(
        id="release-plan",
        type=MemoryType.DECISION,
        created=datetime(2026, 3, 1, tzinfo=UTC),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session="s1", first="s1:1", last="s1:3"),),
    )
    home.memory.write(ranged, "The release plan.")
    turns = turn_events([turn("s1", 4, "No, Thursday.", correction("s1#s1:2"))])
    targets = {e.target for e in experience_of(turns, home.memory_files(), transcript=home.transcript)}
    assert targets == {"transcript:s1#s1:2", "memory:release-plan"}
    assert {e.target for e in experience_of(turns, home.memory_files())} == {"transcript:s1#s1:2"}  # ends only


def test_other_events_teach_nothing_and_a_malformed_one_is_refused_before_anything_is_written(home):
    quiet = [turn("s1", 1, "Stop there.", {"type": "interruption"}), turn("s1", 2, "Hello.")]
    home.append(quiet)
    assert not home.experience.path.exists()
    with pytest.raises(RecordFormatError, match="entry 's2:1'") as info:
        home.append([turn("s2", 1, "No, Thursday.", correction("s1:2"))])  # no '<session>#'
    assert info.value.field == "meta.event.of"
    assert "s2" not in home.transcript.session_ids() and not home.experience.path.exists()
    with pytest.raises(RecordFormatError) as info:
        turn_events([turn("s2", 1, "Odd.", {"of": "s1#s1:2"})])
    assert info.value.field == "meta.event.type"


def test_a_cycle_counts_the_correction_against_the_memory_it_writes_from_the_corrected_turn(home):
    home.append([*HISTORY, turn("s1", 3, "No, the release goes out on Thursday.", correction("s1#s1:2"))])
    assert set(home.experience.counts()) == {"transcript:s1#s1:2"}  # no memory rests on it yet
    result = home.checkpoint(writer("decision | We deploy the release on Friday. | 2"), reviewer=reviewer())
    (written,) = [w.memory_id for w in result.writes if w.action == "created"]
    assert e_of(home, f"memory:{written}") < 0.5
    (event,) = [e for e in result.experience_events if e["kind"] == "corrected"]
    assert event["memory"] == written and event["span"] == "s1#s1:3"
    assert home.experience.counts()["transcript:s1#s1:2"] == {"corrected": 1}  # not a second time


# ---- the verifier's contradictions --------------------------------------------------------------
def billing_memory(home):
    record = MemoryRecord(
        id="fact-billing-db",
        type=MemoryType.FACT,
        created=datetime(2026, 1, 1),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session="s0", entries=("s0:1",)),),
    )
    home.memory.write(record, "The billing service database is MySQL 8.")
    home.ingest()
    return "fact-billing-db"


@pytest.mark.parametrize("supported,verdict", list(itertools.product(["yes", "no"], ["reject", "supersede"])))
def test_the_verifier_records_contradicted_against_the_memory_that_lost(tmp_path, supported, verdict):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as home:
        old = billing_memory(home)
        home.append([turn("s1", 1, "The billing service database is PostgreSQL 16 now.")])
        home.checkpoint(
            writer("fact | The billing service database is PostgreSQL 16. | 1"),
            reviewer=reviewer(supported=supported, contradicts=old, verdict=verdict),
        )
        record = home.memory.get(old).record
        lost = record.superseded_by is not None or bool(record.conflicts)
        assert lost == (supported == "yes")  # an unsupported candidate loses, not the memory
        counts = home.experience.counts().get(f"memory:{old}", {})
        assert counts == ({"contradicted": 1} if lost else {})
        if lost:
            assert home.experience.recorded(f"memory:{old}", "contradicted", "s1#s1:1")
            assert e_of(home, f"memory:{old}") < 0.5


# ---- the memory file's counters -----------------------------------------------------------------
def test_uses_and_prevented_mistakes_move_the_counters_and_not_the_hash(home):
    lesson = MemoryRecord(
        id="lesson-staging",
        type=MemoryType.LESSON,
        created=datetime(2026, 1, 1),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session="s0", entries=("s0:1",)),),
    )
    before = home.memory.write(lesson, "Deploy through staging before production.")
    home.ingest()
    text_before = before.path.read_text()
    assert home.recall("Deploy through staging before production?").items  # injected in this span
    home.append(
        [
            turn("s1", 1, "Deploy the release to production now."),
            turn("s1", 2, "Deploying to staging first, then production."),
        ]
    )
    result = home.checkpoint(writer("prevented | lesson-staging | 2 | deployed to staging first"), reviewer=reviewer())
    assert {e["kind"] for e in result.experience_events} == {"used", "prevented_mistake"}
    after = home.memory.get("lesson-staging")
    assert (after.record.hits, after.record.prevented_mistakes) == (1, 1)
    assert after.record.last_applied is not None
    assert after.record.content_hash == before.record.content_hash == after.computed_hash
    assert after.body == before.body
    front_before, front_after = (yaml.safe_load(t.split("---\n")[1]) for t in (text_before, after.path.read_text()))
    changed = {k for k in front_before.keys() | front_after.keys() if front_before.get(k) != front_after.get(k)}
    assert changed == {"hits", "prevented_mistakes", "last_applied"}
    assert home.memory.load().drifted == ()


def test_only_use_events_have_a_counter_and_a_hand_edit_stays_drift(home):
    written = memory_on(home, "deploy-friday", "s1:2")
    log = ExperienceLog(home.home)
    assert count_on_memory(home.memory, log.record("memory:deploy-friday", "approved")) is None
    assert count_on_memory(home.memory, log.record("transcript:s1#s1:2", "used")) is None
    assert home.memory.get("deploy-friday").record == written.record
    written.path.write_text(written.path.read_text().replace("rests on", "was edited to rest on"))
    count_on_memory(home.memory, log.record("memory:deploy-friday", "used"))
    assert home.memory.get("deploy-friday").record.hits == 1
    assert home.memory.load().drifted == (str(written.path),)  # counting a use never launders a hand edit
