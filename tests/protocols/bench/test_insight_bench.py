"""``lca bench insight`` with the fake embedder and a scripted fake signer on the slice: the record holds every size
with the cycle and the content-only detector, the slice compares the signer with the generator's signatures and
counts what did not validate, the checks are computed from the figures, and the table and the curve are written."""

from __future__ import annotations

import argparse
import json

import protocols.evals.insight.bench as insight_bench
import protocols.providers.models as models
from protocols.bench import benchmark
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_bench_writes_the_curve_the_slice_and_checks_computed_from_the_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(
        insight_bench, "_embedder", lambda cache: FakeHashingEmbedder(dimension=512, max_input_tokens=512)
    )
    answers = iter(range(1000))

    def respond(messages):  # every other answer is not a signature: a counted refusal
        from lca.insight.distill import DEMO_ANSWER

        return DEMO_ANSWER if next(answers) % 2 else "I cannot say."

    fake = FakeScriptedGenerator(respond, model_id="fake-small-signer")
    monkeypatch.setattr(models, "local_generator", lambda model, **runtime: fake)
    parser = argparse.ArgumentParser()
    bench = benchmark("insight")
    bench.add_arguments(parser)
    out = tmp_path / "insight.json"
    args = parser.parse_args(["--sizes", "120,60", "--slice", "16", "--out", str(out)])
    assert bench.run(args) == 0
    record = json.loads(out.read_text())
    scale = record["metrics"]["scale"]
    assert sorted(scale, key=int) == ["60", "120"]
    for n, row in scale.items():
        cycle = row["cycle"]
        assert cycle["records"] == int(n) and cycle["signature_valid_share"] == 1.0
        assert cycle["true_discoveries"] + cycle["false_discoveries"] == cycle["above_threshold_pairs"]
        assert row["content_only"]["records"] == int(n)
    sliced = record["metrics"]["slice"]
    assert sliced["model"] == "fake-small-signer" and sliced["records"] == 16
    assert (
        sliced["signer"]["signature_valid_share"] == 0.5
        and sliced["signer"]["signatures_refused"]["malformed_json"] == 8
    )
    assert sliced["generator"]["signature_valid_share"] == 1.0
    checks = record["checks"]
    assert set(checks) == {"precision_60", "precision_120", "false_discoveries_120_at_most_linear", "cycle_seconds_120"}
    assert checks["cycle_seconds_120"]["value"] == scale["120"]["cycle"]["wall_seconds"]
    assert "generator's own signatures" in record["config"]["scale_signer"]
    assert out.with_suffix(".png").read_bytes()[:8] == PNG_MAGIC
    assert "| 120 |" in out.with_suffix(".md").read_text()


def test_bad_sizes_are_refused_with_exit_2(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench = benchmark("insight")
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(["--sizes", "1000,ten", "--out", str(tmp_path / "x.json")])) == 2
    assert "--sizes" in capsys.readouterr().err


def test_several_seeds_each_measure_their_own_corpora_and_the_first_is_the_scale(tmp_path, monkeypatch):
    monkeypatch.setattr(
        insight_bench, "_embedder", lambda cache: FakeHashingEmbedder(dimension=512, max_input_tokens=512)
    )
    parser = argparse.ArgumentParser()
    bench = benchmark("insight")
    bench.add_arguments(parser)
    out = tmp_path / "insight.json"
    args = parser.parse_args(["--sizes", "60", "--seed", "3,1", "--slice", "0", "--out", str(out)])
    assert bench.run(args) == 0
    record = json.loads(out.read_text())
    seeds = record["metrics"]["seeds"]
    assert list(seeds) == ["3", "1"] and record["config"]["seeds"] == [3, 1]
    assert record["metrics"]["scale"] == seeds["3"]  # the first seed's corpora are the scale, its checks theirs
    assert record["provenance"]["seeds"] == {"seed": 3, "seed_2": 1}
    assert all(
        rows["60"]["cycle"]["records"] == 60 and rows["60"]["cycle"]["gold_pairs"] > 0 for rows in seeds.values()
    )
    table = out.with_suffix(".md").read_text()
    assert "| 3 | 60 |" in table and "| 1 | 60 |" in table
    assert bench.run(parser.parse_args(["--seed", "1,1", "--out", str(tmp_path / "x.json")])) == 2
