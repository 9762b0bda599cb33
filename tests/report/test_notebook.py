"""notebooks/study_analysis.ipynb runs on a study run and reproduces the report's predictions table: its code
cells in order in this process (fast), and the whole notebook in a Jupyter kernel with nbclient (slow)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from protocols.report import analyse, items_frame, load_run
from tests.report.conftest import STUDY_ID, make_run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "study_analysis.ipynb"
RUN_ID = "20260101T000000"


@pytest.fixture
def study_run(tmp_path, hollow_copy_logs, monkeypatch):
    make_run(tmp_path, hollow_copy_logs, run_id=RUN_ID, agree=True)
    monkeypatch.setenv("LCA_STUDY", STUDY_ID)
    monkeypatch.setenv("LCA_STUDIES", str(tmp_path / "studies"))
    return load_run(STUDY_ID, studies=tmp_path / "studies")


def check_printed(printed: str, run) -> None:
    assert f"{STUDY_ID} {RUN_ID} confirmatory (locked)" in printed
    rows = {line.split()[0]: line.rstrip() for line in printed.splitlines() if line.strip().startswith("P")}
    outcomes = analyse(run, items_frame(run)).predictions
    assert len(outcomes) == 3 and {o.verdict for o in outcomes} != {"not tested"}
    for outcome in outcomes:
        assert rows[outcome.id].endswith(outcome.verdict), (outcome.id, rows[outcome.id])


def test_the_notebook_code_reproduces_the_predictions_table(study_run):
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for cell in notebook.cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, str(NOTEBOOK), "exec"), namespace)
    check_printed(printed.getvalue(), study_run)
    assert set(namespace["predictions"]["id"]) == {"P1", "P2", "P3"}


@pytest.mark.slow
def test_the_notebook_executes_in_a_kernel(study_run, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(
        out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )
    check_printed(printed, study_run)
