"""The lexical index inside a store: an ingest adds a segment and rewrites nothing saved, chunks a memory rewrite or a
forget removes leave the scores of a rebuild, a save a kill stops leaves the last index whole (the new chunks are
appended again, the files it left are counted and removed), and an index over another catalog is rebuilt."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lca.forget import ForgetRequest
from lca.importers import import_locomo
from lca.index.lexical import Bm25LexicalIndex
from lca.index.lexical_files import MANIFEST
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.index.stores import FIXTURE, REPO, memory

TOPICS = (
    "Clara booked pottery classes with a new teacher near the harbour",
    "the visa appointment in Lisbon moved to Friday morning",
    "Ana sprained her wrist surfing at Ericeira last summer",
    "we baked custard tarts and sourdough for the bakery stall",
    "my weekly running goal is forty kilometres now",
    "the deploy needs two approvals and goes through staging first",
    "piano scales before the recital, then the budget for the flat",
)
QUERIES = (
    "pottery teacher",
    "Lisbon visa Friday",
    "sprained wrist surfing",
    "custard tarts bakery",
    "running goal kilometres",
    "deploy approvals staging",
    "piano recital budget",
    "harbour",
    "tarts tarts tarts",
    "zeppelin",
)


def session(name: str, turns: int = 20, seed: int = 0) -> list:
    rng = random.Random(f"{name}-{seed}")
    return [
        make_entry(name, n, f"{rng.choice(TOPICS)}; {rng.choice(TOPICS).split()[-1]} {name}{n % 3}")
        for n in range(turns)
    ]


def as_rebuilt(s: Substrate) -> None:
    """The store's lexical index scores every query as one built from scratch over the catalog's chunks."""
    index = s.index.lexical
    rebuild = Bm25LexicalIndex()
    rebuild.build(*s.index.catalog_.lexical_corpus(), "rebuilt")
    assert index.rows_.tolist() == rebuild.rows_.tolist()
    for query in QUERIES:
        assert np.array_equal(index.all_scores(query), rebuild.all_scores(query)), query


def files(store: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (store / "index" / "lexical").iterdir()}


def test_an_ingest_adds_one_segment_and_rewrites_nothing_saved(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([entry for number in range(12) for entry in session(f"s{number}")])
        as_rebuilt(s)
        before = files(tmp_path)
        s.append(session("late", turns=20))
        after = files(tmp_path)
        as_rebuilt(s)
        hits = s.search("pottery teacher", k=3, mode="lexical")
    kept = {name: t for name, t in before.items() if name != MANIFEST}
    assert {name: after.get(name) for name in kept} == kept  # every saved segment is still there, untouched
    new = sorted(set(after) - set(before))
    assert len(new) == 2 and new[0].endswith(".npz") and new[1].endswith(".vocab.json")
    assert hits and all(h.lexical_score for h in hits)


def test_chunks_a_memory_rewrite_or_a_forget_removes_score_as_a_rebuild(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        for number in range(6):
            s.append(session(f"s{number}"))
            s.memory.write(memory(f"m{number}"), f"Ana keeps the rota for pottery classes, note {number}.")
            s.ingest()
        s.memory.write(memory("m2"), "The rota moved to the harbour bakery.")  # its old chunk goes, a new comes
        s.memory.path_for("m4").unlink()
        s.ingest()
        as_rebuilt(s)
        saved = Bm25LexicalIndex.load(s.layout.lexical)
        assert any(alive is not None for alive in saved.segments_.alive)  # removed as dead documents, not rebuilt
        assert len(saved) == s.index.catalog_.chunk_count()
        s.forget(ForgetRequest(matching="Ericeira"), by="ana", why="asked")
        as_rebuilt(s)
        vocabulary = "".join(p.read_text() for p in s.layout.lexical.glob("*.vocab.json"))
        assert "ericeira" not in vocabulary.lower()  # a forget rebuilds: no forgotten word is kept
        assert s.health().healthy


def kill_child(store: Path, step: str) -> None:
    child = subprocess.run(
        [sys.executable, str(REPO / "tests" / "helpers" / "lexical_kill_child.py"), str(store), step],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 9, child.stderr


@pytest.mark.parametrize("step", ["before-manifest", "before-cleanup"])
def test_a_save_a_kill_stops_leaves_an_index_that_is_whole_then_caught_up(tmp_path, step):
    sessions, report = import_locomo(FIXTURE)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([entry for number in range(10) for entry in session(f"s{number}")])  # the first segment
        s.import_sessions(sessions[:-1], report)  # a small one: the child's session is merged with it
        committed = json.loads((s.layout.lexical / MANIFEST).read_text())
    kill_child(tmp_path, step)
    manifest = json.loads((tmp_path / "index" / "lexical" / MANIFEST).read_text())
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        if step == "before-manifest":
            assert manifest == committed  # the new segment was written, the manifest that names it was not
        else:
            assert manifest != committed
        left = s.health().check("interrupted_saves")
        assert left.status is HealthStatus.WARN and any("seg-" in f for f in left.data["files"])
        as_rebuilt(s)  # a reader catches the stale index up (or reads the committed one) in memory
        s.ingest()  # a writer saves it and removes what the killed save left
        assert s.health().check("interrupted_saves").status is HealthStatus.OK
        assert s.health().healthy
        as_rebuilt(s)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        assert s.index.lexical.generation_ == s.index.catalog_.get_meta("chunks_generation")
        as_rebuilt(s)


def test_an_index_over_another_catalog_is_rebuilt_not_appended_to(tmp_path):
    with Substrate(tmp_path / "one", embedder=FakeHashingEmbedder()) as s:
        for number in range(3):
            s.append(session(f"s{number}", seed=1))
    with Substrate(tmp_path / "two", embedder=FakeHashingEmbedder()) as s:
        for number in range(4):
            s.append(session(f"s{number}", seed=2))  # the same rows, other texts
    shutil.rmtree(tmp_path / "two" / "index" / "lexical")
    shutil.copytree(tmp_path / "one" / "index" / "lexical", tmp_path / "two" / "index" / "lexical")
    with Substrate(tmp_path / "two", embedder=FakeHashingEmbedder()) as s:
        as_rebuilt(s)
        assert len(s.index.lexical.segments_.segments) == 1  # built whole, none of the other store's kept


@pytest.mark.parametrize("older", ["one bm25s index", "segments of wider arrays"])
def test_an_older_formats_index_is_stale_then_rebuilt_and_its_files_removed(tmp_path, older):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(session("s0"))
    lexical = tmp_path / "index" / "lexical"
    shutil.rmtree(lexical)
    if older == "one bm25s index":  # what the format before segments saved
        (lexical / "bm25").mkdir(parents=True)
        (lexical / "generation.json").write_text(json.dumps({"generation": "old", "k1": 1.5, "b": 0.75}))
        (lexical / "rows.npy").write_bytes(b"rows")
    else:  # the first segments' manifest (format 2: int64 postings), whose files this code does not read
        lexical.mkdir(parents=True)
        (lexical / MANIFEST).write_text(json.dumps({"format": 2, "generation": "old", "segments": []}))
        (lexical / "seg-0.npz").write_bytes(b"int64 postings")
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        consistency = s.health().check("consistency")
        assert consistency.status is HealthStatus.FAIL and "(stale)" in consistency.detail
        as_rebuilt(s)
        s.ingest()
        assert s.health().healthy
    assert sorted(p.suffix for p in lexical.iterdir()) == [".json", ".json", ".npz"]  # manifest, vocabulary, arrays


def test_a_store_grown_session_by_session_ranks_as_a_reindexed_one(tmp_path):
    """LoCoMo's ranking (its retrieval.yaml: window BM25, phrases, lexical feedback read the index's term ids)
    over a store ingested one session at a time, against the same store rebuilt."""
    config = RetrievalConfig.from_file(REPO / "protocols" / "evals" / "locomo" / "retrieval.yaml")
    sessions, report = import_locomo(FIXTURE)
    asked = [q["question"] for q in json.loads(FIXTURE.read_text())[0]["qa"]] + list(QUERIES)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), retrieval=config) as s:
        s.import_sessions(sessions[:1], report)
        for number in range(5):
            s.append(session(f"s{number}"))
        s.import_sessions(sessions[1:], report)
        assert len(s.index.lexical.segments_.segments) > 1
        grown = {q: [(h.chunk_id, h.score) for h in s.search(q, k=10)] for q in asked}
        s.reindex()
        assert len(s.index.lexical.segments_.segments) == 1
        again = {q: [(h.chunk_id, h.score) for h in s.search(q, k=10)] for q in asked}
    assert grown == again
