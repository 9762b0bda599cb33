"""`lca export` (issue 53): one session's or one speaker's turns in the wire format, redacted unless --verbatim,
each line a valid wire record; a forgotten turn leaves as its tombstone."""

from __future__ import annotations

import json

import pytest

from lca.forget import ForgetRequest
from lca.substrate import Substrate
from lca.transcript import entry_from_wire
from protocols.cli import main
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.test_secrets import GITHUB


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("a", 1, "the rota moves to Fridays", author="ana"),
                make_entry("a", 2, f"my token is {GITHUB}", author="ben"),
                make_entry("b", 1, "Ana here again about the rota", author="ana"),
            ]
        )
    return root


def export(capsys, *argv: str) -> tuple[int, list[dict], str]:
    code = main(["export", *argv])
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def test_a_session_exported_verbatim_is_its_lines_as_recorded(store, capsys):
    code, records, err = export(capsys, "--store", str(store), "--session", "a", "--verbatim")
    recorded = [json.loads(line) for line in (store / "sessions" / "a.jsonl").read_text().splitlines()]
    assert code == 0 and records == recorded and "exported 2 entries" in err


def test_an_export_by_speaker_spans_sessions_and_is_redacted_by_default(store, capsys, tmp_path):
    code, records, _ = export(capsys, "--store", str(store), "--author", "ana")
    assert code == 0 and [(r["session_id"], r["id"]) for r in records] == [("a", "a:1"), ("b", "b:1")]
    out = tmp_path / "ben.jsonl"
    assert main(["export", "--store", str(store), "--author", "ben", "--out", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert GITHUB not in out.read_text() and record["meta"]["export_redacted"] is True
    assert entry_from_wire(record).content.startswith("my token is [REDACTED:")  # its hash holds


def test_a_forgotten_turn_is_exported_as_its_tombstone(store, capsys):
    with Substrate(store, embedder=FakeHashingEmbedder()) as s:
        s.forget(ForgetRequest(entries=("a#a:1",)), by="ana", why="asked")
    _, records, _ = export(capsys, "--store", str(store), "--session", "a", "--verbatim")
    assert records[0]["content"] == "" and records[0]["meta"]["forgotten"]["by"] == "ana"
    assert "Fridays" not in json.dumps(records)


@pytest.mark.parametrize(
    "argv,message", [([], "names a session"), (["--session", "nope"], "no such session")], ids=["none", "unknown"]
)
def test_a_bad_export_is_one_line_and_exit_2(store, capsys, argv, message):
    code = main(["export", "--store", str(store), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
