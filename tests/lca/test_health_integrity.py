"""Issue 16, integrity and health: the store reports its own state truthfully, and a damaged derived file
is one clear line naming it (``derived store damaged: ... run `lca reindex```), never a traceback.

Every bad file here is made by the test. The commands run in-process through ``protocols.cli.main`` with
the fake embedder (``common.open_store`` replaced), so exit codes and messages are the shell's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import protocols.cli as cli
import protocols.cli.common as cli_common
from lca.errors import RecordFormatError
from lca.index.chunker import Chunker, entry_chunks
from lca.substrate import Substrate
from lca.transcript import encode_entry
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.conftest import make_fact as fact
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
LINES = [
    "Ana's pottery class teacher is Clara.",
    "Clara moved to Lisbon for a visa.",
    "Ana sprained her wrist climbing.",
    "They ate custard tarts in Belem.",
    "The cat is called Pebble.",
]


def open_home(home: Path) -> Substrate:
    return Substrate(home, embedder=FakeHashingEmbedder())


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A store with five indexed turns; the CLI opens it with the fake embedder."""
    home = tmp_path / "home"
    monkeypatch.setattr(cli_common, "open_store", lambda args, progress=False: open_home(home))
    with open_home(home) as s:
        s.append([make_entry("s1", n, text) for n, text in enumerate(LINES, start=1)])
    return home


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def health(home: Path):
    with open_home(home) as s:
        return s.health()


def search_ids(home: Path, query: str) -> list[str]:
    with open_home(home) as s:
        return [h.chunk_id for h in s.search(query, k=5)]


def chunk_count(home: Path) -> int:
    with open_home(home) as s:
        return s.index.catalog_.stats()["chunks"]


# ---- memory files -----------------------------------------------------------------------------
def test_a_duplicate_memory_id_is_refused_at_ingest_and_health_names_the_duplicate(home, capsys):
    with open_home(home) as s:
        s.memory.write(fact("rule"), "Never force-push to main.")
        s.ingest()
    before = chunk_count(home)
    # sorts before rule.md: alphabetical order used to let it displace the original
    intruder = home / "memory" / "aaa-copy.md"
    intruder.write_text((home / "memory" / "rule.md").read_text().replace("Never force-push", "Always force-push"))

    code, out, err = run(capsys, "ingest", "--quiet")
    assert code == 1
    assert "aaa-copy.md" in err and "duplicate id 'rule'" in err and "rule.md holds it" in err
    assert chunk_count(home) == before
    with open_home(home) as s:
        (hit,) = s.search("force-push to main", k=1)
        assert hit.pointer.memory_id == "rule" and "Never force-push" in hit.text
        check = s.health().check("memory_files")
    assert check.status is HealthStatus.FAIL and len(check.data["failed"]) == 1
    assert "aaa-copy.md" in check.data["failed"][0] and "field 'id'" in check.data["failed"][0]


def test_ingest_says_so_and_exits_1_when_a_memory_file_fails_to_load(home, capsys):
    broken = home / "memory" / "broken.md"
    broken.parent.mkdir()
    broken.write_text("---\nid: broken\ntype: fact\n---\nno created, authority or privacy\n")
    code, out, err = run(capsys, "ingest", "--quiet")
    assert code == 1 and "not indexed" in err and "broken.md" in err and "field 'created'" in err
    with open_home(home) as s:
        report = s.ingest()
    assert len(report.problems) == 1 and "broken.md" in report.problems[0]
    assert report.to_dict()["problems"] == report.problems
    broken.unlink()
    assert run(capsys, "ingest", "--quiet")[0] == 0


# ---- the transcript, as health reads it ----------------------------------------------------------
def test_health_fails_on_a_torn_tail_no_writer_has_quarantined_yet(home, capsys):
    session = home / "sessions" / "s1.jsonl"
    with open(session, "ab") as handle:
        handle.write(b'{"v":1,"id":"s1:6","cont')
    code, out, _ = run(capsys, "health")
    assert code == 1 and "unfinished line" in out and "s1.jsonl" in out
    assert health(home).check("transcript").data["torn_tails"] == {"s1.jsonl": len(b'{"v":1,"id":"s1:6","cont')}

    assert run(capsys, "ingest", "--quiet")[0] == 0  # the writer quarantines it
    report = health(home)
    assert report.healthy and report.check("transcript").data["torn_tails"] == {}
    assert report.check("quarantine").status is HealthStatus.WARN and report.check("quarantine").data["torn_tails"] == 1


def test_entries_indexed_past_their_watermark_are_pending_not_missing_from_the_transcript(home):
    """A kill between the catalog's commit and the watermark's: the chunks are in, the watermark is not."""
    with open_home(home) as s:
        s.append([make_entry("s2", 1, "Ben injured his knee skiing.")], index=False)
        (entry,) = s.transcript.read("s2").entries
        s.index.add_chunks(entry_chunks(entry, Chunker(s.embedder)))
        s.index.flush()
        check = s.health().check("consistency")
    assert check.status is HealthStatus.WARN and check.data["catalog_entries_not_in_transcript"] == []
    assert "not in the transcript" not in check.detail and check.data["entries_pending"] == 1
    with open_home(home) as s:
        assert s.ingest().index.duplicate_chunks == 1
        assert s.health().healthy


def test_a_line_inserted_below_the_watermark_is_an_edit_not_a_phantom_torn_tail(home, capsys):
    session = home / "sessions" / "s1.jsonl"
    mark = session.stat().st_size
    lines = session.read_bytes().splitlines(keepends=True)
    inserted = encode_entry(make_entry("s1", 9, "Clara's visa came through in May."))
    session.write_bytes(lines[0] + inserted + b"".join(lines[1:]))
    assert session.read_bytes()[mark - 1 : mark] != b"\n"  # the watermark now falls inside a line

    code, out, _ = run(capsys, "health")
    assert code == 1 and "changed below its index watermark" in out and "lca reindex" in out
    report = health(home)
    assert report.check("quarantine").data["records"] == 0  # no half line quarantined as torn
    assert report.check("transcript").data["torn_tails"] == {}

    code, _, err = run(capsys, "ingest", "--quiet")
    assert code == 1 and "s1.jsonl" in err and "lca reindex" in err
    assert run(capsys, "reindex", "--quiet")[0] == 0
    report = health(home)
    assert report.healthy and report.check("quarantine").data["records"] == 0
    assert any("visa came through" in text for text in _texts(home, "visa came through May"))


def _texts(home: Path, query: str) -> list[str]:
    with open_home(home) as s:
        return [h.text for h in s.search(query, k=3)]


def test_a_malformed_line_is_acknowledged_once_reviewed_and_its_bytes_stay(home, capsys):
    session = home / "sessions" / "s1.jsonl"
    with open(session, "ab") as handle:
        handle.write(b"{not json at all\n")
    with open_home(home) as s:
        s.append([make_entry("s1", 6, "A later turn.")])
    code, out, _ = run(capsys, "health")
    assert code == 1 and "malformed line" in out and "--acknowledge" in out

    code, out, _ = run(capsys, "health", "--acknowledge")
    assert code == 0 and "acknowledged" in out
    report = health(home)
    assert report.healthy and report.check("quarantine").status is HealthStatus.OK
    (record,) = [json.loads(line) for line in (home / "quarantine" / "log.jsonl").read_text().splitlines()]
    assert (home / "quarantine" / record["quarantine_file"]).read_bytes() == b"{not json at all\n"

    with open(session, "ab") as handle:  # a new one is not covered by the old acknowledgement
        handle.write(b"{also not json\n")
    assert run(capsys, "health")[0] == 1


def test_a_broken_recall_settings_file_is_reported_by_health_and_refused_by_recall(home, capsys):
    (home / "recall.yaml").write_text("weights: [unclosed\n")
    code, out, _ = run(capsys, "health")
    assert code == 1 and "settings" in out and "recall.yaml" in out
    assert run(capsys, "search", "pottery teacher")[0] == 0  # search does not read it
    assert run(capsys, "recall", "pottery teacher")[0] == 0  # nor `lca recall` (its settings are its flags)
    with open_home(home) as s:  # what does read it refuses, naming the file in one line
        for use in (lambda: s.recall("pottery teacher"), lambda: s.save_recall_setting("floor", 0.3)):
            with pytest.raises(RecordFormatError) as refused:
                use()
            assert "recall.yaml" in str(refused.value) and "\n" not in str(refused.value)
    assert (home / "recall.yaml").read_text() == "weights: [unclosed\n"


# ---- damaged derived files ---------------------------------------------------------------------------
def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not what the index wrote\n" * 64)


def _corrupt_pages(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)  # the header survives, every later page is garbage
    path.write_bytes(bytes(data))


DAMAGE = {
    "catalog-not-a-database": ("catalog.sqlite", lambda index: _garbage(index / "catalog.sqlite")),
    "catalog-corrupt-pages": ("catalog.sqlite", lambda index: _corrupt_pages(index / "catalog.sqlite")),
    "faiss": ("vectors.faiss", lambda index: _garbage(index / "vectors.faiss")),
    "faiss-truncated": (
        "vectors.faiss",
        lambda index: (index / "vectors.faiss").write_bytes((index / "vectors.faiss").read_bytes()[:100]),
    ),
    "bm25-manifest": ("manifest.json", lambda index: _garbage(index / "lexical" / "manifest.json")),
    "bm25-manifest-torn": ("manifest.json", lambda index: _truncate(index / "lexical" / "manifest.json")),
    "bm25-manifest-wrong-count": (".npz", lambda index: _miscount(index / "lexical" / "manifest.json")),
    "bm25-segment": (".npz", lambda index: _garbage(_segment(index, ".npz"))),
    "bm25-segment-torn": (".npz", lambda index: _truncate(_segment(index, ".npz"))),
    "bm25-segment-flipped-byte": (".npz", lambda index: _flip(_segment(index, ".npz"))),
    "bm25-segment-missing": (".npz", lambda index: _segment(index, ".npz").unlink()),
    "bm25-vocabulary": (".vocab.json", lambda index: _garbage(_segment(index, ".vocab.json"))),
}


def _segment(index: Path, suffix: str) -> Path:
    return next((index / "lexical").glob(f"seg-*{suffix}"))


def _truncate(path: Path) -> None:
    """What a write torn by a crash leaves (a save renames whole files into place, so only the disk does this)."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A  # the zip's CRC of the array (or its header) the byte is in no longer matches
    path.write_bytes(bytes(data))


def _miscount(manifest: Path) -> None:
    record = json.loads(manifest.read_text())
    record["segments"][0]["documents"] += 1
    manifest.write_text(json.dumps(record))


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_derived_file_is_named_and_reindex_repairs_it(home, capsys, case):
    name, damage = DAMAGE[case]
    before = search_ids(home, "Clara visa Lisbon")
    assert before and health(home).healthy
    for leftover in (home / "index").glob("catalog.sqlite-*"):  # closed cleanly: nothing is pending in them
        leftover.unlink()
    damage(home / "index")

    for argv in (("search", "Clara visa Lisbon"), ("ingest", "--quiet")):
        code, out, err = run(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert err.startswith("lca: error: derived store damaged: ") and name in err and "`lca reindex`" in err
        assert err.count("\n") == 1
    code, out, _ = run(capsys, "health")
    assert code == 1 and "derived_store" in out and "derived store damaged" in out and name in out
    assert "[fail] transcript" not in out  # the other checks still ran, and passed

    code, out, _ = run(capsys, "reindex", "--quiet")
    assert code == 0 and "rebuilt 5 chunks" in out
    assert health(home).healthy
    assert search_ids(home, "Clara visa Lisbon") == before


def test_a_garbage_quarantine_log_is_reported_line_by_line_and_stops_nothing(home, capsys):
    log = home / "quarantine" / "log.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"\x00\x01 garbage\n[1, 2]\n")
    code, out, _ = run(capsys, "health")
    assert code == 1 and "quarantine" in out and "log.jsonl, line 1" in out
    assert run(capsys, "search", "Clara")[0] == 0
    assert run(capsys, "ingest", "--quiet")[0] == 0
    assert run(capsys, "health", "--acknowledge")[0] == 0
    assert log.read_bytes() == b"\x00\x01 garbage\n[1, 2]\n"  # reviewed, kept as it was


# ---- a read-only store --------------------------------------------------------------------------------
READ_ONLY_CHILD = """
import sys
import protocols.cli as cli
import protocols.cli.common as common
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder
common.open_store = lambda args, progress=False: Substrate(sys.argv[1], embedder=FakeHashingEmbedder())
sys.exit(cli.main(sys.argv[2:]))
"""


def _as_unprivileged(argv: list[str]) -> list[str]:
    """Root ignores file modes: drop the capabilities that let it, so a chmod means what it says."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, "--inh-caps", caps, "--bounding-set", caps, "--", *argv]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_a_read_only_store_can_be_searched_and_checked(home):
    before = search_ids(home, "Clara visa Lisbon")
    paths = [home, *home.rglob("*")]
    snapshot = _snapshot(home)
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        for argv in (["search", "Clara visa Lisbon", "--json"], ["health"]):
            result = subprocess.run(
                _as_unprivileged([sys.executable, "-c", READ_ONLY_CHILD, str(home), *argv]),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
            assert "Traceback" not in result.stderr
            if argv[0] == "search":
                assert [h["chunk_id"] for h in json.loads(result.stdout)["hits"]] == before
            else:
                assert "healthy" in result.stdout
        assert _snapshot(home) == snapshot
    finally:
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)


# ---- files left by interrupted saves --------------------------------------------------------------------
def test_faiss_temporaries_of_dead_processes_are_counted_and_removed_by_the_next_save(home, capsys):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = home / "index" / f".vectors.faiss.tmp-{child.pid}"
    live = home / "index" / f".vectors.faiss.tmp-{os.getpid()}"
    dead.write_bytes(b"half a faiss file")
    check = health(home).check("interrupted_saves")
    assert check.status is HealthStatus.WARN and check.data["files"] == [str(dead)]
    code, out, _ = run(capsys, "health")
    assert code == 0 and dead.name in out  # a warning: the store is sound

    live.write_bytes(b"a save in progress")
    assert run(capsys, "ingest", "--quiet")[0] == 0
    assert not dead.exists() and live.exists()
    live.unlink()
    assert health(home).check("interrupted_saves").status is HealthStatus.OK
