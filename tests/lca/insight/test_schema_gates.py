"""A schema's evidence gates: retrieval lift from the retrieval and experience logs, anticipation of records written
after the proposal, MDL compression of its members' signatures; and the state machine that refuses establishment
unless every gate passes, naming the ones that failed."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from lca.activation import Access, RetrievalLog
from lca.errors import ApprovalRequired, LCAError, RecordFormatError
from lca.experience import ExperienceEvent, ExperienceLog
from lca.insight import SummarizerSigner, integrate
from lca.insight.schema_gates import (
    SchemaGateConfig,
    anticipation,
    compression,
    description_bits,
    recalls,
    retrieval_lift,
)
from lca.insight.schemas import establish_schema, measure_schema, propose_schema, start_trial
from lca.insight.signatures import signature_features, signature_from_json
from lca.ledger import EvidenceRequired, Ledger
from lca.memory import Authority, MemoryRecord, MemoryStore, MemoryType, Privacy, TranscriptSpan
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import CORPUS, SKELETONS, fake_signer_generator
from tests.lca.insight.test_review import write_cited


def features(skeleton: str) -> frozenset[str]:
    return signature_features(signature_from_json(SKELETONS[skeleton]))


def test_recalls_are_read_off_the_retrieval_log_one_query_at_a_time():
    log = [
        Access("memory:a[0:10]", 100.0, 1),
        Access("memory:b[0:10]", 100.001, 1),
        Access("transcript:s#e1", 100.002, 1),
        Access("memory:c[0:10]", 100.003, 2),  # another query's shape: another recall
        Access("memory:a[10:20]", 110.0, 2),  # the same shape much later: another recall
        Access("transcript:s#e2", 120.0, 3),  # no memory injected: left out
        Access("memory:z[0:1]", 50.0, 1),  # before the proposal
    ]
    assert recalls(log, since=60.0, gap_s=1.0) == [
        (100.0, frozenset({"a", "b"})),
        (100.003, frozenset({"c"})),
        (110.0, frozenset({"a"})),
    ]


def recall_log(member_recalls: int, other_recalls: int, *, used_members: int, used_others: int):
    """Recalls 10 s apart: some injecting member m1, some only other memory o1; each counted useful by a use event."""
    accesses, uses = [], []
    for k in range(member_recalls):
        accesses.append(Access("memory:m1[0:5]", 1000.0 + 10 * k, k))
        if k < used_members:
            uses.append(ExperienceEvent("memory:m1", "used", 1000.0 + 10 * k + 5))
    for k in range(other_recalls):
        accesses.append(Access("memory:o1[0:5]", 5000.0 + 10 * k, k))
        if k < used_others:
            uses.append(ExperienceEvent("memory:o1", "used", 5000.0 + 10 * k + 5))
    return accesses, uses


def test_retrieval_lift_compares_recalls_with_the_schemas_records_against_those_without():
    config = SchemaGateConfig(use_window_s=6.0)
    accesses, uses = recall_log(6, 6, used_members=5, used_others=1)
    lifted = retrieval_lift({"m1"}, accesses, uses, since=0.0, config=config)
    assert lifted.passed and lifted.value == pytest.approx((6 / 8) / (2 / 8))
    assert lifted.counts == {"with": 6, "with_useful": 5, "without": 6, "without_useful": 1}
    flat = retrieval_lift({"m1"}, *recall_log(6, 6, used_members=2, used_others=2), since=0.0, config=config)
    assert not flat.passed and "lift 1.00" in flat.detail
    few = retrieval_lift({"m1"}, *recall_log(3, 6, used_members=3, used_others=0), since=0.0, config=config)
    assert not few.passed and "too few recalls since the proposal: 3 with its records" in few.detail
    # a use outside the window after the recall does not count for it
    late = retrieval_lift({"m1"}, accesses, uses, since=0.0, config=SchemaGateConfig(use_window_s=1.0))
    assert late.counts["with_useful"] == 0


def test_anticipation_counts_later_records_the_schema_speaks_to_as_right_or_wrong():
    schema = features("oscillator")
    config = SchemaGateConfig()
    # the same skeleton twice: predicted right; the standoff shares no relation: out of scope; one unsigned
    later = {"r1": features("oscillator"), "r2": features("oscillator"), "r3": features("standoff"), "r4": None}
    right = anticipation(schema, later, config=config)
    assert right.passed and right.value == 1.0
    assert right.counts == {"later": 4, "unsigned": 1, "in_scope": 2, "correct": 2, "wrong": 0}
    # a record with the oscillator's relations but another kind of everything else: in scope, predicted wrong
    cue_only = frozenset(f for f in schema if f.startswith("relations:"))
    wrong = anticipation(schema, {"r1": features("oscillator"), "r2": cue_only, "r3": cue_only}, config=config)
    assert not wrong.passed and (wrong.counts["correct"], wrong.counts["wrong"]) == (1, 2)
    none = anticipation(schema, {"r3": features("standoff")}, config=config)
    assert not none.passed and none.value is None and "fits its cue" in none.detail


def test_compression_saves_bits_for_members_that_share_the_schema_and_not_for_strangers():
    vocabulary = frozenset().union(*(features(k) for k in SKELETONS))
    shared = features("oscillator")
    kept = compression(shared, {"a": shared, "b": shared, "c": shared}, vocabulary, config=SchemaGateConfig())
    assert kept.passed and kept.value > 0.3
    without, with_schema = description_bits(shared, [shared, shared, shared], vocabulary)
    assert kept.counts["bits_without"] == round(without, 3) and with_schema < without
    strangers = {"a": features("reservoir"), "b": features("switch")}
    lost = compression(shared, strangers, vocabulary, config=SchemaGateConfig())
    assert not lost.passed and lost.value < 0
    alone = compression(shared, {"a": shared, "b": None}, vocabulary, config=SchemaGateConfig())
    assert not alone.passed and "1 of its 2 record(s)" in alone.detail


@pytest.mark.parametrize(
    ("values", "field"),
    [({"min_lift": -1}, "min_lift"), ({"min_recalls": 2.5}, "min_recalls"), ({"cue_share": 1.5}, "cue_share")],
)
def test_a_bad_gate_is_refused_by_name(values, field):
    with pytest.raises(RecordFormatError) as caught:
        SchemaGateConfig(**values)
    assert caught.value.field == field
    with pytest.raises(RecordFormatError, match="unknown gate setting 'lift'"):
        SchemaGateConfig.from_mapping({"lift": 2})


# ---- the state machine, on a store ------------------------------------------------------------------------------
NEWCOMERS = [
    (
        "fin-boom",
        "finance",
        "Speculators pile into tulip futures; futures prices climb, speculators exhaust cash, prices slump.",
        "oscillator",
    ),
    (
        "kit-starter",
        "kitchen",
        "Kefir grains eat milk sugar; grains multiply, milk sugar runs low, grains starve until milk is topped up.",
        "oscillator",
    ),
]


def cycle(home, rows):
    embedder = FakeHashingEmbedder(dimension=512, max_input_tokens=512)
    return integrate(home, SummarizerSigner(fake_signer_generator(rows)), embedder)


def write_now(home, rows):
    store = MemoryStore(home)
    for rid, domain, text, _ in rows:
        created = datetime.fromtimestamp(time.time() + 1, UTC)
        store.write(
            MemoryRecord(
                id=rid,
                type=MemoryType.LESSON,
                projects=(domain,),
                created=created,
                authority=Authority.REVIEWED,
                privacy=Privacy.PRIVATE,
                sources=(TranscriptSpan(session=f"s-{rid}", entries=("e1",)),),
            ),
            text + "\n",
        )


def log_recalls(home, member: str, other: str, n: int) -> None:
    """``n`` recalls after now that inject ``member``, each then used, and ``n`` that inject ``other``, not used."""
    start = time.time() + 10
    retrievals, experience = RetrievalLog(home), ExperienceLog(home)
    for k in range(n):
        retrievals.record([Access(f"memory:{member}[0:20]", start + 20 * k, k)])
        experience.record(f"memory:{member}", "used", at=start + 20 * k + 5)
        retrievals.record([Access(f"memory:{other}[0:20]", start + 20 * k + 10, 100 + k)])


def test_a_schema_reaches_established_only_with_every_gate_and_a_named_approver(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (rec,) = cycle(tmp_path, CORPUS).reconciliations
    schema = propose_schema(
        tmp_path, "boom-bust", "a population feeds on a stock that it drains", insight=rec.hypothesis
    )
    assert schema.members == ("eco-wolves", "kit-sourdough") and schema.insight == rec.hypothesis
    assert set(schema.features) == features("oscillator")  # both share the whole skeleton
    cycle(tmp_path, CORPUS)  # the insight surfaces again, so its trial gates pass
    start_trial(tmp_path, "boom-bust")
    # nothing measured since the proposal but the members' own compression
    with pytest.raises(EvidenceRequired) as refused:
        establish_schema(tmp_path, "boom-bust", approver="dana")
    message = str(refused.value)
    assert "retrieval_lift: too few recalls" in message and "anticipation: no record written since" in message
    assert "compression" not in message  # that one passes
    # later records of the same skeleton, signed by the next cycle, and recalls that used its records
    write_now(tmp_path, NEWCOMERS)
    cycle(tmp_path, [*CORPUS, *NEWCOMERS])
    log_recalls(tmp_path, "eco-wolves", "eco-meadow", 6)
    report = measure_schema(tmp_path, "boom-bust")
    assert report.passed, report.failed
    gates = {g.gate: g for g in report.gates}
    assert gates["anticipation"].counts["correct"] == 2 and gates["retrieval_lift"].counts["with"] == 6
    with pytest.raises(ApprovalRequired):
        establish_schema(tmp_path, "boom-bust", approver=None)
    established, _ = establish_schema(tmp_path, "boom-bust", approver="dana")
    assert (established.state, established.approver) == ("established", "dana")
    recorded = established.history[-1]["evidence"]
    assert recorded["passed"] and [g["gate"] for g in recorded["gates"]] == [
        "retrieval_lift",
        "anticipation",
        "compression",
    ]


def test_one_failed_gate_keeps_a_schema_on_trial_and_is_named(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (rec,) = cycle(tmp_path, CORPUS).reconciliations
    propose_schema(tmp_path, "boom-bust", "a population feeds on a stock", insight=rec.hypothesis)
    cycle(tmp_path, CORPUS)  # the insight surfaces again, so its trial gates pass
    start_trial(tmp_path, "boom-bust")
    write_now(tmp_path, NEWCOMERS)
    cycle(tmp_path, [*CORPUS, *NEWCOMERS])
    log_recalls(tmp_path, "eco-wolves", "eco-meadow", 6)
    strict = SchemaGateConfig(min_compression=0.9)
    with pytest.raises(EvidenceRequired, match=r"gates failed: compression: [\d.]+ bits without") as refused:
        establish_schema(tmp_path, "boom-bust", approver="dana", config=strict)
    assert "retrieval_lift" not in str(refused.value) and "anticipation" not in str(refused.value)
    assert Ledger(tmp_path).state().schemas["boom-bust"].state == "trial"


def test_a_schema_is_proposed_over_signed_records_only(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    with pytest.raises(LCAError, match="no current signature for eco-wolves"):
        propose_schema(tmp_path, "s", "d", records=["eco-wolves", "kit-sourdough"])
    cycle(tmp_path, CORPUS)
    with pytest.raises(LCAError, match="at least two records"):
        propose_schema(tmp_path, "s", "d", records=["eco-wolves"])
    with pytest.raises(LCAError, match="share no signature feature"):
        propose_schema(tmp_path, "s", "d", records=["eco-scent", "fin-reserve"])
    schema = propose_schema(tmp_path, "s", "d", records=["eco-wolves", "kit-sourdough", "fin-rally"])
    assert set(schema.features) == features("oscillator")  # two of three hold it
