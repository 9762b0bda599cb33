"""``lca ingest`` on hostile and malformed files (issue 16): one ``lca: error:`` line naming the file, the record
or line and the field, exit 2, and the store unchanged; or, for bad transcript lines, each quarantined and
named on stderr while the rest imports."""

from __future__ import annotations

import json

import pytest

import lca.types
import protocols.cli as cli
import protocols.cli.common as cli_common
from lca.substrate import Substrate
from lca.transcript import encode_entry
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setattr(
        cli_common, "open_store", lambda args, progress=False: Substrate(home, embedder=FakeHashingEmbedder())
    )
    with Substrate(home, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("existing", 1, "the original line")])
    return home


def counts(home) -> tuple:
    with Substrate(home, embedder=FakeHashingEmbedder()) as s:
        report = s.health()
        files = sorted((p.name, p.read_bytes()) for p in s.transcript.sessions_dir.glob("*.jsonl"))
        return files, report.counts["entries"], report.counts["chunks"], len(s.transcript.quarantine_records())


def refused(capsys, argv: list[str]) -> str:
    """Run ``lca`` expecting exit 2; returns the single error line."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lca: error: ") and "Traceback" not in err
    return err.strip()


def lme_record(**overrides):
    record = {
        "question_id": "q1",
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00"],
        "haystack_sessions": [[{"role": "user", "content": "hi"}]],
    }
    record.update(overrides)
    return record


LOCOMO_TURN = {"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lisbon."}


@pytest.mark.parametrize(
    "fmt, content, needles",
    [
        ("locomo", [{"sample_id": "c", "conversation": [[LOCOMO_TURN]]}], ["record 0", "field 'conversation'"]),
        (
            "locomo",
            [{"sample_id": "c", "conversation": {"session_1": 3}}],
            ["record 0 (sample_id 'c')", "field 'conversation.session_1'", "got int"],
        ),
        (
            "locomo",
            [{"sample_id": "c", "conversation": {"session_1": [dict(LOCOMO_TURN, text={"a": 1})]}}],
            ["record 0", "field 'conversation.session_1[0].text'", "must be a string, got dict"],
        ),
        ("longmemeval", [lme_record(), 7], ["record 1", "expected a question object, got int"]),
        ("longmemeval", [lme_record(question_id={"id": 1})], ["record 0", "field 'question_id'"]),
        ("longmemeval", [lme_record(haystack_session_ids=[["s1"]])], ["field 'haystack_session_ids[0]'"]),
        (
            "longmemeval",
            [lme_record(haystack_sessions=[[{"role": "user", "content": 5}]])],
            ["record 0 (question 'q1')", "field 'haystack_sessions[0][0].content'", "got int"],
        ),
    ],
)
def test_a_malformed_benchmark_file_is_one_error_and_changes_nothing(home, tmp_path, capsys, fmt, content, needles):
    before = counts(home)
    path = tmp_path / f"bad-{fmt}.json"
    path.write_text(json.dumps(content))
    err = refused(capsys, ["ingest", "--format", fmt, "--quiet", str(path)])
    assert str(path) in err
    for needle in needles:
        assert needle in err
    assert counts(home) == before


def test_invalid_utf8_in_a_locomo_file_names_line_and_field(home, tmp_path, capsys):
    before = counts(home)
    path = tmp_path / "locomo.json"
    text = json.dumps([{"sample_id": "c", "conversation": {"session_1": [LOCOMO_TURN]}}], indent=1)
    path.write_bytes(text.encode().replace(b"Lisbon", b"Lis\xc3bon"))
    err = refused(capsys, ["ingest", "--format", "locomo", "--quiet", str(path)])
    line = text[: text.index("Lisbon")].count("\n") + 1
    assert f"{path}, line {line}, field '[0].conversation.session_1[0].text': not valid UTF-8" in err
    assert counts(home) == before


def test_bad_transcript_lines_are_quarantined_and_named_while_the_rest_imports(home, tmp_path, capsys, monkeypatch):
    path = tmp_path / "harness.jsonl"
    bad = {
        2: json.dumps(dict(make_entry("h", 2).to_wire(), content="\ud800")) + "\n",
        3: json.dumps(dict(make_entry("h", 3).to_wire(), v=True)) + "\n",
        4: encode_entry(make_entry("h", 4, meta={"x": float("nan")})).decode(),
        5: encode_entry(make_entry("q" * 300, 5)).decode(),
        6: encode_entry(make_entry("h", 6, "y" * 3000)).decode(),
    }
    path.write_text(encode_entry(make_entry("h", 1, "first \x1b[31m\u202eline")).decode() + "".join(bad.values()))
    monkeypatch.setattr(lca.types, "DEFAULT_MAX_ENTRY_BYTES", 2000)  # the bound, made tiny for the test
    before = counts(home)
    assert cli.main(["ingest", "--quiet", str(path)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err and len(lines) == 5
    for (number, _), line, field in zip(
        bad.items(), lines, ["content", "v", "meta.x", "session_id", "content"], strict=True
    ):
        assert line.startswith(f"lca: quarantined: {path}, line {number}, field '{field}': ")
    assert "5 line(s) quarantined" in captured.out
    after = counts(home)
    assert after[1] == before[1] + 1 and after[3] == before[3] + 5


def test_a_transcript_path_that_is_a_directory_is_one_error(home, tmp_path, capsys):
    err = refused(capsys, ["ingest", "--quiet", str(tmp_path)])
    assert "is a directory" in err


def test_an_import_that_hits_a_conflicting_line_is_refused_whole(home, tmp_path, capsys):
    before = counts(home)
    path = tmp_path / "harness.jsonl"
    path.write_bytes(
        encode_entry(make_entry("fresh", 1))
        + encode_entry(make_entry("fresh", 2))
        + encode_entry(make_entry("existing", 1, "rewritten history"))
    )
    err = refused(capsys, ["ingest", "--quiet", str(path)])
    assert f"{path}, line 3, field 'id': entry 'existing:1' is already recorded with different content" in err
    assert "nothing was imported" in err
    assert counts(home) == before
    assert cli.main(["health", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["healthy"] is True


def test_ingest_refuses_a_bound_below_one_byte(tmp_path, capsys):
    from protocols.cli import main

    assert main(["ingest", "--store", str(tmp_path / "s"), "--max-entry-bytes", "0", str(tmp_path / "x.jsonl")]) == 2
    assert "--max-entry-bytes must be at least 1, not 0" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("flag, value", [("--quantile", "nan"), ("--quantile", "1.5"), ("--positives", "0")])
def test_calibrate_floor_refuses_a_quantile_outside_0_1_and_no_positives(tmp_path, capsys, flag, value):
    from protocols.cli import main
    from tests.fakes import FakeHashingEmbedder

    home = tmp_path / "s"
    from lca.substrate import Substrate
    from tests.conftest import make_entry

    with Substrate(home, embedder=FakeHashingEmbedder()) as substrate:
        substrate.append([make_entry("s", 1, "a turn about the garden")])
    import lca.index.embedders as embedders

    original = embedders.SentenceTransformerEmbedder
    embedders.SentenceTransformerEmbedder = lambda *a, **k: FakeHashingEmbedder()  # type: ignore[assignment]
    try:
        assert main(["calibrate-floor", "--store", str(home), flag, value]) == 2
    finally:
        embedders.SentenceTransformerEmbedder = original  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert f"{flag} '{value}'" in err and "Traceback" not in err
