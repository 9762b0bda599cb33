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
    assert cli.main(["schema", "trial", "incident-rule"]) == 2  # proposed from no insight: a person puts it on trial
    assert "candidate -> trial needs a named approver" in capsys.readouterr().err
    assert cli.main(["schema", "trial", "incident-rule", "--approver", "dana"]) == 0
    assert cli.main(["schema", "establish", "incident-rule"]) == 2
    assert "named approver" in capsys.readouterr().err
    capsys.readouterr()
    assert cli.main(["ledger"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["schemas"] == {"incident-rule": {"state": "trial", "version": 1}}
    t1 = str(max(e.at for e in __import__("lca.ledger", fromlist=["Ledger"]).Ledger(store.home).events()))
    # a schema proposed without records has no evidence: it stays on trial, the failed gates named
    assert cli.main(["schema", "establish", "incident-rule", "--approver", "dana"]) == 2
    refused = capsys.readouterr().err
    assert "evidence gates failed: retrieval_lift" in refused and "compression: 0 of its 0 record(s)" in refused
    assert cli.main(["schema", "evidence", "incident-rule"]) == 0
    assert "anticipation: FAIL" in capsys.readouterr().out
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
    assert list(rows[0]) == ["item", "memory", "before", "action", "question", "rating", "rater", "notes"]  # no label
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


# ---- the audit's ratings back: the experiential-weight audit report ---------------------------------
def _audit(store, tmp_path, capsys):
    _store_with_prevented_events(store)
    out = tmp_path / "audit"
    assert cli.main(["audit", "prevented", "--sample", "3", "--seed", "1", "--out", str(out)]) == 0
    assert "lca audit import" in capsys.readouterr().out
    key = {k["item"]: k["kind"] for k in map(json.loads, (out / "key.jsonl").read_text().splitlines())}
    return out, key


def _rate(out, path, rater, answers, extra=()):
    """A rater's filled copy of items.csv: ``answers`` maps an item to yes/no/unsure (left out: not rated)."""
    rows = list(csv.reader(open(out / "items.csv", newline="", encoding="utf-8")))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(rows[0])
        for row in rows[1:]:
            if row[0] in answers:
                row[5], row[6] = answers[row[0]], rater
            writer.writerow(row)
        writer.writerows(extra)
    return path


def test_the_audit_reads_the_ratings_back_into_the_experiential_weight_report(store, tmp_path, capsys):
    import krippendorff
    import numpy as np
    from statsmodels.stats.proportion import proportion_confint

    out, key = _audit(store, tmp_path, capsys)
    claims = sorted(i for i, k in key.items() if k == "claim")
    controls = sorted(i for i, k in key.items() if k == "control")
    assert len(claims) == 3 and len(controls) == 3
    assert (out / "items.html").is_file() and "claim" not in (out / "items.html").read_text().lower()
    codes = {
        "ana": {claims[0]: "yes", claims[1]: "yes", claims[2]: "Yes", controls[0]: "no", controls[1]: "no", controls[2]: "yes"},
        "ben": {claims[0]: "yes", claims[1]: "no", claims[2]: "yes", controls[0]: "no", controls[1]: "unsure", controls[2]: "no"},
        "cai": {claims[0]: "yes", claims[1]: "unsure", claims[2]: "no", controls[0]: "no", controls[1]: "no"},
    }  # fmt: skip
    sheets = [str(_rate(out, tmp_path / f"{r}.csv", r, a)) for r, a in codes.items()]
    assert cli.main(["audit", "import", *sheets, "--dir", str(out), "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    # majority yes: claims 0 (3 of 3) and 2 (2 of 3); no control (control 2: 1 of 2)
    assert report["claims"]["confirmed"] == 2 and report["claims"]["rated"] == 3 and report["claims"]["unanimous"] == 1
    assert report["controls"]["confirmed"] == 0 and report["controls"]["rated"] == 3
    assert report["claims"]["fraction"] == pytest.approx(2 / 3)
    assert report["claims"]["ci"] == pytest.approx(list(proportion_confint(2, 3, alpha=0.05, method="wilson")))
    assert report["controls"]["ci"][0] == pytest.approx(0, abs=1e-12)
    assert report["excess"]["difference"] == pytest.approx(2 / 3)
    low, high = report["excess"]["ci"]
    assert low < 2 / 3 < high
    index = {"yes": 0, "no": 1, "unsure": 2}
    items = sorted(key)
    matrix = np.array(
        [[index[codes[r][i].lower()] if i in codes[r] else np.nan for i in items] for r in sorted(codes)], dtype=float
    )
    alpha = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert report["agreement"]["alpha"] == pytest.approx(alpha, abs=1e-12)
    assert report["agreement"]["n_raters"] == 3 and report["agreement"]["level"] == "nominal"
    assert report["agreement"]["refused"] is True  # these raters do not agree well enough, and the report says so
    assert report["raters"]["cai"] == {"kind": "person", "ratings": 5} and report["experience_weight"] == 3
    assert report["export"]["seed"] == 1 and report["unresolvable_claims"] == 0
    assert "raters confirm 66.7% of prevented-mistake claims (2 of 3" in report["verdict"]
    assert "not a reliable measure" in report["verdict"] and report["verdict"] in printed
    text = (out / "report.md").read_text()
    assert "| claims | 3 | 2 | 66.7% |" in text and f"alpha {alpha:.3f}" in text and "below the threshold" in text


def test_an_audit_sheet_with_a_problem_is_refused_line_by_line_and_writes_nothing(store, tmp_path, capsys):
    out, key = _audit(store, tmp_path, capsys)
    items = sorted(key)
    good = _rate(out, tmp_path / "ana.csv", "ana", {i: "yes" for i in items})
    bad = _rate(
        out,
        tmp_path / "ben.csv",
        "ben",
        {items[0]: "maybe", items[1]: "no"},
        extra=[["item-999", "m", "b", "a", "q", "no", "ben", ""], [items[1], "m", "b", "a", "q", "yes", "ben", ""]],
    )
    assert cli.main(["audit", "import", str(good), str(bad), "--dir", str(out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    n = len(items) + 2
    assert lines == [
        f"lca: error: {bad}, line 2, field 'rating': rating 'maybe' of '{items[0]}' is not on the scale "
        "['yes', 'no', 'unsure']",
        f"lca: error: {bad}, line {n}, field 'item': unknown item 'item-999' (not in the key)",
        f"lca: error: {bad}, line {n + 1}, field 'rater': rater 'ben' rated '{items[1]}' again (first at {bad}, line 3)",
        "lca: error: nothing imported: 3 problem(s) in the sheet(s)",
    ]
    assert not (out / "report.json").exists() and not (out / "report.md").exists()
    old = tmp_path / "old.csv"  # an export from before the rater column
    old.write_text("item,memory,before,action,question,rating\nitem-001,m,b,a,q,yes\n", encoding="utf-8")
    assert cli.main(["audit", "import", str(old), "--dir", str(out)]) == 2
    assert f"{old}, line 1, field 'rater': missing column(s)" in capsys.readouterr().err
    assert cli.main(["audit", "import", str(good), "--dir", str(tmp_path / "nowhere")]) == 2
    assert "no key.jsonl" in capsys.readouterr().err
