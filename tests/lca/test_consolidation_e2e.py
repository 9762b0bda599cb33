"""A real consolidation: SmolLM2-135M through llama.cpp as writer and reviewer, the real embedder.

A 135M model is a weak judge, so these tests check what must hold whatever it says: every
candidate gets a verdict, nothing unverified is written, what is written is read back by
recall, and the ledger, the cycle record and health agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lca.consolidation import ConsolidationConfig
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.substrate import Substrate
from lca.types import EntryKind, TranscriptEntry

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
VERDICTS = {"accept", "reject", "supersede", "downgrade", "remove", "failed"}


def conversation(session, lines, start=1):
    return [
        TranscriptEntry(
            id=f"{session}:{n}",
            session_id=session,
            agent_id="agent-e2e",
            kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
            timestamp=f"2026-03-02T10:{n:02d}:00",
            content=text,
        )
        for n, text in enumerate(lines, start)
    ]


@pytest.fixture(scope="module")
def generator():
    from lca.generators import LlamaCppGenerator

    with LlamaCppGenerator(timeout_s=120) as g:
        yield g


def test_real_cycle_verifies_writes_and_reads_back(tmp_path, real_embedder, generator):
    with Substrate(tmp_path, embedder=real_embedder) as s:
        s.append(
            conversation(
                "s1",
                [
                    "We decided to move the billing service to PostgreSQL 16 next week.",
                    "Understood. I will plan the billing migration to PostgreSQL 16.",
                    "Also, I prefer short status updates in the morning.",
                    "Got it: short status updates every morning.",
                ],
            )
        )
        verified = s.checkpoint(generator)
        assert verified.writer_model == "smollm2-135m-instruct-q4_1" and verified.verified
        assert len(verified.verdicts) == len(verified.candidates)
        assert {v.verdict for v in verified.verdicts} <= VERDICTS
        for verdict in verified.verdicts:
            assert verdict.raw or verdict.verdict == "remove"  # every review's raw output is on record
        accepted = {v.candidate for v in verified.verdicts if v.verdict in ("accept", "supersede", "downgrade")}
        written = {w.candidate for w in verified.writes if w.action in ("created", "updated", "held")}
        assert written == accepted  # nothing the verifier stopped was written

        # the ablation writes without review: this exercises the write path with the real model's output
        s.append(
            conversation(
                "s2",
                [
                    "My sister Lucia lives in Lisbon and works as a nurse.",
                    "Thanks, I will remember that Lucia is a nurse in Lisbon.",
                ],
            )
        )
        # (SmolLM2 labels most items "rule": procedural, so this needs the named approver)
        unverified = s.checkpoint(generator, config=ConsolidationConfig(verify=False), approver="e2e-approver")
        created = [w for w in unverified.writes if w.action == "created"]
        assert created, f"the writer produced no usable candidate: {unverified.failures}"
        assert all(b.retrieved for b in unverified.read_back) and len(unverified.read_back) == len(created)
        for w in created:
            record = s.memory.get(w.memory_id).record
            assert record.authority.value == "unreviewed" and record.sources
            assert record.approved_by == "e2e-approver" or record.type.value not in ("procedure", "runbook")

        state = Ledger(tmp_path).state()
        assert len(state.cycles) == 2
        assert set(state.hypotheses) >= {c.id for c in verified.candidates + unverified.candidates}
        check = s.health().check("consolidation")
        stopped = sum(1 for v in verified.verdicts + unverified.verdicts if v.verdict in ("reject", "remove"))
        total = len(verified.candidates) + len(unverified.candidates)
        assert check.data["candidates"] == total
        assert check.data["rejection_rate"] == pytest.approx(stopped / total)


def test_lca_checkpoint_runs_the_local_model_from_the_shell(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LCA_HOME=str(tmp_path / "store"))

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "protocols.cli", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    fixture = REPO / "data" / "fixtures" / "locomo_fixture.json"
    assert run("ingest", "--format", "locomo", "--quiet", str(fixture)).returncode == 0
    out = run("checkpoint", "--json", "--timeout", "120")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["writer_model"] == "smollm2-135m-instruct-q4_1"
    assert sum(m["entries"] for m in record["span"].values()) == 16
    assert StoreLayout(tmp_path / "store").cycle_report(record["cycle_id"]).exists()
    again = json.loads(run("checkpoint", "--json").stdout)
    assert again["candidates"] == []  # the checkpoint moved the span forward
    assert sum(m["entries"] for m in again["span"].values()) == 0
    assert "Traceback" not in out.stderr and "TypeError" not in out.stderr
