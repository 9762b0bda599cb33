"""The recall floor's profile of a store is fitted at ingest and kept in the store (issue 54): a recall after an
ingest reads it and measures nothing, embeds no off-topic question; an ingest that changes the store fits it again,
without embedding those questions again; a store no ingest fitted is measured at its first recall, as before."""

from __future__ import annotations

import weakref

import pytest

import lca.recall.floor as floor
from lca.recall.config import RecallConfig
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

TURNS = (
    "Lucia works night shifts at the Santa Maria hospital in Lisbon.",
    "Her sister Ana moved to Porto to study architecture.",
    "They adopted a grey cat called Pebble last spring.",
    "Lucia is learning to surf at Ericeira on her days off.",
    "The flat's rent goes up in September; they are looking for another.",
)
QUERY = "which hospital does lucia work night shifts at"
CONFIG = RecallConfig(store_topic=False)


class FakeQueryCountingEmbedder(FakeHashingEmbedder):
    def __init__(self, asked: list[str]) -> None:
        super().__init__()
        self.asked = asked

    def embed_query(self, text):
        self.asked.append(text)
        return super().embed_query(text)


def another_process(monkeypatch) -> None:
    """Nothing of the floor cached in memory, as in a process that opens the store afresh."""
    monkeypatch.setattr(floor, "_query_vectors", {})
    monkeypatch.setattr(floor, "_profiles", weakref.WeakKeyDictionary())


def no_measuring(monkeypatch) -> list:
    measured: list = []

    def refuse(*args):
        measured.append(args)
        raise AssertionError("the floor was measured")

    monkeypatch.setattr(floor, "_measure", refuse)
    return measured


def test_a_recall_after_an_ingest_reads_the_kept_profile_and_fits_nothing(tmp_path, monkeypatch):
    another_process(monkeypatch)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(TURNS, 1)])
        fitted = floor.store_profile(s.index)
    assert s.layout.floor_profile.is_file() and fitted is not None and fitted.ceiling is not None

    another_process(monkeypatch)
    measured = no_measuring(monkeypatch)
    asked: list[str] = []
    with Substrate(tmp_path, embedder=FakeQueryCountingEmbedder(asked)) as s:
        result = s.recall(QUERY, config=CONFIG)
        kept = floor.store_profile(s.index)
    assert not measured and set(asked) == {QUERY}  # no off-topic question embedded, nothing measured
    assert kept is not None and kept.ceiling == fitted.ceiling and kept.count == fitted.count
    assert kept.vectors is not None and kept.subject_ceiling == fitted.subject_ceiling  # a small store's subject
    assert "off-topic ceiling" in result.floor_detail and result.floor == floor.floor_value(
        fitted.ceiling, CONFIG.floor, CONFIG.floor_min, CONFIG.floor_margin
    )
    assert [i.source.split("[")[0] for i in result.items][:1] == ["transcript:s#s:1"]


def test_an_ingest_that_changes_the_store_fits_it_again_without_embedding_the_questions_again(tmp_path, monkeypatch):
    another_process(monkeypatch)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(TURNS, 1)])
        before = floor.store_profile(s.index)
    another_process(monkeypatch)
    asked: list[str] = []
    with Substrate(tmp_path, embedder=FakeQueryCountingEmbedder(asked)) as s:
        s.append([make_entry("t", n, f"the quarterly tax filing {n} is due at the harbour office") for n in range(9)])
        assert asked == []  # the questions' vectors kept with the profile: none embedded again
        after = floor.store_profile(s.index)
        fresh = floor._measure(s.index, floor.OFF_TOPIC_QUERIES, len(s.index.vectors))
    assert before is not None and after is not None and fresh is not None
    assert after.count == before.count + 9 == fresh.count
    assert (after.ceiling, after.topic_ceiling, after.subject_ceiling) == pytest.approx(
        (fresh.ceiling, fresh.topic_ceiling, fresh.subject_ceiling)
    )
    another_process(monkeypatch)
    measured = no_measuring(monkeypatch)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        assert s.recall(QUERY, config=CONFIG).floor_detail and not measured


def test_a_store_no_ingest_fitted_is_measured_at_its_first_recall(tmp_path, monkeypatch):
    another_process(monkeypatch)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(TURNS, 1)])
        fitted = floor.store_profile(s.index)
    s.layout.floor_profile.unlink()  # as a store indexed before the profile was kept
    another_process(monkeypatch)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        result = s.recall(QUERY, config=CONFIG)
        again = floor.store_profile(s.index)
    assert again is not None and fitted is not None and again.ceiling == pytest.approx(fitted.ceiling)
    assert "off-topic ceiling" in result.floor_detail
    assert not s.layout.floor_profile.exists()  # recall writes nothing into the store
