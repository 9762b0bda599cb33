"""The store layout: every path of an agent home named once, and the modules that use it agree."""

from __future__ import annotations

from pathlib import Path

from lca.activation import RetrievalLog
from lca.experience import ExperienceLog
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.transcript import TranscriptStore


def test_paths_are_named_under_the_root(tmp_path):
    layout = StoreLayout(str(tmp_path))
    assert layout.root == tmp_path
    expected = {
        "sessions": "sessions",
        "quarantine": "quarantine",
        "quarantine_log": "quarantine/log.jsonl",
        "memory": "memory",
        "identity": "identity",
        "events": "events",
        "ledger": "events/ledger.jsonl",
        "experience_log": "events/experience.jsonl",
        "retrieval_log": "events/retrievals.jsonl",
        "proposals": "proposals",
        "consolidation": "consolidation",
        "archive": "archive",
        "recall_settings": "recall.yaml",
        "write_lock": "write.lock",
        "logs": "logs",
        "recall_log": "logs/recall.jsonl",
        "prune_log": "logs/prune.jsonl",
        "index": "index",
        "catalog": "index/catalog.sqlite",
        "vectors": "index/vectors.faiss",
        "lexical": "index/lexical",
    }
    assert {name: getattr(layout, name).relative_to(tmp_path).as_posix() for name in expected} == expected
    assert layout.memory_file("m1") == tmp_path / "memory" / "m1.md"
    assert layout.identity_file("user") == tmp_path / "identity" / "user.md"
    assert layout.proposal("p1") == tmp_path / "proposals" / "p1.json"
    assert layout.cycle_report("c1") == tmp_path / "consolidation" / "c1.json"
    assert layout.memory_archive("m1") == tmp_path / "archive" / "memory" / "m1"
    assert layout.identity_archive("user") == tmp_path / "archive" / "identity" / "user"
    assert layout.quarantine_file("x.bin") == tmp_path / "quarantine" / "x.bin"
    assert not any(tmp_path.iterdir())  # naming a path creates nothing


def test_any_session_id_is_one_file_name_and_round_trips():
    layout = StoreLayout(Path("/store"))
    for session_id in ("plain", "with/slash", "spaces and ünïcode", "..", "a%2Fb"):
        path = layout.session_file(session_id)
        assert path.parent == layout.sessions and path.suffix == ".jsonl"
        assert StoreLayout.session_id_of(path) == session_id


def test_holds_store_sees_any_authoritative_or_derived_part(tmp_path):
    layout = StoreLayout(tmp_path)
    assert not layout.holds_store()
    (tmp_path / "recall.yaml").write_text("floor: 0.1\n")  # settings alone are not a store
    assert not layout.holds_store()
    for part in ("sessions", "memory", "index", "events"):
        (tmp_path / part).mkdir()
        assert layout.holds_store()
        (tmp_path / part).rmdir()


def test_the_stores_use_the_layout(tmp_path):
    layout = StoreLayout(tmp_path)
    transcript = TranscriptStore(tmp_path)
    assert transcript.session_path("s/1") == layout.session_file("s/1")
    assert transcript.quarantine_dir == layout.quarantine
    assert MemoryStore(tmp_path).path_for("m1") == layout.memory_file("m1")
    assert Ledger(tmp_path).path == layout.ledger
    assert ExperienceLog(tmp_path).path == layout.experience_log
    assert RetrievalLog(tmp_path).path == layout.retrieval_log
