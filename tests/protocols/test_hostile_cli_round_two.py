"""Issue 49, case 13 at the command line: a refused option or file is one line on stderr before any store is
created, and a file none of whose lines could be imported does not exit 0."""

from __future__ import annotations

import pytest

import protocols.cli as cli
from tests.protocols.test_user_mistakes import one_line_error


@pytest.fixture
def garbage(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("garbage\n{bad\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--limit", "-1"], "--limit must be at least 1"),
        (["--sample", "conv-1"], "--sample applies to importing a file with --format locomo"),
        (["--question", "q1"], "--question applies to importing a file with --format longmemeval"),
        (["--share-sessions"], "--share-sessions applies to importing a file with --format longmemeval"),
    ],
)
def test_an_option_the_format_ignores_is_refused_before_the_store_is_created(garbage, tmp_path, capsys, options, named):
    store = tmp_path / "store"
    assert cli.main(["ingest", str(garbage), "--store", str(store), "--quiet", *options]) == 2
    assert named in one_line_error(capsys)
    assert not store.exists()


def test_a_file_whose_every_line_was_refused_does_not_exit_0(garbage, tmp_path, capsys, monkeypatch):
    from tests.fakes import FakeHashingEmbedder

    monkeypatch.setattr("lca.index.embedders.SentenceTransformerEmbedder", lambda *a, **k: FakeHashingEmbedder())
    store = tmp_path / "store"
    assert cli.main(["ingest", str(garbage), "--store", str(store), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "nothing imported: every line of" in err and "bad.jsonl" in err
    assert len(list((store / "quarantine").iterdir())) >= 1  # the lines are kept, not dropped


@pytest.mark.parametrize("argv", [["recall", "x", "--config"], ["identity", "set", "user", "--file"]])
def test_a_missing_file_named_by_an_option_is_one_line_without_errno(tmp_path, capsys, argv):
    missing = tmp_path / "nope.yaml"
    store = tmp_path / "store"
    store.mkdir()
    (store / "sessions").mkdir()
    code = cli.main([*argv, str(missing), "--store", str(store)])
    err = one_line_error(capsys)
    assert code == 2 and f"{missing}: no such file or directory" in err and "Errno" not in err


@pytest.mark.parametrize("command", ["search", "recall"])
def test_a_key_typed_into_a_query_is_not_echoed_by_json_output(tmp_path, capsys, monkeypatch, command):
    from tests.fakes import FakeHashingEmbedder

    monkeypatch.setattr("lca.index.embedders.SentenceTransformerEmbedder", lambda *a, **k: FakeHashingEmbedder())
    store = tmp_path / "store"
    assert cli.main(["ingest", "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    key = "ghp_" + "Zq4xT9" * 6
    assert cli.main([command, f"why does {key} fail", "--store", str(store), "--json"]) == 0
    out = capsys.readouterr().out
    assert key not in out and "[REDACTED:" in out
