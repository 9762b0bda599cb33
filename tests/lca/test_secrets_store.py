"""No credential leaves the transcript (issue 16): credentials planted in turns stay verbatim under
``sessions/`` and come back redacted everywhere else: search hits, recall's block, candidates and
log, what consolidation writes (memory files, the ledger, cycle reports) when a writer copies the
credentials and a reviewer accepts everything, and what the live context renders."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from lca.context import ContextWindow, HandoffNotes, LiveContextManager
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.recall import RecallConfig, RecallContext
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator
from tests.lca.test_secrets import AWS_ID, AWS_SECRET, CASES, GITHUB, GOOGLE, OPENAI, PASSWORD, STRIPE

PLANTED = (OPENAI, STRIPE, AWS_ID, AWS_SECRET, GITHUB, GOOGLE, PASSWORD)  # the seven shapes
TURNS = [text for text, _, _ in CASES[:8]] + ["The batch job runs on Fridays after the deploy."]
QUERIES = [
    "OpenAI key for the batch job",
    "Stripe live key",
    "AWS access key id us-east-1",
    "aws secret access key, the other half on its own",
    "GitHub token expires Friday",
    "maps key restricted to our domain",
    "my password, do not share it",
]


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        s.append(
            [
                make_entry(
                    "s1",
                    n,
                    text,
                    timestamp=f"2026-03-02T10:00:{n:02d}",
                    kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
                )
                for n, text in enumerate(TURNS, 1)
            ]
        )
        yield s


def leaks(root: Path, *, skip: tuple[str, ...] = ("sessions",)) -> dict[str, list[int]]:
    """Files under ``root`` (but the folders in ``skip``) holding a planted credential, by which."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if relative.parts[0] in skip:
            continue
        data = path.read_bytes()
        which = [n for n, secret in enumerate(PLANTED) if secret.encode() in data]
        if which:
            found[str(relative)] = which
    return found


def clean(text: str) -> bool:
    return not any(secret in text for secret in PLANTED)


def consolidate(home: Substrate, prompts: list[str]):
    """A writer that copies every credential into a claim, and a reviewer that accepts everything."""
    claims = [
        f"fact | The OpenAI key is {OPENAI}. | 1",
        f"fact | The Stripe live key is {STRIPE}. | 2",
        f"fact | The AWS access key id is {AWS_ID}. | 3",
        f"fact | The AWS secret access key is {AWS_SECRET}. | 4",
        f"fact | The other half on its own is {AWS_SECRET}. | 5",
        f"fact | The GitHub token is {GITHUB}. | 6",
        f"fact | The maps key is {GOOGLE}. | 7",
        f"fact | The user's password is {PASSWORD}. | 8",
        "fact | The batch job runs on Fridays after the deploy. | 9",
    ]

    def write(messages):
        prompts.append(json.dumps(messages))
        return "\n".join(claims)

    def review(messages):
        prompts.append(json.dumps(messages))
        return "REASONING: fine.\nSUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept"

    return home.checkpoint(
        FakeScriptedGenerator(write, model_id="fake-writer"),
        reviewer=FakeScriptedGenerator(review, model_id="fake-reviewer"),
    )


def test_search_hits_are_redacted_and_point_at_the_verbatim_transcript(home):
    verbatim = {e.id: e.content for e in home.transcript.read("s1").entries}
    shown = 0
    for query in QUERIES:
        for hit in home.search(query, k=10):
            assert clean(hit.text), (query, hit.text)
            if "[REDACTED:" in hit.text:
                shown += 1
                assert not clean(verbatim[hit.pointer.entry_id])  # the pointer leads to the credential itself
    assert shown >= len(QUERIES)
    assert all(any(secret in text for text in verbatim.values()) for secret in PLANTED)


def test_recall_injects_credentials_redacted_and_logs_no_credential(home):
    injected = []
    for query in QUERIES:
        result = home.recall(RecallContext(query))
        assert clean(result.block), query
        assert all(clean(c.text) for c in result.candidates)
        for item in result.items:
            if "[REDACTED:" in item.text:
                injected.append(item)
                assert "secret or credential" in item.risk_reasons and item.why_not is None
    assert injected  # redacted and injected, rather than refused
    home.recall(RecallContext(f"is {STRIPE} still the live key?"))
    log = home.layout.root / "logs" / "recall.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert "[REDACTED:stripe-key]" in records[-1]["query"]
    assert clean(log.read_text())


def test_consolidation_removes_copied_credentials_and_stores_them_only_redacted(home):
    prompts: list[str] = []
    result = consolidate(home, prompts)
    removed = [v for v in result.verdicts if v.verdict == "remove"]
    assert len(removed) == 8 and all("secret" in v.reason for v in removed)
    assert [v.verdict for v in result.verdicts if v.verdict != "remove"] == ["accept"]
    assert all(clean(p) for p in prompts)  # no model was shown a credential: the span lines are redacted
    assert clean(json.dumps(result.to_dict())) and all(clean(c.claim) for c in result.candidates)
    assert sum("[REDACTED:" in c.claim for c in result.candidates) == 8  # reported, as a marker
    (memory,) = home.memory.load().files
    assert memory.body == "The batch job runs on Fridays after the deploy."
    ledger = home.layout.ledger.read_text()
    assert clean(ledger) and "[REDACTED:stripe-key]" in ledger and "[REDACTED:password]" in ledger
    proposed = [json.loads(x) for x in ledger.splitlines() if '"hypothesis_proposed"' in x]
    assert all("redacted" not in " ".join(e["data"]["members"]).lower() for e in proposed)
    (report,) = (home.layout.root / "consolidation").glob("cycle-*.json")
    assert clean(report.read_text()) and "[REDACTED:" in report.read_text()


def test_nothing_outside_the_transcript_holds_a_planted_credential(home):
    for query in QUERIES:
        home.search(query, k=10)
        home.recall(RecallContext(query))
    consolidate(home, [])
    root = home.layout.root
    assert leaks(root, skip=("sessions", "index")) == {}
    assert set(leaks(root / "sessions", skip=())) == {"s1.jsonl"}  # the authority keeps them verbatim


def test_the_derived_index_holds_no_planted_credential(home):
    home.ingest()
    assert leaks(home.layout.root / "index", skip=()) == {}


def test_the_live_context_renders_critical_memories_and_handoffs_redacted(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.99)) as s:
        s.memory.write(
            MemoryRecord(
                id="deploy-key",
                type=MemoryType.PROCEDURE,
                created=datetime(2026, 1, 1),
                authority=Authority.APPROVED,
                privacy=Privacy.PUBLIC,
                critical=True,
            ),
            f"deploy with {GITHUB}",
            approver="test-approver",
        )
        window = ContextWindow(total_tokens=400, reserve_output=20, critical_budget=80, recall_budget=40)
        m = LiveContextManager(s, window, session_id="live", agent_id="agent-test")
        m.add(make_entry("live", 1, f"the Stripe key is {STRIPE}"))
        ws = m.build("deploy")
        assert "[critical] deploy-key: deploy with [REDACTED:github-token]" in ws.messages[0]["content"]
        m.write_handoff(HandoffNotes(), reason="test")
        replay = LiveContextManager(s, window, session_id="next", agent_id="agent-test").replay_handoff()
        assert "[REDACTED:stripe-key]" in replay and clean(replay)
