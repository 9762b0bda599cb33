"""A store's texts are scanned for credentials once, when written, and shown as stored only to a reader whose
detector vouched for every one of them (``lca.index.redaction``); any other reader redacts each hit again."""

from __future__ import annotations

import pytest

from lca.index import redaction
from lca.secrets import detector_fingerprint, holds_redaction, redacted
from lca.substrate import Substrate
from lca.types import Chunk, text_digest
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.test_secrets import CASES, STRIPE

TURNS = ["The batch job runs on Fridays after the deploy.", f"deploy with the stripe key {STRIPE} tonight"]


def planted(chunk: Chunk, text: str) -> Chunk:
    """The chunk with ``text`` as its stored text: what a writer that skipped the chunker's redaction adds."""
    return Chunk(chunk.chunk_id + "-raw", text, text_digest(text), chunk.pointer, chunk.part, chunk.parts)


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s1", n, text) for n, text in enumerate(TURNS, 1)])
        yield s


@pytest.mark.parametrize(("text", "secret", "kind"), CASES, ids=[c[2] for c in CASES])
def test_redaction_is_idempotent_so_a_vouched_text_needs_no_second_scan(text, secret, kind):
    once = redacted(text)
    assert redacted(once) == once
    assert secret not in once


def test_a_store_written_by_this_detector_is_vouched_for_and_shown_as_stored(store):
    catalog = store.index.catalog_
    assert catalog.get_meta("redacted_with") == detector_fingerprint()
    assert redaction.vouched(catalog)
    hits = store.search("stripe key deploy", k=5)
    assert any(holds_redaction(h.text) for h in hits)
    assert all(STRIPE not in h.text for h in hits)


def test_a_text_that_still_holds_a_credential_makes_the_store_mixed_and_every_read_redacts(store):
    chunk = next(iter(store.index.catalog_.chunks_by_rows([1]).values()))
    store.index.add_chunks([planted(chunk, f"the live key is {STRIPE} for payments")])
    catalog = store.index.catalog_
    assert catalog.get_meta("redacted_with") == redaction.MIXED
    assert not redaction.vouched(catalog)
    for mode in ("hybrid", "dense", "lexical"):
        hits = store.search("live key payments", k=5, mode=mode)
        planted_hit = next(h for h in hits if h.chunk_id.endswith("-raw"))  # the planted text is shown ...
        assert holds_redaction(planted_hit.text) and all(STRIPE not in h.text for h in hits), mode  # ... redacted
    result = store.recall("live key for payments")
    assert any(c.chunk_id.endswith("-raw") for c in result.candidates)
    assert all(STRIPE not in c.text for c in result.candidates)
    assert any("secret or credential" in c.risk_reasons for c in result.candidates)


def test_another_detector_or_a_store_from_before_the_record_is_not_trusted(store, monkeypatch):
    catalog = store.index.catalog_
    catalog.set_meta("redacted_with", "0123456789abcdef")  # written by another version of lca.secrets
    assert not redaction.vouched(catalog)
    store.append([make_entry("s1", 3, "A third turn about the Friday deploy window.")])
    assert catalog.get_meta("redacted_with") == redaction.MIXED  # one detector no longer vouches for all
    catalog.db.execute("DELETE FROM meta WHERE key='redacted_with'")  # a store from before the record
    store.append([make_entry("s1", 4, "A fourth turn, on the rollback plan.")])
    assert catalog.get_meta("redacted_with") == redaction.MIXED
    monkeypatch.setattr(redaction, "detector_fingerprint", lambda: None)  # the source could not be read
    assert not redaction.vouched(catalog)


def test_health_says_whether_hits_are_shown_as_stored_and_a_reindex_makes_a_mixed_store_vouched_again(store):
    def check(s):
        return next(c for c in s.health().checks if c.name == "redaction")

    assert check(store).data["state"] == "vouched" and check(store).status.value == "ok"
    store.index.catalog_.set_meta("redacted_with", "0123456789abcdef")  # written by another version of lca.secrets
    assert check(store).data["state"] == "other detector"
    assert "redacted again when read" in check(store).detail and "lca reindex" in check(store).detail
    store.index.catalog_.set_meta("redacted_with", redaction.MIXED)
    assert check(store).data["state"] == redaction.MIXED
    store.reindex()
    assert check(store).data["state"] == "vouched"
