"""The chunker: text split at the embedder's limit, covered exactly, never truncated."""

from __future__ import annotations

from lca.index.chunker import Chunker
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


def test_chunker_covers_text_exactly_and_respects_the_limit():
    embedder = FakeHashingEmbedder(max_input_tokens=16)
    chunker = Chunker(embedder)
    text = (
        "First sentence is here. Second one follows, longer than the first by far! "
        "Third? " + "x" * 5 + " supercalifragilistic " * 12
    )
    pieces = chunker.split(text, prefix="Ana: ")
    assert "".join(p.text for p in pieces) == text
    assert all(embedder.count_tokens(["Ana: " + p.text])[0] <= 16 for p in pieces)
    assert pieces[0].text.endswith("here. ")  # prefers a sentence end


def test_long_entries_are_split_never_truncated(tmp_path):
    embedder = FakeHashingEmbedder(max_input_tokens=20)
    text = " ".join(f"word{i}." if i % 7 == 6 else f"word{i}" for i in range(130))
    with Substrate(tmp_path, embedder=embedder) as s:
        s.append([make_entry("long", 1, text)])
        hits = s.search("word129", k=50, mode="lexical")
        parts = sorted((h.pointer.char_start, h.pointer.char_end) for h in s.search("word", k=50, mode="dense"))
        assert parts[0][0] == 0 and parts[-1][1] == len(text)
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
        assert "word129" in hits[0].text
        health = s.health()
        assert health.check("embeddings").data["split_items"] == 1
        assert health.check("embeddings").data["split_chunks"] == len(parts) > 1
