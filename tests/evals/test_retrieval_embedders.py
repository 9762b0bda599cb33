"""``lca bench retrieval --embedder a,b``: the same benchmark once per embedder, each run's record, and one record
comparing them (fake embedders: the comparison's shape, not a model's figures)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import protocols.cli as cli
from lca.index.embedder_choice import EMBEDDERS
from protocols.bench.retrieval.embedder_table import embedder_table
from protocols.evals.benchmark import BenchmarkResult
from tests.fakes import FakeHashingEmbedder

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "locomo_fixture.json"


@pytest.fixture
def fake_embedders(monkeypatch):
    import lca.index.embedders as embedders

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(max_input_tokens=200))
    fake_e5 = replace(EMBEDDERS["e5-small"], make=lambda: FakeHashingEmbedder(128, 200, name="fake-e5"))
    monkeypatch.setitem(EMBEDDERS, "e5-small", fake_e5)


def test_one_run_per_embedder_and_one_comparison_table(tmp_path, fake_embedders, capsys):
    out = tmp_path / "locomo-embedders.json"
    args = ["bench", "retrieval", "--dataset", "locomo", "--data", str(FIXTURE), "--embedder", "minilm,e5-small"]
    assert cli.main([*args, "--quiet", "--cache", str(tmp_path / "cache"), "--out", str(out)]) == 0
    runs = {name: BenchmarkResult.read(tmp_path / f"locomo-embedders-{name}.json") for name in ("minilm", "e5-small")}
    assert [r.provenance.embedder_id for r in runs.values()] == ["fake-hashing-64", "fake-e5-128"]
    assert [r.config["embedder"] for r in runs.values()] == ["minilm", "e5-small"]
    assert runs["minilm"].rows and len(runs["minilm"].rows) == len(runs["e5-small"].rows)  # the same questions

    compared = BenchmarkResult.read(out)  # --out is the comparison, each run's record beside it
    assert compared.benchmark == "retrieval-embedders" and compared.metrics["reference"] == "minilm"
    rows = compared.metrics["embedders"]
    assert list(rows) == ["minilm", "e5-small"]
    for name, row in rows.items():
        recall = runs[name].metrics["overall"]["recall@5"]
        assert row["metrics"]["recall@5"] == recall  # the run's own figure, not a second computation
        assert row["delta"]["recall@5"] == pytest.approx(recall - runs["minilm"].metrics["overall"]["recall@5"])
        run = compared.config["embedders"][name]
        assert (
            run["embedder_id"] == runs[name].provenance.embedder_id and run["record"] == f"locomo-embedders-{name}.json"
        )
        assert run["dimension"] in (64, 128) and run["embedding_cache"]["misses"] > 0
        assert compared.checks[f"{name}: recall@5 (dialog turns)"]["value"] == recall
    best = compared.metrics["best"]
    assert best["by"] == "recall@5" and set(best["embedders"]) <= set(rows)
    assert compared.provenance.embedder_id == "fake-hashing-64, fake-e5-128"
    table = out.with_suffix(".md").read_text()
    assert table == embedder_table(compared) and table in capsys.readouterr().out
    header = next(line for line in table.splitlines() if line.startswith("| embedder |"))
    body = [line for line in table.splitlines() if line.startswith(("| minilm |", "| e5-small |"))]
    assert len(body) == 2 and all(line.count("|") == header.count("|") for line in body)  # one row per embedder


def test_several_embedders_refuse_an_ablation_and_an_unknown_name_before_any_model_loads(
    tmp_path, fake_embedders, capsys
):
    base = ["bench", "retrieval", "--dataset", "locomo", "--data", str(FIXTURE), "--out", str(tmp_path / "x.json")]
    assert cli.main([*base, "--embedder", "minilm,e5-small", "--ablate"]) == 2
    assert "drop --ablate and --grid" in capsys.readouterr().err
    assert cli.main([*base, "--embedder", "minilm,nonsuch"]) == 2
    assert "unknown embedder 'nonsuch'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
