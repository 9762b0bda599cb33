"""Forgetting (issue 53): a turn that a memory file, a handoff, the ledger, the recall log, a cycle report and a
quarantined line all hold is tombstoned, and afterwards a byte search of the whole store and of a new bundle finds
it 0 times; the tombstone verifies; recall and health still work; health names a derived store holding it again."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest

from lca.bundle import export_bundle, import_bundle
from lca.forget import FORGOTTEN, ForgetError, ForgetRequest, fingerprints, is_tombstone
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.recall import RecallConfig, RecallContext
from lca.substrate import Substrate
from lca.types import EntryKind, canonical_json
from protocols.cli import main
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

TEXT = "my sister Alma moved to 14 Rosemary Lane in Porto last spring"
KEPT = ["the deploy rota moves to Fridays", "review feedback comes as numbered lists", "ask Alma about the rota"]


def occurrences(root: Path, needle: str = "Rosemary Lane") -> list[str]:
    """Every file under ``root`` whose bytes (decompressed when gzip) hold the needle, case ignored."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        if needle.lower().encode() in data.lower():
            found.append(str(path.relative_to(root)))
    return found


def open_store(root: Path) -> Substrate:
    return Substrate(root, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0))


@pytest.fixture
def planted(tmp_path) -> Path:
    """A store where the text is in the transcript and in every derived place."""
    root = tmp_path / "store"
    with open_store(root) as s:
        s.append([make_entry("s", 1, KEPT[0]), make_entry("s", 2, TEXT), make_entry("s", 3, KEPT[1])])
        handoff = {"items": [{"text": f"User: {TEXT}", "pointers": ["s#s:2"]}], "recent_tail": []}
        s.append([make_entry("h", 1, json.dumps(handoff), kind=EntryKind.HANDOFF), make_entry("s", 4, KEPT[2])])
        record = MemoryRecord(
            id="alma-address",
            type=MemoryType.FACT,
            created=datetime(2026, 1, 1),
            authority=Authority.REVIEWED,
            privacy=Privacy.PRIVATE,
            sources=(TranscriptSpan(session="s", entries=("s:2",)),),
        )
        s.memory.write(record, "Alma lives at 14 Rosemary Lane, Porto.")
        s.ledger.append("event_confirmed", "ev-alma", {"text": TEXT, "turns": {"s#s:2": 1}})
        s.recall(RecallContext(f"where is {TEXT}"))  # the recall log keeps the (redacted) query
        s.layout.consolidation.mkdir(parents=True, exist_ok=True)
        (s.layout.consolidation / "cycle-1.json").write_text(json.dumps({"candidates": [{"text": TEXT}]}))
        with open(s.transcript.session_path("s"), "ab") as handle:  # a malformed line holding it: quarantined
            handle.write(f'{{"broken": "{TEXT}"\n'.encode())
        s.ingest()
    assert len(occurrences(root)) >= 7
    return root


def test_forgetting_a_turn_leaves_it_nowhere_in_the_store_or_a_new_bundle(planted, tmp_path):
    with open_store(planted) as s:
        report = s.forget(ForgetRequest(entries=("s#s:2",)), by="ana", why="the user asked (GDPR art. 17)")
        assert {(t["session"], t["entry"]) for t in report.tombstones} == {("s", "s:2"), ("h", "h:1")}
        assert report.memory_files_removed == ("alma-address",) and report.quarantined_lines_removed == 1
        assert {"events/ledger.jsonl", "consolidation/cycle-1.json"} <= set(report.derived_files_rewritten)
        assert occurrences(planted) == []
        assert occurrences(planted, "Alma moved") == []
        # the tombstone verifies: the hash of what was removed, who, when and why; its line hash holds
        stone = next(e for e in s.transcript.read("s").entries if e.id == "s:2")
        assert is_tombstone(stone) and stone.kind is EntryKind.USER_TURN and stone.timestamp
        removed = canonical_json({"content": TEXT, "meta": {}})
        assert stone.meta["forgotten"]["removed_sha256"] == hashlib.sha256(removed.encode()).hexdigest()
        assert stone.meta["forgotten"]["by"] == "ana" and "GDPR" in stone.meta["forgotten"]["why"]
        assert [e.content for e in s.transcript.read("s").entries if e.id != "s:2"] == KEPT
        assert FORGOTTEN in (planted / "events" / "ledger.jsonl").read_text()  # the record stays: the ledger replays
        s.ledger.events()
        # recall and health still work, and health verifies nothing derived holds it
        assert "rota" in s.recall(RecallContext("when is the deploy rota")).block
        health = s.health()
        assert health.check("forgotten").status.value == "ok", health.check("forgotten").detail
        assert health.check("transcript").status.value == "ok" and health.check("transcript_chain").status.value == "ok"
    export_bundle(planted, tmp_path / "bundle")
    assert occurrences(tmp_path / "bundle") == []
    import_bundle(tmp_path / "bundle", tmp_path / "copy", rebuild=lambda root: None)
    with open_store(tmp_path / "copy") as copy:
        assert any(is_tombstone(e) for e in copy.transcript.read("s").entries)


def test_health_names_a_derived_store_that_holds_a_forgotten_text_again(planted):
    with open_store(planted) as s:
        s.forget(ForgetRequest(matching="rosemary  LANE"), by="ana", why="asked")
        assert s.health().check("forgotten").status.value == "ok"
        (s.layout.logs / "stray.json").write_text(json.dumps({"note": TEXT.upper()}))
        check = s.health().check("forgotten")
        assert check.status.value == "fail" and "logs/stray.json" in check.data["holders"]
        assert TEXT not in check.detail and "Rosemary" not in json.dumps(check.data)


def test_a_dry_run_changes_nothing_and_selectors_combine(planted):
    before = {p: p.read_bytes() for p in planted.rglob("*") if p.is_file()}
    with open_store(planted) as s:
        report = s.forget(ForgetRequest(session="s", matching="rota"), by="ana", why="check", dry_run=True)
        assert {t["entry"] for t in report.tombstones} == {"s:1", "s:4"}  # not s:3, not the other session
        late = ForgetRequest(since=datetime(2026, 1, 1, 0, 0, 2), until=datetime(2026, 1, 1, 0, 0, 4))
        assert {t["entry"] for t in s.forget(late, by="ana", why="check", dry_run=True).tombstones} >= {"s:2", "s:3"}
    assert {p: p.read_bytes() for p in planted.rglob("*") if p.is_file()} == before


def test_bad_requests_are_refused_and_change_nothing(planted, capsys):
    before = {p: p.read_bytes() for p in planted.rglob("*") if p.is_file()}
    with pytest.raises(ForgetError, match="at least one selector"):
        ForgetRequest()
    with open_store(planted) as s, pytest.raises(ForgetError, match="nothing matches"):
        s.forget(ForgetRequest(entries=("s#nope",)), by="ana", why="x")
    assert main(["forget", "--store", str(planted), "--by", "ana", "--why", "x"]) == 2
    assert "at least one selector" in capsys.readouterr().err
    assert main(["forget", "--store", str(planted / "none"), "--entry", "s#s:2", "--by", "a", "--why", "x"]) == 2
    assert {p: p.read_bytes() for p in planted.rglob("*") if p.is_file()} == before


def test_a_replica_cannot_forget(planted, tmp_path):
    export_bundle(planted, tmp_path / "b")
    import_bundle(tmp_path / "b", tmp_path / "replica", rebuild=lambda root: None)
    with open_store(tmp_path / "replica") as replica, pytest.raises(ForgetError, match="replica store cannot forget"):
        replica.forget(ForgetRequest(entries=("s#s:2",)), by="ana", why="x")


def test_the_cli_forgets_and_prints_no_forgotten_text(planted, capsys):
    code = main(["forget", "--store", str(planted), "--matching", "Rosemary Lane", "--by", "ana", "--why", "asked"])
    out = capsys.readouterr()
    assert code == 0 and "forgot 2 entr" in out.out and "Rosemary" not in out.out + out.err
    assert occurrences(planted) == []


def test_fingerprints_match_windows_and_short_texts_only_whole():
    assert len(fingerprints(TEXT)["windows"]) == len(TEXT.split()) - 4
    assert fingerprints("yes")["windows"] == [] and len(fingerprints("yes")["whole"]) == 1
    assert fingerprints("") == {"windows": [], "whole": []}


def test_a_handoff_resting_on_a_forgotten_turn_goes_without_taking_the_kept_turns_it_quoted(tmp_path):
    """The handoff is tombstoned with the turn it cites; the other turns it quoted stay everywhere they were."""
    kept = "the staging database listens on port 6543 from now on"
    with open_store(tmp_path / "store") as s:
        s.append([make_entry("s", 1, kept), make_entry("s", 2, TEXT)])
        items = [{"text": f"User: {kept}", "pointers": ["s#s:1"]}, {"text": f"User: {TEXT}", "pointers": ["s#s:2"]}]
        s.append([make_entry("h", 1, json.dumps({"items": items, "recent_tail": []}), kind=EntryKind.HANDOFF)])
        record = MemoryRecord(
            id="staging-port",
            type=MemoryType.FACT,
            created=datetime(2026, 1, 1),
            authority=Authority.REVIEWED,
            privacy=Privacy.PRIVATE,
            sources=(TranscriptSpan(session="s", entries=("s:1",)),),
        )
        s.memory.write(record, kept)
        s.ingest()
        report = s.forget(ForgetRequest(entries=("s#s:2",)), by="ana", why="asked")
        assert {t["entry"] for t in report.tombstones} == {"s:2", "h:1"} and report.memory_files_removed == ()
        assert "staging-port" in s.memory_files()
        check = s.health().check("forgotten")
        assert check.status.value == "ok", check.data  # the kept turn, indexed again, is not a forgotten text
        assert occurrences(tmp_path / "store") == []
