"""Issue 49, the store's part: a store that never follows a link out of itself (case 6), derived stores a kill
leaves in a state health names and `lca ingest` repairs (7), a hash chain that sees lines swapped in place (9),
one line instead of a traceback for a folder named like a memory file and for a read-only store (11), reading
commands that create nothing, and a size bound on memory files (13).

Commands run in-process through ``protocols.cli.main`` with the fake embedder (``common.open_store`` replaced,
the store path still checked), so exit codes and messages are the shell's own; a kill runs in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lca.transcript_chain as transcript_chain
import protocols.cli as cli
import protocols.cli.common as cli_common
from lca.errors import LinkRefusedError
from lca.index.completeness import IndexIncompleteError
from lca.memory import MAX_MEMORY_FILE_BYTES, render_memory
from lca.substrate import Substrate
from lca.transcript import TranscriptStore, encode_entry
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.conftest import make_fact as fact
from tests.fakes import FakeHashingEmbedder
from tests.lca.test_health_integrity import LINES, READ_ONLY_CHILD, _as_unprivileged

REPO = Path(__file__).resolve().parents[2]
LATER = [f"A later turn {n} about the harbour ferry timetable." for n in range(1, 7)]


def open_home(home: Path) -> Substrate:
    return Substrate(home, embedder=FakeHashingEmbedder())


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A store with five indexed turns; the CLI opens the store it is given with the fake embedder."""
    home = tmp_path / "home"
    monkeypatch.setattr(
        cli_common,
        "open_store",
        lambda args, progress=False: Substrate(cli_common.checked_store_path(args), embedder=FakeHashingEmbedder()),
    )
    with open_home(home) as s:
        s.append([make_entry("s1", n, text) for n, text in enumerate(LINES, start=1)])
    return home


def run(capsys, home: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([*argv, "--store", str(home)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def one_error_line(err: str) -> str:
    assert err.startswith("lca: error: ") and err.count("\n") == 1, err
    return err


def files_of(root: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(root)): ("link" if p.is_symlink() else p.read_bytes() if p.is_file() else "dir")
        for p in sorted(root.rglob("*"))
    }


def search_texts(home: Path, query: str) -> list[str]:
    with open_home(home) as s:
        return [h.text for h in s.search(query, k=5)]


# ---- case 6: the store never follows a link out of itself --------------------------------------------------
def test_an_append_to_a_session_file_that_is_a_link_is_refused_and_nothing_outside_is_written(home, tmp_path, capsys):
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"outside the store\n")
    (home / "sessions" / "x.jsonl").symlink_to(outside)
    with pytest.raises(LinkRefusedError) as refused:
        TranscriptStore(home).append([make_entry("x", 1, "a turn for the linked session")])
    assert "\n" not in str(refused.value) and "x.jsonl is a symbolic link" in str(refused.value)
    history = tmp_path / "history.jsonl"
    history.write_bytes(encode_entry(make_entry("x", 2, "another turn for it")))
    code, _, err = run(capsys, home, "ingest", str(history), "--quiet")
    assert code == 2 and "x.jsonl is a symbolic link" in one_error_line(err)
    assert outside.read_bytes() == b"outside the store\n"
    assert "x" not in TranscriptStore(home).session_ids()  # a linked session is not read either

    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "[fail] links: 1 symbolic link(s) inside the store: sessions/x.jsonl" in out


def test_a_memory_file_that_is_a_link_is_not_indexed_and_is_reported(home, tmp_path, capsys):
    outside = tmp_path / "notes.md"
    outside.write_text(render_memory(fact("leak"), "The vault combination is zanzibar."))
    (home / "memory").mkdir()
    (home / "memory" / "leak.md").symlink_to(outside)
    (home / "memory" / "loop.md").symlink_to(home / "memory" / "loop.md")
    code, _, err = run(capsys, home, "ingest", "--quiet")
    assert code == 1 and "leak.md" in err and "loop.md" in err and "symbolic link" in err
    assert not any("zanzibar" in text for text in search_texts(home, "vault combination zanzibar"))
    with open_home(home) as s:
        report = s.health()
    failed = report.check("memory_files").data["failed"]
    assert report.check("memory_files").status is HealthStatus.FAIL and len(failed) == 2
    assert report.check("links").data["links"] == ["memory/leak.md", "memory/loop.md"]
    for argv in (("recall", "vault combination"), ("reindex", "--quiet")):
        assert run(capsys, home, *argv)[0] == 0


def test_a_reindex_never_deletes_what_a_linked_index_folder_points_at(home, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    (home / "index").rename(elsewhere)
    (home / "index").symlink_to(elsewhere)
    kept = files_of(elsewhere)
    code, _, err = run(capsys, home, "reindex", "--quiet")
    assert code == 2 and "index is a symbolic link" in one_error_line(err) and "nothing was deleted" in err
    assert files_of(elsewhere) == kept


# ---- case 7: a kill leaves the old state or one health names and `lca ingest` repairs ----------------------
KILLED_CHILD = """
import os, signal, sys
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder

class KilledMidway(FakeHashingEmbedder):
    def embed(self, texts):
        if self.calls >= int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().embed(texts)

substrate = Substrate(sys.argv[1], embedder=KilledMidway(), embed_batch=2)
substrate.reindex() if sys.argv[2] == "reindex" else substrate.ingest()
"""


def killed(home: Path, what: str, after_batches: int) -> None:
    child = subprocess.run(
        [sys.executable, "-c", KILLED_CHILD, str(home), what, str(after_batches)], cwd=REPO, capture_output=True
    )
    assert child.returncode == -9, child.stderr.decode()


def test_an_ingest_killed_mid_indexing_is_named_refused_by_search_and_completed_by_ingest(home, capsys):
    with open_home(home) as s:
        s.append([make_entry("s2", n, text) for n, text in enumerate(LATER, start=1)], index=False)
    killed(home, "ingest", 2)  # two batches committed to the catalog, their vectors never saved

    code, _, err = run(capsys, home, "search", "harbour ferry timetable")
    assert code == 2 and "incomplete" in one_error_line(err) and "`lca ingest`" in err
    code, _, err = run(capsys, home, "recall", "harbour ferry timetable")
    assert code == 2 and "incomplete" in one_error_line(err)
    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "[fail] index_complete: the index is incomplete: 4 catalog text(s) have no saved vector" in out
    with open_home(home) as writer, open_home(home) as reader, writer.writer_lock():
        assert reader.search("harbour ferry timetable", k=3)  # a write in progress is answered from, not refused
        assert reader.recall(LATER[0]).candidates  # a text faiss lacks yet reads as no vector (it was a faiss error)

    assert run(capsys, home, "ingest", "--quiet")[0] == 0
    assert any("harbour ferry" in text for text in search_texts(home, "harbour ferry timetable"))
    with open_home(home) as s:
        assert s.health().healthy


def test_a_reindex_killed_early_is_named_incomplete_not_an_empty_healthy_index(home, capsys):
    before = search_texts(home, "Clara visa Lisbon")
    killed(home, "reindex", 0)  # the old index deleted, nothing of the new one embedded

    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "[fail] index_complete: the index is incomplete: a reindex started at" in out
    code, out, err = run(capsys, home, "search", "Clara visa Lisbon")
    assert code == 2 and "no results" not in out and "did not finish" in one_error_line(err)
    with open_home(home) as s, pytest.raises(IndexIncompleteError):
        s.recall("Clara visa Lisbon")

    assert run(capsys, home, "ingest", "--quiet")[0] == 0
    assert search_texts(home, "Clara visa Lisbon") == before
    with open_home(home) as s:
        assert s.health().healthy and not (home / "index" / "rebuilding.json").exists()


# ---- case 9: the hash chain over each session file ----------------------------------------------------------
def test_two_lines_swapped_in_place_are_seen_by_health_and_reindex_starts_the_chain_again(home, capsys, monkeypatch):
    session = home / "sessions" / "s1.jsonl"
    for window in ("RACY_NS", "FINE_RACY_NS"):  # as if its state was saved in the same clock tick as the write
        monkeypatch.setattr(transcript_chain, window, 10**18)
    with open_home(home) as s:
        assert s.health().check("transcript_chain").data["read"] == 1  # read, not trusted by its stamp alone
    for window in ("RACY_NS", "FINE_RACY_NS"):  # as if it was saved long after the write
        monkeypatch.setattr(transcript_chain, window, -(10**18))
    with open_home(home) as s:
        check = s.health().check("transcript_chain")
    assert check.status is HealthStatus.OK and check.data == {"files": 1, "read": 0, "changed": [], "unrecorded": []}

    lines = session.read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]  # every line still sound on its own, the file the same size
    session.write_bytes(b"".join(lines))
    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "[fail] transcript_chain: 1 session file(s) changed in place" in out and "s1.jsonl" in out

    assert run(capsys, home, "reindex", "--quiet")[0] == 0  # reviewed: the chain starts again from the file as it is
    with open_home(home) as s:
        assert s.health().check("transcript_chain").status is HealthStatus.OK


def test_a_second_line_with_an_existing_id_and_other_content_is_seen_by_health(home, capsys):
    session = home / "sessions" / "s1.jsonl"
    with open(session, "ab") as handle:
        handle.write(encode_entry(make_entry("s1", 2, "Clara never moved anywhere.")))
    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "entry id 's1:2' is recorded twice with different content" in out
    with open_home(home) as s:
        assert s.health().check("transcript").data["conflicting_ids"]


# ---- case 11: a folder named like a memory file; a read-only store -----------------------------------------
def test_a_folder_named_like_a_memory_file_is_reported_and_wipes_nothing(home, capsys):
    with open_home(home) as s:
        s.memory.write(fact("rule"), "Never force-push to main.")
        s.ingest()
        chunks = s.index.catalog_.stats()["chunks"]
    (home / "memory" / "notes.md").mkdir()
    code, _, err = run(capsys, home, "ingest", "--quiet")
    assert code == 1 and "notes.md" in err and "a folder named like a memory file" in err
    code, out, _ = run(capsys, home, "health")
    assert code == 1 and "memory_files: 1 loaded, 1 failed to load" in out
    assert run(capsys, home, "recall", "force-push")[0] == 0
    assert run(capsys, home, "reindex", "--quiet")[0] == 0
    with open_home(home) as s:
        assert s.index.catalog_.stats()["chunks"] == chunks
    assert any("force-push" in text for text in search_texts(home, "force-push to main"))


def test_a_read_only_store_is_searched_and_recalled_and_writes_fail_in_one_line(home):
    with open_home(home) as s:
        s.recall("pottery teacher")  # a store that has recalled before: its logs exist, read-only like the rest
    paths = [home, *home.rglob("*")]
    before = files_of(home)
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        results = {}
        recall = ["recall", "Ana's pottery class teacher is Clara.", "--floor-mode", "absolute", "--floor", "0.2"]
        for argv in (["search", "Clara visa", "--json"], recall, ["ingest", "--quiet"]):
            results[argv[0]] = subprocess.run(
                _as_unprivileged([sys.executable, "-c", READ_ONLY_CHILD, str(home), *argv]),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
            )
        for argv in (["reindex", "--quiet"], ["health", "--acknowledge"]):
            results[argv[-1]] = subprocess.run(
                _as_unprivileged([sys.executable, "-c", READ_ONLY_CHILD, str(home), *argv]),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert all("Traceback" not in r.stderr for r in results.values()), {k: r.stderr for k, r in results.items()}
        assert results["search"].returncode == 0 and json.loads(results["search"].stdout)["hits"]
        assert results["recall"].returncode == 0 and "Clara" in results["recall"].stdout
        for name in ("ingest", "--quiet", "--acknowledge"):
            assert results[name].returncode == 2, (name, results[name].stderr)
            one_error_line(results[name].stderr)
        assert files_of(home) == before
    finally:
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)


# ---- case 13: reading commands create nothing; memory files have a size bound ---------------------------------
def test_reading_commands_create_nothing_in_a_folder_that_holds_only_sessions(tmp_path, home, capsys):
    bare = tmp_path / "bare"
    (bare / "sessions").mkdir(parents=True)
    (bare / "sessions" / "s1.jsonl").write_bytes((home / "sessions" / "s1.jsonl").read_bytes())
    before = files_of(bare)
    for argv in (("search", "pottery"), ("recall", "pottery"), ("health",), ("health", "--json"), ("calibrate-floor",)):
        code, out, _ = run(capsys, bare, *argv)
        assert code in (0, 1) and files_of(bare) == before, argv
    code, out, _ = run(capsys, bare, "health")
    assert "5 transcript entr(y/ies) await ingest" in out


def test_a_memory_file_over_the_size_bound_is_reported_not_indexed(home, capsys):
    (home / "memory").mkdir()
    big = home / "memory" / "big.md"
    big.write_text(render_memory(fact("big"), "The quarry opens at dawn. " * (MAX_MEMORY_FILE_BYTES // 20)))
    code, _, err = run(capsys, home, "ingest", "--quiet")
    assert code == 1 and "big.md" in err and f"over the bound of {MAX_MEMORY_FILE_BYTES:,} bytes" in err
    with open_home(home) as s:
        check = s.health().check("memory_files")
        assert check.status is HealthStatus.FAIL and "MAX_MEMORY_FILE_BYTES" in check.data["failed"][0]
        assert not any(h.pointer.memory_id for h in s.search("quarry opens at dawn", k=5))
    assert os.path.getsize(big) > MAX_MEMORY_FILE_BYTES
