"""The consolidation cycle as a whole, with scripted writer and reviewer generators (the real model:
test_consolidation_e2e; the parsers and the approval of held writes: tests/lca/consolidation/)."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime

import pytest

from lca.consolidation import ConsolidationConfig, ConsolidationRefused, approve_proposal, pending_proposals
from lca.errors import ApprovalRequired
from lca.ledger import Ledger
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.recall import RecallConfig, RecallContext
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        yield s


def say(substrate, session, *lines, start=1, day=2):
    substrate.append(
        [
            make_entry(
                session,
                n,
                text,
                timestamp=f"2026-03-{day:02d}T10:00:{n:02d}",
                kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
            )
            for n, text in enumerate(lines, start)
        ]
    )


def writer(*replies):
    """Answers every extraction call with the next reply (the last one repeats)."""
    queue = list(replies)

    def respond(messages):
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return FakeScriptedGenerator(respond, model_id="fake-writer")


def reviewer(supported="yes", contradicts="none", verdict="accept", reasoning="Checked the cited lines."):
    def respond(messages):
        return f"REASONING: {reasoning}\nSUPPORTED: {supported}\nCONTRADICTS: {contradicts}\nVERDICT: {verdict}"

    return FakeScriptedGenerator(respond, model_id="fake-reviewer")


def old_memory(
    substrate,
    id_="fact-billing-db",
    body="The billing service database is MySQL 8.",
    type_=MemoryType.FACT,
    created=datetime(2026, 1, 1),
    approver=None,
):
    record = MemoryRecord(
        id=id_,
        type=type_,
        created=created,
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session="s0", entries=("s0:1",)),),
    )
    substrate.memory.write(record, body, approver=approver)
    substrate.ingest()
    return id_


# ---- the happy path -----------------------------------------------------------------------
def test_cycle_writes_a_verified_memory_and_reads_it_back(home):
    say(home, "s1", "We decided the billing service moves to PostgreSQL 16 next week.", "Noted, I will plan it.")
    w, r = writer("decision | The billing service moves to PostgreSQL 16. | 1"), reviewer()
    result = home.checkpoint(w, reviewer=r)
    assert [v.verdict for v in result.verdicts] == ["accept"]
    created = [x for x in result.writes if x.action == "created"]
    assert len(created) == 1
    memory = home.memory.get(created[0].memory_id)
    assert memory.record.authority is Authority.REVIEWED and memory.record.type is MemoryType.DECISION
    assert memory.record.sources == (TranscriptSpan(session="s1", entries=("s1:1",)),)
    assert [(b.memory_id, b.retrieved) for b in result.read_back] == [(memory.record.id, True)]
    # typed record on disk, ledger replay, checkpoint entry in the transcript
    record = json.loads(home.layout.cycle_report(result.cycle_id).read_text())
    assert record["counts"]["writes"] == 1 and record["counts"]["rejection_rate"] == 0.0
    state = Ledger(home.home).state()
    assert state.hypotheses[result.candidates[0].id].status == "promoted"
    assert state.memories[memory.record.id]["file"] == memory.path.read_text()  # memory rebuildable from the log
    kinds = [e.kind for e in home.transcript.read("s1").entries]
    assert kinds[-1] is EntryKind.CHECKPOINT
    check = home.health().check("consolidation")
    assert check.status.value == "ok" and check.data["rejection_rate"] == 0.0


def test_reviewer_sees_only_the_candidate_its_sources_and_touched_memories(home):
    old_memory(home, body="The billing service database is MySQL 8.")
    say(home, "s1", "The billing service database is PostgreSQL 16 now.", "My cat Pebble is asleep.")
    w, r = writer("fact | The billing service database is PostgreSQL 16. | 1"), reviewer()
    home.checkpoint(w, reviewer=r)
    (call,) = r.calls
    text = call[-1]["content"]  # the task; the rest is fixed demos
    assert "PostgreSQL 16 now" in text and "fact-billing-db" in text  # cited line and the touched memory
    whole = "\n".join(m["content"] for m in call)
    assert "Pebble" not in whole  # an uncited line never reaches it
    assert "| 1" not in whole and w.calls[0][0] != call[0]  # nor the writer's output or system prompt
    assert "worth remembering" not in text  # nor the writer's instructions
    assert text.index("REASONING") < text.index("VERDICT")


def test_second_cycle_reads_only_what_came_after_the_checkpoint(home):
    say(home, "s1", "Ana prefers tea over coffee.")
    w = writer("preference | Ana prefers tea over coffee. | 1")
    home.checkpoint(w, reviewer=reviewer())
    say(home, "s1", "Ana's sister is called Lucia.", start=3)
    w2 = writer("fact | Ana's sister is called Lucia. | 1")
    home.checkpoint(w2, reviewer=reviewer())
    prompt = w2.calls[0][-1]["content"]
    assert "Lucia" in prompt and "tea" not in prompt and "checkpoint" not in prompt


# ---- contradiction: never silent coexistence -------------------------------------------------
def test_newer_supported_contradiction_supersedes_the_older_memory(home):
    old = old_memory(home)
    say(home, "s1", "We moved the billing service database to PostgreSQL 16.")
    result = home.checkpoint(
        writer("fact | The billing service database is PostgreSQL 16. | 1"),
        reviewer=reviewer(contradicts=old, verdict="supersede"),
    )
    new_id = next(x.memory_id for x in result.writes if x.action == "created")
    superseded = home.memory.get(old).record
    assert superseded.superseded_by.id == new_id and "supersedes" in superseded.superseded_by.reason
    assert home.memory.get(new_id).record.supersedes[0].id == old
    assert home.layout.memory_archive(old).is_dir()
    injected = {i.source.split("[")[0] for i in home.recall("billing service database").items}
    assert f"memory:{new_id}" in injected and f"memory:{old}" not in injected
    history = home.recall(RecallContext("billing service database", about_history=True))
    assert f"memory:{old}" in {c.source.split("[")[0] for c in history.candidates if c.why_not is None}


def test_supported_contradiction_the_reviewer_rejects_is_marked_as_a_conflict(home):
    old = old_memory(home)
    say(home, "s1", "The billing service database is PostgreSQL 16, not MySQL.")
    result = home.checkpoint(
        writer("fact | The billing service database is PostgreSQL 16. | 1"),
        reviewer=reviewer(contradicts=old, verdict="reject"),
    )
    assert [v.verdict for v in result.verdicts] == ["reject"]
    marked = home.memory.get(old).record
    assert len(marked.conflicts) == 1 and "s1#s1:1" in marked.conflicts[0].reason
    candidate = next(
        c for c in home.recall("billing service database").candidates if c.source.startswith(f"memory:{old}[")
    )
    assert "unresolved conflict" in candidate.risk_reasons and candidate.terms["risk"] == 0.5


@pytest.mark.parametrize("supported,verdict", list(itertools.product(["yes", "no"], ["accept", "reject", "supersede"])))
def test_contradicting_memories_never_coexist_silently(tmp_path, supported, verdict):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as home:
        old = old_memory(home)
        say(home, "s1", "The billing service database is PostgreSQL 16 now.")
        result = home.checkpoint(
            writer("fact | The billing service database is PostgreSQL 16. | 1"),
            reviewer=reviewer(supported=supported, contradicts=old, verdict=verdict),
        )
        files = {f.record.id: f.record for f in home.memory.load().files}
        new = [i for i in files if i != old]
        old_record = files[old]
        if new:  # the candidate was written: the older memory must point at it
            assert old_record.superseded_by is not None and old_record.superseded_by.id == new[0]
        else:  # or it was not written: the disagreement, when the transcript supports it, is marked
            assert (len(old_record.conflicts) == 1) == (supported == "yes")
            assert result.verdicts[0].verdict == "reject"


# ---- support ---------------------------------------------------------------------------------
def test_unsupported_claims_are_downgraded_to_labeled_inferences_or_removed(tmp_path):
    for mode in ("downgrade", "remove"):
        with Substrate(tmp_path / mode, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
            say(s, "s1", "I had a long day at the office.")
            # the reviewer says "supported", but the cited line shares none of the claim's terms
            result = s.checkpoint(
                writer("fact | The user owns three sailboats in Lisbon. | 1"),
                reviewer=reviewer(),
                config=ConsolidationConfig(unsupported=mode),
            )
            (verdict,) = result.verdicts
            assert verdict.verdict == mode and not verdict.supported and verdict.lexical_support == 0.0
            files = s.memory.load().files
            if mode == "downgrade":
                (memory,) = files
                assert memory.record.authority is Authority.INFERRED
                assert memory.body.startswith("Inference (no supporting source span):")
            else:
                assert files == ()
    health = Substrate(tmp_path / "remove", embedder=FakeHashingEmbedder()).health().check("consolidation")
    assert health.data["rejection_rate"] == 1.0 and health.data["rejection_reasons"] == {"unsupported": 1}


def test_a_claim_without_a_cited_line_is_never_reviewed_as_supported(home):
    say(home, "s1", "Ana prefers tea over coffee.")
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 9"), reviewer=reviewer())
    assert result.verdicts[0].verdict == "downgrade" and "no cited source line" in result.verdicts[0].reason


def test_secrets_never_reach_durable_memory(home):
    say(home, "s1", "The deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 for now.")
    result = home.checkpoint(
        writer("fact | The deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789. | 1"), reviewer=reviewer()
    )
    assert result.verdicts[0].verdict == "remove" and "secret" in result.verdicts[0].reason
    assert home.memory.load().files == ()


def test_near_duplicate_updates_the_existing_memory_and_archives_the_old_version(home):
    old = old_memory(home, id_="pref-tea", body="Ana prefers tea over coffee.", type_=MemoryType.PREFERENCE)
    before = home.memory.get(old).computed_hash
    say(home, "s1", "Ana prefers tea over coffee, always.")
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    assert [(x.memory_id, x.action) for x in result.writes] == [(old, "updated")]
    assert len(home.memory.load().files) == 1
    record = home.memory.get(old).record
    assert {s.session for s in record.sources} == {"s0", "s1"}
    assert home.memory.get(old).body == "Ana prefers tea over coffee."  # reinforced, not rewritten
    assert (home.layout.memory_archive(old) / (before.split(":")[1][:16] + ".md")).exists()


# ---- the approval gate ------------------------------------------------------------------------
def test_procedural_writes_are_held_without_a_named_approver(home):
    say(home, "s1", "Rule from now on: always deploy through staging first.")
    result = home.checkpoint(writer("rule | Always deploy through staging first. | 1"), reviewer=reviewer())
    assert [x.action for x in result.writes] == ["held"]
    assert home.memory.load().files == ()
    (proposal,) = pending_proposals(home)
    with pytest.raises(ApprovalRequired):
        approve_proposal(home, proposal["id"], approver="  ")
    with pytest.raises(ApprovalRequired):  # the gate is in the one write path, not only in the cycle
        home.memory.write(MemoryRecord.model_validate(proposal["record"]), proposal["body"])
    writes = approve_proposal(home, proposal["id"], approver="dana")
    memory = home.memory.get(writes[0].memory_id)
    assert memory.record.type is MemoryType.PROCEDURE and memory.record.approved_by == "dana"
    assert pending_proposals(home) == []
    assert Ledger(home.home).state().hypotheses[result.candidates[0].id].status == "promoted"
    # with an approver given to the cycle, the write goes straight through
    say(home, "s1", "Rule: never force-push to main.", start=3)
    direct = home.checkpoint(writer("rule | Never force-push to main. | 1"), reviewer=reviewer(), approver="dana")
    assert [x.action for x in direct.writes] == ["created"]


# ---- faults -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fault,kind",
    [
        (TimeoutError("generation took too long"), "timeout"),
        ("Sure! Here are some thoughts about the conversation.", "malformed"),
        ("I'm sorry, I can't help with that.", "refused"),
    ],
)
def test_writer_faults_are_recorded_and_nothing_is_written(home, fault, kind):
    say(home, "s1", "Ana prefers tea over coffee.")
    result = home.checkpoint(FakeScriptedGenerator(lambda m: fault), reviewer=reviewer())
    assert result.writes == () and home.memory.load().files == ()
    assert [(f.stage, f.kind) for f in result.failures] == [("extract", kind)]
    check = home.health().check("consolidation")
    assert check.status.value == "warn" and "extract:" + kind in check.detail


def test_unreadable_or_failing_review_fails_closed(home):
    say(home, "s1", "Ana prefers tea over coffee.", "Ana's sister is Lucia.")
    replies = iter(["I think it's fine!", RuntimeError("model crashed")])
    result = home.checkpoint(
        writer("preference | Ana prefers tea over coffee. | 1\nfact | Ana's sister is Lucia. | 2"),
        reviewer=FakeScriptedGenerator(lambda m: next(replies)),
    )
    assert [v.verdict for v in result.verdicts] == ["failed", "failed"]
    assert [f.kind for f in result.failures] == ["malformed", "error"]
    assert home.memory.load().files == ()


def test_reviewer_naming_an_unshown_memory_is_a_failure_not_a_supersession(home):
    old_memory(home)
    say(home, "s1", "The billing service database is PostgreSQL 16 now.")
    result = home.checkpoint(
        writer("fact | The billing service database is PostgreSQL 16. | 1"),
        reviewer=reviewer(contradicts="some-other-memory", verdict="supersede"),
    )
    assert result.verdicts[0].verdict == "failed" and result.failures[0].kind == "unknown_memory"
    assert home.memory.get("fact-billing-db").record.superseded_by is None


def test_an_invalid_memory_folder_is_refused_and_health_says_why(home):
    old_memory(home)
    bad = home.memory.dir / "broken.md"
    bad.write_text("---\nid: broken\ntype: fact\n---\nno created, authority or privacy\n")
    say(home, "s1", "Ana prefers tea over coffee.")
    with pytest.raises(ConsolidationRefused, match="broken.md"):
        home.checkpoint(writer("preference | Ana prefers tea. | 1"), reviewer=reviewer())
    check = home.health().check("consolidation")
    assert check.status.value == "fail" and "refused" in check.detail


def test_a_hand_edited_memory_is_not_written_over(home):
    old = old_memory(home, id_="pref-tea", body="Ana prefers tea over coffee.", type_=MemoryType.PREFERENCE)
    path = home.memory.path_for(old)
    path.write_text(path.read_text().replace("privacy: private", "privacy: private\ntags:\n- edited-by-hand"))
    say(home, "s1", "Ana prefers tea over coffee, always.")
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    assert [f.kind for f in result.failures] == ["hand_edited"]
    assert "edited-by-hand" in path.read_text() and "s1" not in path.read_text()


def test_read_back_failure_is_recorded_and_makes_health_fail(home, monkeypatch):
    say(home, "s1", "Ana prefers tea over coffee.")
    real = home.recall

    def recall_missing_everything(context, *, config=None):  # fault injection: an index that loses writes
        result = real(context, config=config)
        return type(result)(result.context, result.policy, "skip", (), (), 0, result.budget, 0.0, "")

    monkeypatch.setattr(home, "recall", recall_missing_everything)
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    assert [b.retrieved for b in result.read_back] == [False]
    assert result.failures[-1].stage == "read_back"
    assert home.health().check("consolidation").status.value == "fail"


# ---- ledger: refutation makes dormant, new evidence resurfaces ---------------------------------
def test_refuted_hypotheses_go_dormant_and_resurface_with_their_refutations(home):
    say(home, "s1", "Maybe the nightly backup job fails because of disk quota?")
    refute = reviewer(supported="no", verdict="reject", reasoning="Only a guess.")
    first = home.checkpoint(
        writer("lesson | The nightly backup job fails because of the disk quota. | 1"), reviewer=refute
    )
    hid = first.candidates[0].id
    assert Ledger(home.home).state().hypotheses[hid].status == "dormant"
    say(home, "s2", "Confirmed: the nightly backup job failed, disk quota exceeded on the backup volume.")
    accept = reviewer()
    second = home.checkpoint(
        writer("fact | The backup volume disk quota was exceeded by the nightly job. | 1"), reviewer=accept
    )
    resurfaced = [c for c in second.candidates if c.resurfaced_by]
    assert [c.id for c in resurfaced] == [hid]
    prompt = next(
        call[-1]["content"] for call in accept.calls if "fails because of the disk quota" in call[-1]["content"]
    )
    assert "Earlier refutations" in prompt and "reviewer rejected it" in prompt
    state = Ledger(home.home).state()
    assert state.hypotheses[hid].status == "promoted" and len(state.hypotheses[hid].refutations) == 1
    rate, recovered, promoted = state.recovery_rate()
    assert (recovered, promoted) == (1, 2) and rate == 0.5
    # nothing was deleted: the refutation is still in its history
    assert [h["kind"] for h in state.hypotheses[hid].history][:2] == ["hypothesis_proposed", "hypothesis_refuted"]


def test_worldviews_can_be_rebuilt_at_a_past_time_and_diffed(home):
    from lca.ledger import diff_states

    say(home, "s1", "Ana prefers tea over coffee.")
    home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    ledger = Ledger(home.home)
    middle = ledger.events()[-1].at
    say(home, "s1", "Actually Ana now prefers coffee over tea.", start=3)
    old_id = home.memory.load().files[0].record.id
    home.checkpoint(
        writer("preference | Ana now prefers coffee over tea. | 1"),
        reviewer=reviewer(contradicts=old_id, verdict="supersede"),
    )
    then, now = ledger.state(as_of=middle), ledger.state()
    assert then.summary()["memories"] == 1 and now.summary()["memories"] == 2
    changes = diff_states(then, now)
    assert {m["action"] for m in changes["memories"]} == {"created", "superseded"}
    assert ledger.state(as_of=middle).summary() == then.summary()  # replay is deterministic


# ---- experience ----------------------------------------------------------------------------
def test_prevented_mistakes_need_a_known_memory_and_a_cited_span(home):
    rule = old_memory(
        home, id_="lesson-staging", body="Deploy through staging before production.", type_=MemoryType.LESSON
    )
    assert home.recall("Deploy through staging before production?").items  # the lesson is injected in this span
    say(home, "s1", "Deploy the release to production now.", "Deploying to staging first, then production.")
    w = writer(
        "prevented | lesson-staging | 2 | deployed to staging first\nprevented | no-such-memory | 2 | something\nNONE"
    )
    result = home.checkpoint(w, reviewer=reviewer())
    assert "Memories in use" in w.calls[0][-1]["content"] and rule in w.calls[0][-1]["content"]
    kinds = {(e["memory"], e["kind"]) for e in result.experience_events}
    assert ("lesson-staging", "prevented_mistake") in kinds and ("lesson-staging", "used") in kinds
    assert [f.kind for f in result.failures] == ["unknown_memory"]
    counts = home.experience.counts()["memory:lesson-staging"]
    assert counts["prevented_mistake"] == 1 and counts["used"] == 1
    event = [json.loads(x) for x in home.experience.path.read_text().splitlines() if "prevented" in x][0]
    assert re.fullmatch(r"s1#s1:2", event["span"])


def test_memories_record_the_schemas_active_when_written(home):
    ledger = Ledger(home.home)
    ledger.schema_event("schema_proposed", "deploy-postmortem", description="incident -> cause -> rule")
    ledger.schema_event("schema_trial", "deploy-postmortem", approver="ana")
    say(home, "s1", "Ana prefers tea over coffee.")
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    memory = home.memory.get(result.writes[0].memory_id)
    assert [(s.id, s.version) for s in memory.record.schemas] == [("deploy-postmortem", 1)]
    ledger.schema_event("schema_deprecated", "deploy-postmortem", reason="superseded by a better pattern")
    say(home, "s1", "Ana's sister is called Lucia.", start=3)
    second = home.checkpoint(writer("fact | Ana's sister is called Lucia. | 1"), reviewer=reviewer())
    assert home.memory.get(second.writes[0].memory_id).record.schemas == ()


def test_cycle_timestamps_are_utc(home):
    say(home, "s1", "Ana prefers tea over coffee.")
    result = home.checkpoint(writer("preference | Ana prefers tea over coffee. | 1"), reviewer=reviewer())
    created = home.memory.get(result.writes[0].memory_id).record.created
    assert created.tzinfo is not None and created.utcoffset() == UTC.utcoffset(None)


def test_repeats_within_one_cycle_are_merged_and_a_repeat_without_support_changes_nothing(home):
    say(home, "s1", "Ana prefers green tea over coffee in the morning.", "Yes, Ana prefers green tea over coffee.")
    result = home.checkpoint(
        writer(
            "preference | Ana prefers green tea over coffee in the morning | 1\n"
            "preference | Ana prefers green tea over coffee in the morning too | 2"
        ),
        reviewer=reviewer(),
    )
    assert result.repeats_merged == 1 and len(result.candidates) == 1
    assert result.candidates[0].lines == (1, 2)
    (memory,) = home.memory.load().files
    before = memory.computed_hash
    say(home, "s2", "I had a long day at the office.")
    again = home.checkpoint(
        writer("preference | Ana prefers green tea over coffee in the morning | 1"), reviewer=reviewer()
    )
    assert again.verdicts[0].verdict == "downgrade" and "nothing new to record" in again.verdicts[0].reason
    assert again.writes == () and home.memory.load().files[0].computed_hash == before
