"""lca.health: the store's report on itself, built from the stores alone (no facade needed)."""

from __future__ import annotations

import pytest

from lca.health import DUPLICATE_MIN_CHUNKS, DUPLICATE_RATIO_WARN, consolidation_check, store_health
from lca.index.chunker import Chunker
from lca.index.store import IndexStore
from lca.ingest import IngestReport, ingest_pending
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.transcript import TranscriptStore
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.conftest import make_fact as fact
from tests.fakes import FakeHashingEmbedder


class Parts:
    """One store's parts, put together by hand: what the facade would hand to store_health."""

    def __init__(self, home, *, critical_budget: int = 400, count_tokens=lambda text: len(text.split())) -> None:
        self.layout = StoreLayout(home)
        self.embedder = FakeHashingEmbedder()
        self.transcript = TranscriptStore(home)
        self.memory = MemoryStore(home)
        self.index = IndexStore(home, self.embedder)
        self.ledger = Ledger(home)
        self.count_tokens = count_tokens
        self.critical_budget = critical_budget

    def ingest(self) -> None:
        ingest_pending(self.index, self.transcript, self.memory, Chunker(self.embedder), IngestReport())

    def health(self):
        return store_health(
            layout=self.layout,
            transcript=self.transcript,
            memory=self.memory,
            index=self.index,
            embedder=self.embedder,
            ledger=self.ledger,
            count_tokens=self.count_tokens,
            critical_budget=self.critical_budget,
        )


@pytest.fixture
def parts(tmp_path):
    p = Parts(tmp_path)
    yield p
    p.index.close()


def test_a_fresh_store_is_healthy_and_says_it_is_empty(parts):
    report = parts.health()
    assert report.healthy and report.store == str(parts.layout.root)
    assert report.check("transcript").data["entries"] == 0
    assert report.check("consolidation").detail == "no consolidation cycle has run"
    assert "no vectors yet" in report.check("embedder").detail


def test_health_names_the_memory_file_that_fails_to_load(parts):
    parts.memory.write(fact("fine"), "Ana's cat is called Pebble.")
    broken = parts.layout.memory / "broken.md"
    broken.write_text("---\nid: broken\ntype: fact\n---\nno created, authority or privacy\n")
    parts.ingest()
    report = parts.health()
    check = report.check("memory_files")
    assert not report.healthy and check.status is HealthStatus.FAIL
    assert check.data["loaded"] == 1 and len(check.data["failed"]) == 1
    assert "broken.md" in check.data["failed"][0] and "1 failed to load" in check.detail


def test_a_memory_file_edited_around_the_write_api_is_a_warning_not_a_failure(parts):
    written = parts.memory.write(fact("tea"), "Ana prefers tea.")
    written.path.write_text(written.path.read_text().replace("Ana prefers tea.", "Ana prefers coffee."))
    check = parts.health().check("memory_files")
    assert check.status is HealthStatus.WARN and check.data["drifted"] == [str(written.path)]


def test_the_critical_set_is_measured_with_the_hosts_token_count(tmp_path):
    parts = Parts(tmp_path, critical_budget=5, count_tokens=lambda text: len(text.split()))
    try:
        parts.memory.write(fact("deploys", critical=True), "Never deploy on Fridays without a rollback plan.")
        check = parts.health().check("critical_set")
        assert check.status is HealthStatus.WARN
        assert check.data == {"memories": 1, "tokens": 8, "budget": 5}
    finally:
        parts.index.close()


def test_transcript_counts_and_pending_entries(parts):
    parts.transcript.append([make_entry("s1", n) for n in range(1, 4)])
    before = parts.health()
    assert before.check("transcript").data["entries"] == 3
    assert before.check("consistency").status is HealthStatus.WARN
    assert before.check("consistency").data["entries_pending"] == 3
    parts.ingest()
    after = parts.health()
    assert after.check("consistency").status is HealthStatus.OK and after.healthy
    assert after.counts["entries"] == 3 and after.counts["chunks"] >= 3


def test_a_store_last_written_by_other_code_is_a_warning(parts):
    parts.ingest()
    parts.index.catalog_.set_meta("last_writer_version", "lca 0.0.0-elsewhere")
    check = parts.health().check("code_version")
    assert check.status is HealthStatus.WARN and check.data["last_writer"] == "lca 0.0.0-elsewhere"


# ---- duplicates: one vector per distinct text, and a warning when too many chunks repeat one ------------------
def topic(n: int) -> str:
    return f"turn {n}: the {['garden', 'invoice', 'deploy', 'recipe', 'vet'][n % 5]} plan, item number {n}"


def test_a_store_of_distinct_turns_reports_its_duplicate_ratio_as_ok(parts):
    parts.transcript.append([make_entry("s1", n, topic(n)) for n in range(1, 31)])
    parts.ingest()
    check = parts.health().check("duplicates")
    assert check.status is HealthStatus.OK and check.data["chunks"] == 30 and check.data["distinct_texts"] == 30
    assert check.detail.startswith("duplicate ratio 0.0000: 30 chunks over 30 distinct texts")


def test_a_conversation_ingested_twice_warns_with_the_ratio_and_the_counts(parts):
    turns = [topic(n) for n in range(1, 16)]
    parts.transcript.append([make_entry("first", n, text) for n, text in enumerate(turns, 1)])
    parts.transcript.append([make_entry("again", n, text) for n, text in enumerate(turns, 1)])
    parts.ingest()
    report = parts.health()
    check = report.check("duplicates")
    assert check.status is HealthStatus.WARN and report.healthy  # a warning, not a failure
    assert check.data == {
        "duplicate_ratio": 0.5,
        "chunks": 30,
        "distinct_texts": 15,
        "warn_above": DUPLICATE_RATIO_WARN,
    }
    assert "duplicate ratio 0.5000: 30 chunks over 15 distinct texts" in check.detail
    assert f"above {DUPLICATE_RATIO_WARN}" in check.detail and report.counts["duplicate_ratio"] == 0.5


@pytest.mark.parametrize(("distinct", "copies", "status"), [(15, 5, HealthStatus.OK), (14, 6, HealthStatus.WARN)])
def test_the_duplicate_warning_starts_above_the_threshold(parts, distinct, copies, status):
    """20 chunks: 5 copies is a ratio of exactly 0.25 (not above it), 6 copies is 0.30."""
    texts = [topic(n) for n in range(distinct)] + [topic(0)] * copies
    parts.transcript.append([make_entry("s1", n, text) for n, text in enumerate(texts, 1)])
    parts.ingest()
    check = parts.health().check("duplicates")
    assert check.data["chunks"] == DUPLICATE_MIN_CHUNKS == 20 and DUPLICATE_RATIO_WARN == 0.25
    assert check.status is status and check.data["duplicate_ratio"] == pytest.approx(copies / 20)


def test_a_store_too_small_for_a_share_to_mean_anything_does_not_warn(parts):
    parts.transcript.append(
        [make_entry("a", 1, "ok thanks"), make_entry("b", 1, "ok thanks"), make_entry("c", 1, "hi")]
    )
    parts.ingest()
    check = parts.health().check("duplicates")
    assert DUPLICATE_RATIO_WARN < check.data["duplicate_ratio"] == pytest.approx(1 / 3)
    assert check.status is HealthStatus.OK and check.data["chunks"] < DUPLICATE_MIN_CHUNKS


# ---- consolidation, from the ledger alone ------------------------------------------------------
def cycle(ledger: Ledger, name: str, *, candidates: int, verdicts: dict, **extra) -> None:
    ledger.append(
        "cycle_completed",
        name,
        {
            "status": "completed",
            "trigger": "elected",
            "marks": {},
            "counts": {
                "candidates": candidates,
                "verdicts": verdicts,
                "failures": extra.pop("failures", 0),
                "read_back_failures": extra.pop("read_back_failures", 0),
            },
            **extra,
        },
    )


def test_consolidation_rates_add_up_over_cycles(tmp_path):
    ledger = Ledger(tmp_path)
    cycle(
        ledger,
        "c1",
        candidates=4,
        verdicts={"accept": 2, "reject": 1, "downgrade": 1},
        rejected_reasons=["contradicts m-1 and is not supported"],
    )
    cycle(
        ledger,
        "c2",
        candidates=4,
        verdicts={"accept": 3, "remove": 1},
        rejected_reasons=["unsupported (no cited source line): removed"],
    )
    check = consolidation_check(ledger)
    assert check.status is HealthStatus.OK
    assert check.data["cycles"] == 2 and check.data["candidates"] == 8
    assert check.data["rejection_rate"] == pytest.approx(2 / 8) and check.data["downgrade_rate"] == pytest.approx(1 / 8)
    assert check.data["rejection_reasons"] == {"contradiction": 1, "unsupported": 1}
    assert [c["cycle"] for c in consolidation_check(ledger, recent=1).data["recent"]] == ["c2"]


def test_a_refused_or_unretrievable_last_cycle_fails(tmp_path):
    ledger = Ledger(tmp_path)
    cycle(ledger, "c1", candidates=1, verdicts={"accept": 1}, read_back_failures=1)
    assert consolidation_check(ledger).status is HealthStatus.FAIL
    ledger.append("cycle_completed", "c2", {"trigger": "elected", "status": "refused", "reason": "broken.md"})
    check = consolidation_check(ledger)
    assert check.status is HealthStatus.FAIL and "refused: broken.md" in check.detail


def test_an_unreadable_ledger_is_a_failure_not_a_crash(tmp_path):
    ledger = Ledger(tmp_path)
    cycle(ledger, "c1", candidates=1, verdicts={"accept": 1})
    with open(ledger.path, "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    check = consolidation_check(ledger)
    assert check.status is HealthStatus.FAIL and "unreadable" in check.detail
