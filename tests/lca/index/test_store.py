"""The hybrid index store: ingest, dedupe, failures held back, embedder identity, reindex, repair, concurrency."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from lca.errors import EmbedderMismatchError, EmbeddingFailedError, StoreLockedError
from lca.importers import import_locomo
from lca.index.chunker import Chunker, entry_chunks
from lca.memory import MemoryType
from lca.retrieval import RetrievalConfig
from lca.substrate import Substrate
from lca.types import HealthStatus, SourceType
from tests.conftest import make_entry
from tests.fakes import FakeFlakyEmbedder, FakeHashingEmbedder
from tests.lca.index.stores import FIXTURE, REPO, fixture_store, memory


def test_hits_carry_source_pointers_back_to_the_transcript(tmp_path):
    with fixture_store(tmp_path) as s:
        hits = s.search("adopted a grey cat from the shelter", k=3)
        assert hits, "no hits"
        top = hits[0]
        assert top.pointer.source_type is SourceType.TRANSCRIPT
        entry = next(e for e in s.transcript.read(top.pointer.session_id).entries if e.id == top.pointer.entry_id)
        assert entry.content[top.pointer.char_start : top.pointer.char_end] in top.text
        assert "Pebble" in top.text
        assert top.dense_rank is not None and top.lexical_rank is not None


def test_ingesting_the_same_history_twice_adds_nothing(tmp_path):
    embedder = FakeHashingEmbedder()
    with fixture_store(tmp_path, embedder) as s:
        chunks = s.index.catalog_.stats()["chunks"]
        calls = embedder.calls
        sessions, report = import_locomo(FIXTURE)
        again = s.import_sessions(sessions, report)
        assert again.entries_appended == 0 and again.entries_duplicate == 16
        assert again.index.new_chunks == 0 and again.index.embedded_texts == 0
        assert embedder.calls == calls
        assert s.index.catalog_.stats()["chunks"] == chunks == 16


def test_incremental_ingest_embeds_only_what_is_new(tmp_path):
    embedder = FakeHashingEmbedder()
    with fixture_store(tmp_path, embedder) as s:
        before = embedder.texts_embedded
        s.append([make_entry("live", 1, "the deploy key rotates every Friday"), make_entry("live", 2, "Ben: thanks")])
        assert embedder.texts_embedded - before == 2
        assert s.search("when does the deploy key rotate", k=1)[0].pointer.entry_id == "live:1"
        report = s.ingest()
        assert report.entries_indexed == 0 and report.index.embedded_texts == 0


@pytest.mark.parametrize("zero_vector", [False, True])
def test_failed_embedding_fails_closed_and_is_counted_then_retried(tmp_path, zero_vector):
    flaky = FakeFlakyEmbedder(zero_vector=zero_vector)
    with Substrate(tmp_path, embedder=flaky) as s:
        s.append(
            [
                make_entry("s", 1, "a fine sentence"),
                make_entry("s", 2, "POISON pill text"),
                make_entry("s", 3, "another fine one"),
            ]
        )
        stats = s.index.catalog_.stats()
        assert stats["chunks"] == 2 and stats["failed_embeddings"] == 1
        assert len(s.index.vectors) == 2
        assert not np.any(np.all(s.index.vectors.reconstruct(s.index.vectors.ids()) == 0, axis=1))
        health = s.health()
        assert not health.healthy and health.check("embeddings").status is HealthStatus.FAIL
        assert health.check("consistency").status is HealthStatus.OK  # a held-back entry is accounted for
        assert all(h.pointer.entry_id != "s:2" for h in s.search("pill text", k=5))
        with pytest.raises(EmbeddingFailedError, match="query could not be embedded|zero or non-finite"):
            s.search("POISON", k=5)
    fixed = FakeHashingEmbedder(name=flaky.name)
    with Substrate(tmp_path, embedder=fixed) as s:
        report = s.ingest()
        assert report.index.retried_failures_recovered == 1
        assert s.health().healthy
        assert s.search("POISON pill", k=1)[0].pointer.entry_id == "s:2"


def test_store_embedded_by_another_model_is_reported_not_mixed(tmp_path):
    fixture_store(tmp_path).close()
    other = FakeHashingEmbedder(name="another-model")
    with Substrate(tmp_path, embedder=other) as s:
        with pytest.raises(EmbedderMismatchError, match="reindex"):
            s.search("cat")
        with pytest.raises(EmbedderMismatchError):
            s.append([make_entry("x", 1)])
        health = s.health()
        assert health.check("embedder").status is HealthStatus.FAIL
        s.reindex()
        assert s.index.stored_embedder_id() == other.embedder_id
        assert s.search("cat", k=1)


def test_reindex_returns_the_same_results(tmp_path):
    queries = ["pottery class teacher", "Clara Lisbon visa", "sprained wrist", "custard tarts", "cat name"]
    with fixture_store(tmp_path) as s:
        s.memory.write(memory("m1", tags=("pets",)), "Ana's cat is called Pebble; she is grey.")
        s.ingest()
        before = {q: [(h.chunk_id, h.score) for h in s.search(q, k=8)] for q in queries}
        s.reindex()
        after = {q: [(h.chunk_id, h.score) for h in s.search(q, k=8)] for q in queries}
    for q in queries:
        assert [c for c, _ in before[q]] == [c for c, _ in after[q]]
        assert np.allclose([x for _, x in before[q]], [x for _, x in after[q]], atol=1e-6)


def test_memory_files_are_indexed_updated_and_removed(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.memory.write(
            memory("deploy-rule", type=MemoryType.PROCEDURE),
            "Always deploy through staging first.",
            approver="test-approver",
        )
        assert s.ingest().memory_files_indexed == 1
        hit = s.search("deploy staging", k=1)[0]
        assert hit.pointer.source_type is SourceType.MEMORY and hit.pointer.memory_id == "deploy-rule"
        s.memory.record_use("deploy-rule", hits=5)  # counters do not trigger re-indexing
        assert s.ingest().memory_files_indexed == 0
        s.memory.write(
            memory("deploy-rule", type=MemoryType.PROCEDURE),
            "Deploys need two approvals now.",
            approver="test-approver",
        )
        assert s.ingest().memory_files_indexed == 1
        texts = [h.text for h in s.search("deploy", k=5)]
        assert texts == ["Deploys need two approvals now."]
        s.memory.path_for("deploy-rule").unlink()
        assert s.ingest().memory_files_removed == 1
        assert s.search("deploy", k=5) == []
        assert s.health().healthy


def test_unloadable_memory_file_makes_health_fail_and_keeps_its_old_chunks(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        written = s.memory.write(memory("rule"), "Never force-push to main.")
        s.ingest()
        written.path.write_text(written.path.read_text().replace("privacy: public", "privacy: loud"))
        s.ingest()
        health = s.health()
        assert not health.healthy
        check = health.check("memory_files")
        assert check.status is HealthStatus.FAIL and "privacy" in check.data["failed"][0]
        assert s.search("force-push", k=1)[0].pointer.memory_id == "rule"


def test_health_detects_a_lost_vector_file_and_ingest_repairs_it(tmp_path):
    with fixture_store(tmp_path) as s:
        assert s.health().healthy
        texts = s.index.catalog_.stats()["texts"]  # 16 chunks' own texts (and their sentence keys, if keyed)
    (tmp_path / "index" / "vectors.faiss").unlink()
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        check = s.health().check("consistency")
        assert check.status is HealthStatus.FAIL and check.data["missing_vectors"] == texts
        report = s.ingest()
        assert report.repairs["vectors_reembedded"] == texts
        assert s.health().healthy


def test_health_reports_entries_awaiting_ingest_and_quarantine(tmp_path):
    with fixture_store(tmp_path) as s:
        s.append([make_entry("later", 1, "not yet indexed")], index=False)
        with open(s.transcript.session_path("later"), "ab") as handle:
            handle.write(b'{"torn')
        health = s.health()
        assert health.check("consistency").status is HealthStatus.WARN
        assert health.check("consistency").data["entries_pending"] == 1
        s.ingest()
        health = s.health()
        assert health.check("consistency").status is HealthStatus.OK
        quarantine = health.check("quarantine")
        assert quarantine.status is HealthStatus.WARN and quarantine.data["torn_tails"] == 1
        assert quarantine.data["bytes"] == len(b'{"torn')


def test_second_writer_waits_then_fails_clearly(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), lock_timeout=0.2) as s:
        with s.writer_lock():
            other = Substrate(tmp_path, embedder=FakeHashingEmbedder(), lock_timeout=0.2)
            with pytest.raises(StoreLockedError, match="locked by another writer"):
                other.append([make_entry("s", 1)])
            other.close()


def test_two_processes_ingesting_at_once_add_nothing_twice(tmp_path):
    go = tmp_path / "go"
    store = tmp_path / "store"
    children = [
        subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "helpers" / "ingest_child.py"), str(store), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(1.0)
    go.touch()
    outputs = [c.communicate(timeout=120) for c in children]
    assert all(c.returncode == 0 for c in children), outputs
    appended = sorted(tuple(map(int, out.split())) for out, _ in outputs)
    assert appended == [(0, 0), (16, 16)]
    with Substrate(store, embedder=FakeHashingEmbedder()) as s:
        assert s.index.catalog_.stats()["chunks"] == 16
        assert sum(len(s.transcript.read(sid).entries) for sid in s.transcript.session_ids()) == 16
        assert s.health().healthy


# ---- sentence keys: each sentence of a multi-sentence chunk is also a dense key ------------------------
PASSING_REMARK = (
    "I want recipe ideas for a quick weeknight dinner with rice, beans, greens, tofu, peppers, onions, "
    "garlic and lime that my whole family would enjoy after school. By the way, I replaced my kitchen "
    "faucet last Sunday."
)


def test_sentence_keys_find_a_remark_in_passing_once_per_chunk(tmp_path):
    top = {}
    for keyed in (False, True):
        embedder = FakeHashingEmbedder(dimension=512, max_input_tokens=200)
        with Substrate(tmp_path / str(keyed), embedder=embedder, retrieval=RetrievalConfig(sentence_keys=keyed)) as s:
            s.append(
                [
                    make_entry("s", 1, PASSING_REMARK),
                    make_entry("s", 2, "Which kitchen faucet should I buy for my sink?"),
                    make_entry("s", 3, "Tax forms are due soon."),
                ]
            )
            assert s.index.catalog_.stats()["sentence_keys"] == (2 if keyed else 0)
            hits = s.search("I replaced my kitchen faucet", k=3, mode="dense")
            assert len({h.chunk_id for h in hits}) == len(hits)  # one hit per chunk, however many keys match
            assert hits[0].text.startswith(PASSING_REMARK[:20]) or not keyed  # the chunk's whole text comes back
            recalled = s.recall("I replaced my kitchen faucet").candidates
            top[keyed] = (hits[0].pointer.entry_id, recalled[0].source)
    assert top[True][0] == "s:1" and top[False][0] == "s:2"
    assert "s:1" in top[True][1] and "s:2" in top[False][1]  # recall's similarity is the best key's cosine


def test_removed_memory_takes_its_sentence_keys_with_it(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), retrieval=RetrievalConfig(sentence_keys=True)) as s:
        s.memory.write(
            memory("pets"), "Ana's cat is called Pebble. She is grey and sleeps all day.", approver="test-approver"
        )
        s.ingest()
        assert s.index.catalog_.stats()["sentence_keys"] == 2
        s.memory.path_for("pets").unlink()
        assert s.ingest().memory_files_removed == 1
        stats = s.index.catalog_.stats()
        assert stats["sentence_keys"] == 0 and stats["texts"] == 0 and len(s.index.vectors) == 0
        assert s.health().healthy


def test_a_sentence_key_that_cannot_be_embedded_is_counted_and_its_chunk_still_indexed(tmp_path):
    class FakeFailsOnOneSentence(FakeHashingEmbedder):
        def embed(self, texts):
            if any(t.startswith("By the way") for t in texts):
                raise RuntimeError("fake embedder failure")
            return super().embed(texts)

    with Substrate(
        tmp_path, embedder=FakeFailsOnOneSentence(max_input_tokens=200), retrieval=RetrievalConfig(sentence_keys=True)
    ) as s:
        result = s.index.add_chunks(entry_chunks(make_entry("s", 1, PASSING_REMARK), Chunker(s.embedder)))
        assert result.new_chunks == 1 and result.failed_chunks == 0 and result.failed_sentence_keys == 1
        assert s.index.catalog_.stats()["sentence_keys"] == 1
        assert s.index.catalog_.counters()["sentence_key_failures"] == 1
