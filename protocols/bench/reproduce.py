"""``lca reproduce RECORD``: run the command that wrote a result record again and compare what it writes with the
record, figure by figure.

A record names its command (``Provenance.command``, recorded by the CLI as the command starts); a record written
before commands were recorded takes it from ``--command``. The run writes into a scratch folder (its ``--out`` is
redirected there; the committed file is never touched), from the directory the command is started in, since the
recorded command's paths are relative to where it ran.

Compared: every metric, check, config value and row field, the embedder id and each dataset's sha256 (a different
file is not a reproduction). Figures the benchmark declares as varying from run to run (``Benchmark.run_to_run``:
timings, load) are reported side by side and never count as a difference. Numbers agree within ``rtol``; anything
else must be equal. A figure the record holds and the rerun no longer writes is a difference; one only the rerun
writes (the code records more than it did) is listed as added, not judged.
"""

from __future__ import annotations

import fnmatch
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from protocols.bench.registry import available_benchmarks, benchmark
from protocols.evals.benchmark import TIMING_FIGURES, BenchmarkResult


@dataclass(frozen=True)
class FigurePair:
    """One figure as recorded and as reproduced (``None`` where one side lacks the key)."""

    key: str
    recorded: Any
    reproduced: Any


@dataclass(frozen=True)
class Reproduction:
    """The comparison of a record with its rerun: ``differences`` decide; ``run_to_run`` and ``added`` (figures only
    the rerun writes) are shown, not judged."""

    record: str
    command: tuple[str, ...]
    compared: int
    differences: tuple[FigurePair, ...]
    run_to_run: tuple[FigurePair, ...] = field(default=())
    added: tuple[str, ...] = field(default=())

    @property
    def reproduced(self) -> bool:
        return not self.differences


def flat_figures(result: BenchmarkResult) -> dict[str, Any]:
    """A record's comparable content as dotted keys: metrics, checks, config, rows, embedder and dataset hashes."""
    out: dict[str, Any] = {}
    _flatten("metrics", result.metrics, out)
    _flatten("checks", result.checks, out)
    _flatten("config", result.config, out)
    for i, row in enumerate(result.rows):
        _flatten(f"rows.{i}", row, out)
    out["provenance.embedder_id"] = result.provenance.embedder_id
    for d in result.provenance.datasets:
        out[f"provenance.datasets.{d.name or Path(d.path).name}.sha256"] = d.sha256
    return out


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list | tuple) and value and any(isinstance(v, Mapping | list | tuple) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}.{i}", v, out)
    else:
        out[prefix] = list(value) if isinstance(value, tuple) else value


def _agree(a: Any, b: Any, rtol: float) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)
    return a == b


def compare_records(
    recorded: BenchmarkResult,
    reproduced: BenchmarkResult,
    *,
    run_to_run: Iterable[str],
    rtol: float = 1e-6,
    record: str = "",
    command: tuple[str, ...] = (),
) -> Reproduction:
    """Compare two records of one benchmark figure by figure (see the module docstring)."""
    patterns = tuple(run_to_run)
    mine, theirs = flat_figures(recorded), flat_figures(reproduced)
    differences: list[FigurePair] = []
    varying: list[FigurePair] = []
    if recorded.benchmark != reproduced.benchmark:
        differences.append(FigurePair("benchmark", recorded.benchmark, reproduced.benchmark))
    for key in sorted(mine):
        pair = FigurePair(key, mine[key], theirs.get(key))
        leaf = key.split(".", 1)[1] if "." in key else key
        if any(fnmatch.fnmatchcase(leaf, p) or fnmatch.fnmatchcase(key, p) for p in patterns):
            varying.append(pair)
        elif key not in theirs or not _agree(pair.recorded, pair.reproduced, rtol):
            differences.append(pair)
    added = tuple(sorted(set(theirs) - set(mine)))
    return Reproduction(record, command, len(mine), tuple(differences), tuple(varying), added)


def _redirected(argv: list[str], out: Path, name: str) -> list[str]:
    """``argv`` with its ``--out`` (either spelling) pointing into the scratch folder, keeping the file name; without
    one, ``--out`` names the committed record's file there (every benchmark takes ``--out``)."""
    for i, arg in enumerate(argv):
        if arg == "--out" and i + 1 < len(argv):
            return [*argv[:i], "--out", str(out / Path(argv[i + 1]).name), *argv[i + 2 :]]
        if arg.startswith("--out="):
            return [*argv[:i], f"--out={out / Path(arg[6:]).name}", *argv[i + 1 :]]
    return [*argv, "--out", str(out / name)]


def _written(folder: Path, record_path: Path, name: str) -> BenchmarkResult:
    """The record the rerun wrote: the file named like the committed one, else the one record of its benchmark (a
    retrieval run with ``--ablate`` writes its ablation record beside the main one)."""
    same = folder / record_path.name
    if same.is_file() and (result := BenchmarkResult.read(same)).benchmark == name:
        return result
    found = []
    for path in sorted(folder.rglob("*.json")):
        try:
            result = BenchmarkResult.read(path)
        except LCAError:
            continue
        if result.benchmark == name:
            found.append(result)
    if len(found) != 1:
        raise LCAError(
            f"{record_path}: the rerun wrote {len(found)} records of benchmark '{name}' to {folder}, "
            "not one; name the output with --out in the command"
        )
    return found[0]


def reproduce(
    record_path: str | Path,
    *,
    command: Iterable[str] | None = None,
    rtol: float = 1e-6,
    keep: str | Path | None = None,
) -> Reproduction:
    """Run ``record_path``'s command again (or ``command``) and compare. Raises ``LCAError`` naming the record when
    it names no command, the command is not ``lca bench ...``, or the rerun fails."""
    record_path = Path(record_path)
    recorded = BenchmarkResult.read(record_path)
    argv = tuple(command) if command is not None else recorded.provenance.command
    if not argv:
        raise LCAError(
            f"{record_path}: the record names no command (written before records carried theirs); "
            "give it with --command 'lca bench ...'"
        )
    argv = tuple(argv[1:] if argv[0] == "lca" else argv)
    if len(argv) < 2 or argv[0] != "bench" or argv[1] not in available_benchmarks():
        raise LCAError(f"{record_path}: only an `lca bench NAME ...` command is rerun here, not {' '.join(argv)!r}")
    declared = benchmark(argv[1]).run_to_run if argv[1] == recorded.benchmark else TIMING_FIGURES
    with tempfile.TemporaryDirectory(prefix="lca-reproduce-") as scratch:
        folder = Path(keep) if keep else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        rerun = _redirected(list(argv), folder, record_path.name)
        done = subprocess.run([sys.executable, "-m", "protocols.cli", *rerun], check=False)
        if done.returncode != 0:
            raise LCAError(f"{record_path}: the rerun `lca {' '.join(rerun)}` exited with status {done.returncode}")
        reproduced = _written(folder, record_path, recorded.benchmark)
    return compare_records(
        recorded, reproduced, run_to_run=declared, rtol=rtol, record=str(record_path), command=("lca", *argv)
    )
