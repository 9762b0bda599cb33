"""The committed example records name the command that wrote them, and the quick ones reproduce: the figures the
docs quote come from code that still computes them (issue 51, "every committed record reproduced by its command").

The slow test reruns each record whose run took at most ``QUICK_SECONDS`` through ``lca reproduce``'s own code;
the long runs (index, retrieval over the full benchmarks, the six-condition probes) are reproduced by hand with
``lca reproduce RECORD`` and reported in the issue's note."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocols.bench.registry import available_benchmarks
from protocols.bench.reproduce import reproduce
from protocols.bench.retrieval_bench import companion_path
from protocols.evals.benchmark import BenchmarkResult

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "results" / "examples"
QUICK_SECONDS = 60.0
# records reading files this repository does not ship need them laid out (LCA_DATA), as the benchmarks do
_SHIPPED = ROOT / "data"


def _records() -> list[tuple[Path, BenchmarkResult]]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.json")):
        try:
            found.append((path, BenchmarkResult.read(path)))
        except Exception:  # noqa: BLE001 - not every JSON file under examples is a bench record (study outputs)
            continue
    return found


RECORDS = _records()
WITH_COMMAND = [(p, r) for p, r in RECORDS if r.provenance.command]


def _out_argument(command: tuple[str, ...]) -> str | None:
    for i, part in enumerate(command):
        if part == "--out" and i + 1 < len(command):
            return command[i + 1]
        if part.startswith("--out="):
            return part.split("=", 1)[1]
    return None


def test_committed_records_name_their_own_command():
    assert len(WITH_COMMAND) >= 3, "the regenerated example records carry the command that wrote them"
    for path, record in WITH_COMMAND:
        command = record.provenance.command
        assert command is not None
        assert command[:2] == ("lca", "bench") and command[2] in available_benchmarks(), (path, command)
        out = _out_argument(command)
        assert out is not None, (path, command)
        # a retrieval run's ablation or grid record is written beside the record its command names
        kind = {"retrieval-ablation": "ablation", "retrieval-grid": "grid"}.get(record.benchmark)
        written = companion_path(ROOT / out, kind) if kind else ROOT / out
        assert written.resolve() == path.resolve(), (path, out)


def _needs_outside_data(record: BenchmarkResult) -> bool:
    """Whether the record read a file this repository does not ship (its path is the machine's it ran on)."""
    shipped = {p.name for p in _SHIPPED.rglob("*") if p.is_file()}
    return any(Path(d.path).name not in shipped for d in record.provenance.datasets)


QUICK = [
    pytest.param(path, id=str(path.relative_to(EXAMPLES)))
    for path, record in WITH_COMMAND
    if (record.provenance.wall_seconds or 0.0) <= QUICK_SECONDS
]


@pytest.mark.slow
@pytest.mark.parametrize("path", QUICK)
def test_a_quick_committed_record_reproduces(path, monkeypatch):
    record = BenchmarkResult.read(path)
    if _needs_outside_data(record) and not os.environ.get("LCA_DATA"):
        pytest.skip(f"{path.name} reads benchmark files outside the repository; set LCA_DATA")
    monkeypatch.chdir(ROOT)  # the recorded command's paths are relative to the repository
    result = reproduce(path)
    assert result.reproduced, [(d.key, d.recorded, d.reproduced) for d in result.differences[:10]]
    assert result.compared > 0
