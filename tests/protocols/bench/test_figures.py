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
from protocols.bench.result import BenchmarkResult
from protocols.cli import main

REPO = Path(__file__).resolve().parents[3]


def test_the_committed_documents_agree_with_the_committed_results(capsys):
    assert main(["figures", "--check"]) == 0, capsys.readouterr().out
    assert "figures agree" in capsys.readouterr().out


def test_every_result_file_a_figure_reads_is_a_committed_record():
    sources = {source for figure in FIGURES.values() for source in figure.sources}
    for source in sources:
        assert BenchmarkResult.read(REPO / EXAMPLES / source).benchmark in {"index", "recall", "gravity-well"}


def test_every_figure_is_used_by_a_document():
    text = "".join(p.read_text() for p in [REPO / "README.md", *(REPO / "docs").rglob("*.md")])
    assert {name for name in FIGURES if f"<!-- figures:{name} -->" not in text} == set()


@pytest.fixture
def copy(tmp_path) -> Path:
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / EXAMPLES).mkdir(parents=True)
    for path in (REPO / EXAMPLES).glob("*.json"):
        shutil.copy(path, tmp_path / EXAMPLES / path.name)
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
    assert "README.md: figure 'readme-recall' differs" in out and "14.2 ms p50" in out and "1 of 5 figures" in out
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

    with pytest.raises(LCAError, match="doc.md: unknown figure 'speed'; known: gravity-well"):
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
