"""Governed memory from the shell: proposals, approval, schemas, the ledger, and the blind audit export."""

from __future__ import annotations

import csv
import json

import pytest

import protocols.cli as cli
import protocols.cli.common as cli_common
from lca.recall import RecallConfig
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator


@pytest.fixture
def store(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setattr(
        cli_common,
        "open_store",
        lambda args, progress=False: Substrate(
            home, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)
        ),
    )
    with Substrate(home, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        yield s


def review_ok(messages):
    return "REASONING: the line says it.\nSUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept"


def test_held_proposal_is_listed_and_approved_from_the_shell(store, capsys):
    store.append([make_entry("s1", 1, "Rule: always deploy through staging first.")])
    store.checkpoint(
        FakeScriptedGenerator(lambda m: "rule | Always deploy through staging first. | 1"),
        reviewer=FakeScriptedGenerator(review_ok),
    )
    assert cli.main(["proposals", "--json"]) == 0
    (proposal,) = json.loads(capsys.readouterr().out)
    assert cli.main(["approve", proposal["id"], "--approver", "  "]) == 2
    assert "named approver" in capsys.readouterr().err
    assert cli.main(["approve", proposal["id"], "--approver", "dana"]) == 0
    assert "approved by dana" in capsys.readouterr().out
    assert cli.main(["approve", proposal["id"], "--approver", "dana"]) == 2  # nothing left to approve
    assert "no proposal" in capsys.readouterr().err


def test_schema_lifecycle_and_worldview_diff_from_the_shell(store, capsys):
    assert cli.main(["schema", "propose", "incident-rule", "--description", "incident -> cause -> rule"]) == 0
    assert cli.main(["schema", "establish", "incident-rule", "--approver", "dana"]) == 2  # not on trial yet
    assert "not allowed" in capsys.readouterr().err
    assert cli.main(["schema", "trial", "incident-rule"]) == 0
    assert cli.main(["schema", "establish", "incident-rule"]) == 2
    assert "named approver" in capsys.readouterr().err
    capsys.readouterr()
    assert cli.main(["ledger"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["schemas"] == {"incident-rule": {"state": "trial", "version": 1}}
    t1 = str(max(e.at for e in __import__("lca.ledger", fromlist=["Ledger"]).Ledger(store.home).events()))
    assert cli.main(["schema", "establish", "incident-rule", "--approver", "dana"]) == 0
    assert cli.main(["schema", "deprecate", "incident-rule"]) == 2  # a reason is required
    assert cli.main(["schema", "deprecate", "incident-rule", "--reason", "replaced"]) == 0
    capsys.readouterr()
    assert cli.main(["ledger", "--diff", t1, "2100-01-01T00:00:00Z"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["schemas"] == [{"id": "incident-rule", "from": ["trial", 1], "to": ["deprecated", 1]}]


def test_ledger_rejects_an_unreadable_time(store, capsys):
    assert cli.main(["ledger", "--as-of", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lca: error: 'yesterday'") and "ISO 8601" in err and "Traceback" not in err


def _store_with_prevented_events(store):
    from datetime import datetime

    from lca.memory import Authority, MemoryRecord, MemoryType, Privacy

    store.memory.write(
        MemoryRecord(
            id="lesson-staging",
            type=MemoryType.LESSON,
            created=datetime(2026, 1, 1),
            authority=Authority.REVIEWED,
            privacy=Privacy.PRIVATE,
        ),
        "Deploy through staging before production.",
    )
    turns = []
    for n in range(1, 13):
        kind = EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN
        turns.append(
            make_entry("s1", n, f"turn {n}: " + ("deploy please" if n % 2 else "deploying via staging"), kind=kind)
        )
    store.append(turns)
    for n in (2, 4, 6):
        store.experience.record("memory:lesson-staging", "prevented_mistake", span=f"s1#s1:{n}")


def test_prevented_audit_export_is_blind_seeded_and_mixed_with_controls(store, tmp_path, capsys):
    _store_with_prevented_events(store)
    out = tmp_path / "audit"
    assert cli.main(["audit", "prevented", "--sample", "2", "--seed", "3", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "items.csv", encoding="utf-8")))
    key = [json.loads(x) for x in (out / "key.jsonl").read_text().splitlines()]
    kinds = [k["kind"] for k in key]
    assert len(rows) == 4 and kinds.count("claim") == 2 and kinds.count("control") == 2
    assert set(rows[0]) == {"item", "memory", "before", "action", "question", "rating"}  # no label, no event
    claims = {k["item"]: k for k in key if k["kind"] == "claim"}
    for row in rows:
        if row["item"] in claims:
            span_entry = claims[row["item"]]["span"].split("#")[1]
            assert row["action"].startswith(f"turn {span_entry.split(':')[1]}:")  # the action the claim cites
    controls = [k for k in key if k["kind"] == "control"]
    claimed_spans = {"s1#s1:2", "s1#s1:4", "s1#s1:6"}
    assert all(k["span"] not in claimed_spans for k in controls)
    again = tmp_path / "again"
    cli.main(["audit", "prevented", "--sample", "2", "--seed", "3", "--out", str(again)])
    assert (again / "items.csv").read_text() == (out / "items.csv").read_text()  # the seed fixes the draw
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["events_available"] == 3 and manifest["seed"] == 3 and manifest["code_version"]
    capsys.readouterr()
    assert cli.main(["ledger", "--as-of", "2000-01-01T00:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out)["experience"] == {}
    assert cli.main(["ledger"]) == 0
    assert json.loads(capsys.readouterr().out)["experience"] == {"memory:lesson-staging": {"prevented_mistake": 3}}


def test_audit_on_a_store_without_claims_says_so(store, tmp_path, capsys):
    assert cli.main(["audit", "prevented", "--sample", "5", "--out", str(tmp_path / "a")]) == 2
    assert "no prevented-mistake events" in capsys.readouterr().err


def test_identity_set_without_approver_is_held_and_shown_after_approval(store, tmp_path, capsys):
    text = tmp_path / "instructions.md"
    text.write_text("Answer in French.")
    assert cli.main(["identity", "set", "instructions", "--file", str(text)]) == 0
    held = capsys.readouterr().out
    assert "held as proposal-identity-instructions-" in held
    proposal = held.split("held as ")[1].split(" ")[0]
    assert cli.main(["identity", "show", "instructions"]) == 0 and "(empty)" in capsys.readouterr().out
    assert cli.main(["approve", proposal, "--approver", "dana"]) == 0
    capsys.readouterr()
    assert cli.main(["identity", "show", "instructions"]) == 0 and "Answer in French." in capsys.readouterr().out


def test_checkpoint_refuses_an_unresolvable_model_string_before_the_cycle(store, capsys):
    store.append([make_entry("s1", 1, "Ana prefers tea over coffee.")])
    assert cli.main(["checkpoint", "--model", "nosuchprovider/model"]) == 2
    assert "cannot be resolved" in capsys.readouterr().err
    from lca.ledger import Ledger

    assert Ledger(store.home).state().cycles == []  # nothing ran


def test_a_sync_text_generator_reaches_inspect_models_from_plain_code():
    from inspect_ai.model import ModelOutput, ModelUsage

    from protocols.providers.models import text_generator

    def respond(messages, tools, tool_choice, config):
        out = ModelOutput.from_content(model="fake", content=f"echo: {messages[-1].text} / {config.max_tokens}")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    generator = text_generator("mockllm/model", custom_outputs=respond, memoize=False)
    assert generator.generate([{"role": "user", "content": "hi"}], max_tokens=7) == "echo: hi / 7"
    assert generator.model_id.startswith("mockllm")
