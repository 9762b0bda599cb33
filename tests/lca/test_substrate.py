"""lca.substrate: the facade composes the stores (append, ingest, search, recall, health, checkpoint)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import lca.substrate as substrate_module
from lca.errors import RecordFormatError
from lca.health import store_health
from lca.importers import ImportedSession
from lca.recall import RecallConfig, RecallContext
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.conftest import make_fact as fact
from tests.fakes import FakeHashingEmbedder

LINES = [
    "Ana's pottery class teacher is Clara.",
    "Clara moved to Lisbon for a visa.",
    "Ana sprained her wrist.",
    "They ate custard tarts in Belem.",
    "The cat is called Pebble.",
]


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        yield s


def test_reindex_deletes_the_derived_index_and_restores_the_same_results(store):
    store.append([make_entry("s1", n, text) for n, text in enumerate(LINES, 1)])
    store.memory.write(fact("pets"), "Ana's cat Pebble is grey and sleeps all day.")
    store.ingest()
    queries = ["pottery teacher", "Lisbon visa", "grey cat Pebble", "custard tarts"]
    before = {q: [(h.chunk_id, h.score) for h in store.search(q, k=4)] for q in queries}
    marker = store.layout.index / "left-over"
    marker.write_text("derived state that a rebuild must not keep")
    report = store.reindex()
    assert not marker.exists()
    assert report.entries_indexed == len(LINES) and report.memory_files_indexed == 1
    after = {q: [(h.chunk_id, h.score) for h in store.search(q, k=4)] for q in queries}
    for q in queries:
        assert [c for c, _ in after[q]] == [c for c, _ in before[q]] and after[q]
        assert np.allclose([x for _, x in after[q]], [x for _, x in before[q]], atol=1e-6)
    assert store.health().healthy


def test_append_without_indexing_leaves_entries_for_the_next_ingest(store):
    result = store.append([make_entry("s1", 1, LINES[0])], index=False)
    assert [e.id for e in result.appended] == ["s1:1"] and store.search("pottery", k=1) == []
    assert store.health().check("consistency").data["entries_pending"] == 1
    assert store.ingest().entries_indexed == 1
    assert store.search("pottery", k=1)[0].pointer.entry_id == "s1:1"


def test_importing_the_same_sessions_twice_appends_nothing_twice(store):
    sessions = [ImportedSession("s1", tuple(make_entry("s1", n, t) for n, t in enumerate(LINES, 1)))]
    first = store.import_sessions(sessions)
    again = store.import_sessions(sessions)
    assert (first.entries_appended, first.entries_duplicate, first.entries_indexed) == (5, 0, 5)
    assert (again.entries_appended, again.entries_duplicate, again.entries_indexed) == (0, 5, 0)


def test_a_saved_recall_setting_is_validated_first_and_read_by_the_next_facade(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.save_recall_setting("floor", 0.3)
        assert s.recall_config.floor == 0.3
        written = s.layout.recall_settings.read_text()
        with pytest.raises(RecordFormatError):
            s.save_recall_setting("policy", "no-such-policy")
        assert s.layout.recall_settings.read_text() == written and s.recall_config.floor == 0.3
    assert yaml.safe_load(written) == {"floor": 0.3}
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as again:
        assert again.recall_config.floor == 0.3


def test_memory_files_see_api_writes_at_once_and_hand_edits_after_a_rescan(store, monkeypatch):
    assert store.memory_files() == {}
    written = store.memory.write(fact("tea"), "Ana prefers tea.")
    assert store.memory_files()["tea"].body.strip() == "Ana prefers tea."
    written.path.write_text(written.path.read_text().replace("Ana prefers tea.", "Ana prefers green tea, hot."))
    monkeypatch.setattr(substrate_module, "MEMORY_RESCAN_SECONDS", 0.0)
    assert store.memory_files()["tea"].body.strip() == "Ana prefers green tea, hot."


def test_token_counts_come_from_the_host_when_given(tmp_path):
    embedder = FakeHashingEmbedder()
    with Substrate(tmp_path, embedder=embedder) as s:
        assert s.count_tokens("one two three") == max(0, embedder.count_tokens(["one two three"])[0] - 2)
        assert s.count_tokens("") == 0
    with Substrate(tmp_path, embedder=embedder, token_counter=lambda text: 7 * len(text.split())) as s:
        assert s.count_tokens("one two three") == 21


def test_health_is_composed_from_the_facades_own_stores(store):
    store.append([make_entry("s1", 1, LINES[0])])
    composed = store_health(
        layout=store.layout,
        transcript=store.transcript,
        memory=store.memory,
        index=store.index,
        embedder=store.embedder,
        ledger=store.ledger,
        count_tokens=store.count_tokens,
        critical_budget=store.critical_budget,
        events=store.events,
    )
    report = store.health()
    assert [(c.name, c.status, c.detail) for c in report.checks] == [
        (c.name, c.status, c.detail) for c in composed.checks
    ]
    assert report.store == str(store.home)


def test_a_cycle_is_handed_the_facades_stores_and_sees_a_wrapped_recall(store, monkeypatch):
    stores = store.cycle_stores()
    assert (stores.transcript, stores.memory, stores.index, stores.ledger) == (
        store.transcript,
        store.memory,
        store.index,
        store.ledger,
    )
    assert stores.layout == store.layout and stores.recall_config is store.recall_config
    calls = []
    real = store.recall

    def counted(context, *, config=None):
        calls.append(config)
        return real(context, config=config)

    monkeypatch.setattr(store, "recall", counted)  # wrapped after the stores were handed over
    config = RecallConfig(floor=0.01)
    stores.recall(RecallContext(query="tea"), config)
    assert calls == [config]
    stores.append([make_entry("s9", 1, "appended by a cycle")])
    assert store.search("appended cycle", k=1) == []  # a cycle's appends are not indexed until its ingest
    assert stores.ingest().entries_indexed == 1
