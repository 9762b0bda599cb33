"""The documents' benchmark figures are generated from the committed result records: `lca figures --check`
passes on the tree, fails after a hand edit of a generated figure or a changed result file, and `lca figures`
writes them back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lca.errors import LCAError
from protocols.bench.figures import EXAMPLES, FIGURES, render
from protocols.bench.registry import available_benchmarks
from protocols.bench.retrieval.report import HELD_OUT, TARGETS, check
from protocols.cli import main
from protocols.evals.benchmark import BenchmarkResult

REPO = Path(__file__).resolve().parents[3]
# figures whose result files come from real runs not committed yet (the documents quote them once they are)
AWAITING_RESULTS: set[str] = set()


def test_the_committed_documents_agree_with_the_committed_results(capsys):
    assert main(["figures", "--check"]) == 0, capsys.readouterr().out
    assert "figures agree" in capsys.readouterr().out


def test_every_result_file_a_figure_reads_is_a_committed_record():
    """Each source parses as a result record of a registered bench (a variant record such as ``retrieval-grid``
    is named after the bench that wrote it)."""
    registered = set(available_benchmarks())
    sources = {source for name, figure in FIGURES.items() if name not in AWAITING_RESULTS for source in figure.sources}
    for source in sources:
        written_by = BenchmarkResult.read(REPO / EXAMPLES / source).benchmark
        assert written_by in registered or written_by.split("-")[0] in registered, (source, written_by)


def test_every_figure_is_used_by_a_document():
    text = "".join(p.read_text() for p in [REPO / "README.md", *(REPO / "docs").rglob("*.md")])
    assert {name for name in FIGURES if f"<!-- figures:{name} -->" not in text} == AWAITING_RESULTS


def test_a_figure_awaiting_results_has_none_committed_yet():
    """Once a figure's result files are committed, it is no longer awaiting them: take it out of the set."""
    for name in AWAITING_RESULTS:
        assert not all((REPO / EXAMPLES / source).is_file() for source in FIGURES[name].sources), name


@pytest.fixture
def copy(tmp_path) -> Path:
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / EXAMPLES).mkdir(parents=True)
    for path in (REPO / EXAMPLES).rglob("*.json"):
        target = tmp_path / EXAMPLES / path.relative_to(REPO / EXAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return tmp_path


def test_a_hand_edited_figure_fails_the_check_and_is_written_back(copy, capsys):
    readme = copy / "README.md"
    recall = BenchmarkResult.read(copy / EXAMPLES / "bench-recall.json")
    written = f"recall takes {recall.metrics['latency']['recall']['p50_ms']:.1f} ms p50"
    assert written in readme.read_text()
    readme.write_text(readme.read_text().replace(written, "recall takes 14.2 ms p50"))
    capsys.readouterr()

    assert main(["figures", "--check", "--root", str(copy)]) == 1
    out = capsys.readouterr().out
    assert (
        "README.md: figure 'readme-recall' differs" in out
        and "14.2 ms p50" in out
        and f"1 of {len(FIGURES)} figures" in out
    )
    assert "recall takes 14.2 ms p50" in readme.read_text()  # --check writes nothing

    assert main(["figures", "--root", str(copy)]) == 0
    assert "README.md: rewrote figure 'readme-recall'" in capsys.readouterr().out
    assert written in readme.read_text()
    assert main(["figures", "--check", "--root", str(copy)]) == 0


def test_a_new_result_file_changes_every_document_that_quotes_it(copy, capsys):
    path = copy / EXAMPLES / "bench-recall.json"
    data = json.loads(path.read_text())
    data["metrics"]["latency"]["recall"]["p50_ms"] = 19.04
    path.write_text(json.dumps(data))
    assert main(["figures", "--check", "--root", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "README.md: figure 'readme-recall'" in out and "docs/recall.md: figure 'recall-bench'" in out
    assert main(["figures", "--root", str(copy)]) == 0
    assert "19.0 ms p50" in (copy / "README.md").read_text()
    assert "recall p50 19.0 ms" in (copy / "docs" / "recall.md").read_text()


def test_unknown_figures_unclosed_markers_and_missing_results_are_refused(copy, capsys):
    def records(source):
        return BenchmarkResult.read(REPO / EXAMPLES / source)

    with pytest.raises(LCAError, match="doc.md: unknown figure 'speed'; known: .*gravity-well"):
        render("a <!-- figures:speed -->x<!-- /figures --> b", records, document="doc.md")
    with pytest.raises(LCAError, match="doc.md: every <!-- figures:NAME --> needs one <!-- /figures -->"):
        render("a <!-- figures:gravity-well -->x and no end", records, document="doc.md")
    quoted = "write `<!-- figures:NAME -->` and `<!-- /figures -->` around a figure"
    assert render(quoted, records, document="doc.md") == (quoted, [])  # markers in inline code are prose
    text, stale = render("a <!-- figures:gravity-well -->x<!-- /figures --> b", records, document="doc.md")
    assert text.startswith("a <!-- figures:gravity-well -->`lca bench gravity-well` (") and text.endswith(" b")
    assert [s.figure for s in stale] == ["gravity-well"] and stale[0].written == "x"
    (copy / EXAMPLES / "gravity-well.json").unlink()
    assert main(["figures", "--check", "--root", str(copy)]) == 2
    assert "lca: error: results/examples/gravity-well.json: no such result file" in capsys.readouterr().err


def retrieval_record(dataset: str, retriever: str, checks: dict[str, float], **config) -> BenchmarkResult:
    """A small retrieval record: only what the figure reads (checks, config, provenance)."""
    target = {name: floor for targets in TARGETS.values() for name, (_, floor) in targets.items()}
    target[HELD_OUT] = target["recall@5 (dialog turns)"]
    data = {
        "benchmark": "retrieval",
        "metrics": {},
        "checks": {name: check(value, target[name]) for name, value in checks.items()},
        "config": {"dataset": dataset, "retriever": retriever, "roles": "all", "sentence_keys": False} | config,
        "provenance": {
            "code_version": "0.1.0+gabcdef1",
            "revision": "abcdef1",
            "tree_clean": True,
            "date": "2026-12-01T10:00:00+00:00",
            "datasets": [{"path": "x.json", "sha256": "0" * 64, "name": dataset, "official": True}],
        },
    }
    return BenchmarkResult.model_validate(data)


def write_retrieval_examples(root: Path, *, grid: bool, held_out: float = 0.7221) -> None:
    any5, all5, turns = "session recall_any@5 (strict)", "session recall_all@5 (lenient)", "recall@5 (dialog turns)"
    records = {
        "longmemeval-resonance": retrieval_record(
            "longmemeval", "resonance", {any5: 0.9423, all5: 0.8087}, roles="user"
        ),
        "longmemeval-hybrid": retrieval_record("longmemeval", "hybrid", {any5: 0.9712, all5: 0.8652}, roles="user"),
        "locomo-resonance": retrieval_record("locomo", "resonance", {turns: 0.7401}),
        "locomo-hybrid": retrieval_record("locomo", "hybrid", {turns: 0.7263}),
    }
    if grid:
        held = retrieval_record("locomo", "hybrid", {HELD_OUT: held_out})
        records["locomo-hybrid-grid"] = held.model_copy(update={"benchmark": "retrieval-grid"})
    (root / EXAMPLES / "retrieval").mkdir(parents=True, exist_ok=True)
    for name, record in records.items():
        (root / EXAMPLES / "retrieval" / f"{name}.json").write_text(record.to_json())


def test_the_retrieval_figure_quotes_both_retrievers_each_target_and_the_held_out_figure(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Retrieval: <!-- figures:readme-retrieval -->old<!-- /figures -->\n")
    write_retrieval_examples(tmp_path, grid=False)
    assert main(["figures", "--root", str(tmp_path)]) == 0
    without_grid = (tmp_path / "README.md").read_text()
    locomo = "LoCoMo, evidence recall@5 over dialog turns: 0.740 with resonance recall and 0.726 with hybrid search"
    assert f"{locomo} (target 0.78, not met) (`results/examples/retrieval/`, 2026-12-01)." in without_grid

    write_retrieval_examples(tmp_path, grid=True)
    assert main(["figures", "--check", "--root", str(tmp_path)]) == 1  # the grid file is read once it is there
    assert main(["figures", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "README.md").read_text() == (
        "Retrieval: <!-- figures:readme-retrieval -->LongMemEval_S dev (over user turns only), session recall_any@5 "
        "(strict): 0.942 with resonance recall and 0.971 with hybrid search (target 0.97, met by hybrid only); "
        "session recall_all@5 (lenient): 0.809 and 0.865 (target 0.88, not met); LoCoMo, evidence recall@5 over "
        "dialog turns: 0.740 with resonance recall and 0.726 with hybrid search, 0.722 leave one conversation out "
        "(target 0.78, not met) (`results/examples/retrieval/`, 2026-12-01).<!-- /figures -->\n"
    )
    write_retrieval_examples(tmp_path, grid=True, held_out=0.7812)
    assert main(["figures", "--root", str(tmp_path)]) == 0
    assert (
        "0.781 leave one conversation out (target 0.78, met by the held-out figure only)"
        in (tmp_path / "README.md").read_text()
    )
    capsys.readouterr()
    (tmp_path / EXAMPLES / "retrieval" / "locomo-hybrid.json").unlink()
    assert main(["figures", "--check", "--root", str(tmp_path)]) == 2
    assert "results/examples/retrieval/locomo-hybrid.json: no such result file" in capsys.readouterr().err


def test_a_retrieval_figure_names_the_keys_its_stores_kept(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Retrieval: <!-- figures:readme-retrieval -->old<!-- /figures -->\n")
    write_retrieval_examples(tmp_path, grid=False)
    turns = {"recall@5 (dialog turns)": 0.7263}
    for keys, named in (
        ({"sentence_keys": True}, "sentence keys"),
        ({"sentence_keys": True, "window_keys": True}, "sentence and window keys"),
    ):
        for retriever in ("resonance", "hybrid"):
            keyed = retrieval_record("locomo", retriever, turns, **keys)
            (tmp_path / EXAMPLES / "retrieval" / f"locomo-{retriever}.json").write_text(keyed.to_json())
        assert main(["figures", "--root", str(tmp_path)]) == 0
        assert (
            f"LoCoMo (with {named}), evidence recall@5 over dialog turns: 0.726 with resonance recall and 0.726 with hybrid search (target"
            in (tmp_path / "README.md").read_text()
        )


def test_a_retrieval_figure_refuses_a_pair_run_on_different_stores(tmp_path, capsys):
    """A resonance record over every turn against a hybrid one over user turns would compare the stores, and
    "met by hybrid only" would be the stores' verdict: the figure is refused naming both records."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Retrieval: <!-- figures:readme-retrieval -->old<!-- /figures -->\n")
    write_retrieval_examples(tmp_path, grid=True)
    assert main(["figures", "--root", str(tmp_path)]) == 0
    checks = {"session recall_any@5 (strict)": 0.9712, "session recall_all@5 (lenient)": 0.8652}
    every_turn = retrieval_record("longmemeval", "resonance", checks)  # roles "all"
    (tmp_path / EXAMPLES / "retrieval" / "longmemeval-resonance.json").write_text(every_turn.to_json())
    capsys.readouterr()
    assert main(["figures", "--check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "were run on different stores or questions" in err
    assert "results/examples/retrieval/longmemeval-resonance.json: the default stores" in err
    assert "results/examples/retrieval/longmemeval-hybrid.json: over user turns only" in err
    keyed_grid = retrieval_record("locomo", "hybrid", {HELD_OUT: 0.7221}, sentence_keys=True)
    (tmp_path / EXAMPLES / "retrieval" / "longmemeval-resonance.json").unlink()
    write_retrieval_examples(tmp_path, grid=False)
    (tmp_path / EXAMPLES / "retrieval" / "locomo-hybrid-grid.json").write_text(
        keyed_grid.model_copy(update={"benchmark": "retrieval-grid"}).to_json()
    )
    assert main(["figures", "--check", "--root", str(tmp_path)]) == 2  # the held-out figure's grid too
    assert "locomo-hybrid-grid.json: with sentence keys" in capsys.readouterr().err
