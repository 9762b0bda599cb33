"""The benchmark registry behind `lca bench`: discovered from protocols.bench's modules, names unique, unknown
names refused with the list; each benchmark carries its own arguments and runs from them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from protocols.bench import Benchmark, available_benchmarks, benchmark, discover

REPO = Path(__file__).resolve().parents[3]


def test_every_benchmark_module_is_registered_under_its_name():
    names = available_benchmarks()
    assert names == sorted(names) and {"gravity-well", "index", "recall", "retrieval"} <= set(names)
    for name in available_benchmarks():
        bench = benchmark(name)
        assert isinstance(bench, Benchmark) and bench.name == name and bench.help and bench.description


def test_an_unknown_benchmark_is_refused_with_the_known_names():
    known = ", ".join(available_benchmarks())
    with pytest.raises(LookupError, match=f"unknown benchmark 'speed'; known: {known}$"):
        benchmark("speed")


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, body in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(body))
    return name


BENCH = """
    from protocols.evals.benchmark import Benchmark
    BENCHMARK = Benchmark(name={name!r}, help="h", description="d", add_arguments=lambda p: None, run=lambda a: 0)
"""


def test_two_modules_exporting_one_name_are_refused(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(
        tmp_path,
        "dup_benches",
        {"first": BENCH.format(name="speed"), "second": BENCH.format(name="speed"), "helper": "VALUE = 1\n"},
    )
    with pytest.raises(ValueError, match="'speed' is exported by both dup_benches.first and dup_benches.second"):
        discover(name)


def test_discovery_skips_helpers_and_refuses_a_benchmark_of_the_wrong_type(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    good = _package(
        tmp_path,
        "good_benches",
        {
            "b": BENCH.format(name="beta"),
            "a": BENCH.format(name="alpha"),
            "_private": BENCH.format(name="hidden"),
            "helper": "VALUE = 1\n",
        },
    )
    assert list(discover(good)) == ["alpha", "beta"]
    bad = _package(tmp_path, "bad_benches", {"wrong": "BENCHMARK = {'name': 'wrong'}\n"})
    with pytest.raises(TypeError, match="bad_benches.wrong.BENCHMARK is a dict"):
        discover(bad)
    with pytest.raises(ValueError, match="lowercase"):
        Benchmark(name="Speed Test", help="h", description="d", add_arguments=lambda p: None, run=lambda a: 0)


def test_listing_the_benchmarks_loads_no_numerical_library():
    code = (
        "import sys; from protocols.bench import available_benchmarks; available_benchmarks(); "
        "print(sorted(m for m in ('numpy', 'torch', 'faiss') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_benchmark_parses_its_own_arguments_with_their_defaults():
    index = benchmark("index").parser().parse_args([])
    assert (index.chunks, index.memory, index.queries, index.out, index.sentence_keys, index.fresh) == (
        35_000,
        2_000,
        200,
        "results/bench/index.json",
        "off",
        False,
    )
    recall = benchmark("recall").parser().parse_args([])
    assert (recall.work, recall.queries, recall.token_queries, recall.gravity_queries) == (
        "results/bench/work-index",
        200,
        100,
        5000,
    )
    retrieval = benchmark("retrieval").parser().parse_args(["--dataset", "locomo", "--set", "a=1", "--set", "b=2"])
    assert (retrieval.retriever, retrieval.set, retrieval.out) == (
        "hybrid",
        ["a=1", "b=2"],
        "results/bench/{dataset}-{retriever}{units}.json",
    )
    with pytest.raises(SystemExit):
        benchmark("retrieval").parser().parse_args([])  # --dataset is required


def test_gravity_well_runs_from_its_registered_arguments(tmp_path, capsys):
    bench = benchmark("gravity-well")
    out = tmp_path / "gw.json"
    args = bench.parser().parse_args(["--queries", "300", "--records", "200", "--seed", "3", "--out", str(out)])
    assert bench.run(args) == 0
    from protocols.evals.benchmark import BenchmarkResult

    result = BenchmarkResult.read(out)
    assert result.benchmark == "gravity-well" and result.checks == {} and result.all_pass is None
    assert set(result.metrics["figures"]) == {"relevance_only", "use_weighted", "living_defenses"}
    assert result.config["queries"] == 300 and result.provenance.seeds == {"simulation": 3}
    assert result.provenance.datasets == () and result.provenance.wall_seconds is not None
    assert "top 1%" in capsys.readouterr().out


def test_recall_bench_needs_the_index_benchmarks_store(tmp_path, capsys):
    bench = benchmark("recall")
    assert bench.run(bench.parser().parse_args(["--work", str(tmp_path / "none")])) == 2
    assert "build it first with `lca bench index`" in capsys.readouterr().err


def test_retrieval_set_parses_through_the_one_parameter_language():
    from protocols.bench.retrieval.config import dataset_config
    from protocols.bench.retrieval_bench import checked_config

    parse = benchmark("retrieval").parser().parse_args
    config = checked_config(
        parse(["--dataset", "locomo", "--fusion", "rrf", "--set", "fusion=z", "--set", "bm25-weight=0.25"])
    ).retrieval
    file = dataset_config("locomo")
    assert file.fusion == "z" and file.bm25_weight != 0.25 and file.question_weight > 0
    # --set wins over --fusion and over the file; the file's other weights stay
    assert (config.fusion, config.bm25_weight, config.question_weight) == ("z", 0.25, file.question_weight)
    from lca.params import ParameterError

    with pytest.raises(ParameterError, match=r"--set 'bogus=1': unknown name 'bogus'; known: anchor_weight, "):
        checked_config(parse(["--dataset", "locomo", "--set", "bogus=1"]))
    with pytest.raises(ParameterError, match="given twice"):
        checked_config(parse(["--dataset", "locomo", "--set", "bm25_weight=1", "--set", "bm25_weight=2"]))


def test_retrieval_refuses_a_bad_set_before_reading_anything(tmp_path, capsys):
    bench = benchmark("retrieval")
    args = bench.parser().parse_args(
        [
            "--dataset",
            "locomo",
            "--data",
            str(tmp_path / "absent.json"),
            "--set",
            "sentences=maybe",
            "--out",
            str(tmp_path / "x.json"),
        ]
    )
    assert bench.run(args) == 2
    assert "lca: error: --set 'sentences=maybe': takes on/off" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
