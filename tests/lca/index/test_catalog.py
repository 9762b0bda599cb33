"""The SQLite catalog: one text, one vector; each vector's embedder recorded; an old schema refused."""

from __future__ import annotations

import pytest

from lca.errors import EmbedderMismatchError
from lca.substrate import Substrate
from lca.types import HealthStatus
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.index.stores import fixture_store


def test_identical_texts_share_one_vector_and_count_as_duplicates(tmp_path):
    embedder = FakeHashingEmbedder()
    with Substrate(tmp_path, embedder=embedder) as s:
        s.append([make_entry("a", 1, "ok thanks"), make_entry("b", 1, "ok thanks"), make_entry("c", 1, "other")])
        stats = s.index.catalog_.stats()
        assert stats["chunks"] == 3 and stats["distinct_texts"] == 2 and len(s.index.vectors) == 2
        ratio = s.health().counts["duplicate_ratio"]
        assert ratio == pytest.approx(1 / 3)
        hits = s.search("ok thanks", k=3, mode="dense")
        assert {h.pointer.session_id for h in hits[:2]} == {"a", "b"}


def test_every_vector_records_its_embedder_and_a_mixed_store_is_refused(tmp_path):
    with fixture_store(tmp_path) as s:
        stats = s.index.catalog_.stats()  # the fixture's 16 turns, and their sentences where the store keys them
        assert stats["chunks"] == 16
        assert s.index.catalog_.vectors_by_embedder() == {s.embedder.embedder_id: stats["texts"]}
        catalog = s.index.catalog_
        code = catalog.embedder_code("smuggled-model")
        catalog.db.execute("UPDATE texts SET embedder=? WHERE rowid IN (SELECT rowid FROM texts LIMIT 3)", (code,))
        with pytest.raises(EmbedderMismatchError, match="more than one embedder"):
            s.search("cat")
        assert s.health().check("embedder").status is HealthStatus.FAIL


def test_an_older_catalog_schema_is_refused_and_reindex_rebuilds_it(tmp_path):
    from lca.errors import LCAError

    with fixture_store(tmp_path) as s:
        s.index.catalog_.set_meta("schema_version", "1")
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        with pytest.raises(LCAError, match="schema version 1.*lca reindex"):
            s.search("cat")
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.reindex()
        assert s.index.catalog_.stats()["chunks"] == 16 and s.health().healthy
