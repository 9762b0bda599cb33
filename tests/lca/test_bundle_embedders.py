"""A store is opened with the embedder it was built with, wherever it is opened (issue 54): ``Substrate`` given
none, a bundle's import and a migration's rehydration rebuild with the bundle's own embedder, and an import into a
target configured with another embedder is refused in one line unless a reindex is asked for. Two fakes are
registered under test-only names for the test's length (``EMBEDDERS``); nothing real is loaded."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import protocols.cli as cli
from lca.bundle import export_bundle, import_bundle, import_embedder, read_manifest
from lca.errors import LCAError
from lca.index.embedder_choice import EMBEDDERS, EmbedderOption, built_with, make_embedder, recorded_embedder
from lca.layout import StoreLayout
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder


class NamedFake(FakeHashingEmbedder):
    """A fake that says which registered name made it, as the real embedders do (``source``)."""

    def __init__(self, name: str) -> None:
        super().__init__(max_input_tokens=200, name=name)
        self.source = name


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    for name in ("fake-a", "fake-b"):
        monkeypatch.setitem(EMBEDDERS, name, EmbedderOption(name, "a test fake", lambda name=name: NamedFake(name)))
    monkeypatch.delenv("LCA_HOME", raising=False)


def build(root: Path, name: str = "fake-a") -> Path:
    with Substrate(root, embedder=make_embedder(name)) as substrate:
        substrate.transcript.append(
            [make_entry("s1", i, text) for i, text in enumerate(["The ferry leaves at seven.", "Pixel is grey."])]
        )
        substrate.ingest()
    return root


def test_a_store_built_with_one_embedder_is_opened_with_it_when_none_is_given(tmp_path):
    home = build(tmp_path / "a")
    assert built_with(home) == "fake-a" and built_with(tmp_path / "new") == "minilm"
    with Substrate(home) as substrate:  # as every path that opens an existing store without choosing
        assert substrate.embedder.embedder_id == "fake-a-64"
        assert substrate.search("When does the ferry leave?", k=1)[0].text.startswith("The ferry")


def test_a_bundle_names_its_embedder_and_an_import_rebuilds_with_it(tmp_path, capsys):
    home = build(tmp_path / "a")
    manifest = export_bundle(home, tmp_path / "b")
    assert (manifest.embedder_source, manifest.embedder) == ("fake-a", "fake-a")
    assert read_manifest(tmp_path / "b").embedder_source == "fake-a"
    assert cli.main(["bundle", "import", str(tmp_path / "b"), "--store", str(tmp_path / "t"), "--quiet"]) == 0
    assert "rebuilt from the transcript with fake-a" in capsys.readouterr().out
    assert recorded_embedder(StoreLayout(tmp_path / "t"))["embedder_id"] == "fake-a-64"
    same = ["bundle", "import", str(tmp_path / "b"), "--store", str(tmp_path / "t2"), "--embedder", "fake-a"]
    assert cli.main([*same, "--quiet"]) == 0  # the bundle's own embedder, named: no reindex needed


def test_an_import_into_a_target_configured_with_another_embedder_is_refused_unless_reindexed(tmp_path, capsys):
    home = build(tmp_path / "a")
    bundle, target = tmp_path / "b", tmp_path / "t"
    manifest = export_bundle(home, bundle)
    capsys.readouterr()
    argv = ["bundle", "import", str(bundle), "--store", str(target), "--embedder", "fake-b", "--quiet"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(bundle) in err and manifest.bundle_id[:16] in err
    assert "'fake-a'" in err and "'fake-b'" in err and "reindex required" in err and "--reindex" in err
    assert not target.exists()  # refused before anything was written
    with pytest.raises(LCAError, match="reindex required"):
        import_bundle(bundle, target, embedder="fake-b", rebuild=lambda root: None)
    assert not target.exists()
    assert cli.main([*argv, "--reindex"]) == 0
    assert recorded_embedder(StoreLayout(target))["embedder_source"] == "fake-b"
    with Substrate(target) as substrate:
        assert substrate.embedder.embedder_id == "fake-b-64"
    assert cli.main(["bundle", "verify", str(bundle), "--reindex"]) == 2  # an import's flag only


def test_a_migration_rehydrates_the_target_with_the_sources_embedder(tmp_path):
    home = build(tmp_path / "a")
    assert cli.main(["migrate", str(tmp_path / "t"), "--store", str(home), "--quiet"]) == 0
    assert recorded_embedder(StoreLayout(tmp_path / "t"))["embedder_source"] == "fake-a"


def test_a_bundle_from_before_manifests_named_the_embedder_reads_as_the_default(tmp_path):
    build(tmp_path / "a")
    export_bundle(tmp_path / "a", tmp_path / "b")
    old = replace(read_manifest(tmp_path / "b"), embedder_source=None)  # an id, no name: written before names
    assert old.embedder == "minilm" and "embedder_source" not in old.body()  # so older bundle ids still verify
    with pytest.raises(LCAError, match="'minilm'.*'fake-b'"):
        import_embedder(tmp_path / "b", old, "fake-b")
    assert import_embedder(tmp_path / "b", old, "fake-b", reindex=True) == "fake-b"
    assert import_embedder(tmp_path / "b", replace(old, embedder_id=None), "fake-b") == "fake-b"  # no index
