"""What every ``lca bench`` plug-in is made of: its declaration (:class:`Benchmark`), the one result record it writes
and the one provenance builder they all use. It sits with the protocols (not in ``protocols.bench``) because a
protocol's own substrate-level bench lives in its folder (``protocols/evals/<name>/bench.py``) and the record checks
each dataset against the protocols' pins (``protocols.evals.registry``).

A benchmark is a module exporting ``BENCHMARK = Benchmark(...)``: a top-level module of ``protocols.bench`` or a
protocol folder's ``bench.py``; ``protocols.bench.registry`` finds both.


A benchmark's run is a :class:`BenchmarkResult`: its name, ``metrics`` (a mapping of numbers, nested as the
benchmark likes; the keys are the benchmark's figures), ``checks`` (each target against its measured value),
``config`` (what it ran with), optional per-item ``rows``, and :class:`Provenance`: the code revision and
whether the tree was clean, the embedder id, each dataset file with its sha256 and whether that matches a file
pinned in a protocol's ``eval.yaml`` (the one list of official files), seeds, wall time, cores, the machine's
load when measured, package versions and the date. ``to_json`` / ``from_json`` round-trip it exactly; unknown
or missing fields are refused naming the field.

Writing: :func:`write_result` writes ``<out>`` and, when a file was already there, says on stderr that it
replaced it and which run that was (date and code). A rerun is what a user asks for, so it is not refused,
but it is never silent; figures the documents quote come from committed files under ``results/examples/``
(``lca figures``), which a rerun to the default ``results/bench/`` never touches.

``Provenance.command`` is the ``lca`` command line that wrote the record (the CLI records it as a command starts,
secrets redacted), so ``lca reproduce RECORD`` can run it again and compare; ``Benchmark.run_to_run`` names the
figures that vary from run to run (timings, load), which a reproduction reports beside each other but does not
require equal.

Adopting it in a benchmark::

    started = time.perf_counter()
    ...  # run; ``report`` is today's dict of figures
    result = BenchmarkResult(
        benchmark="retrieval",
        metrics=report_without_provenance,
        config={"dataset": args.dataset, "retriever": args.retriever, "options": options},
        rows=per_question_rows,  # optional: one mapping per question
        provenance=build_provenance(
            embedder_id=embedder.embedder_id,
            datasets=[dataset_provenance(path, "locomo")],  # the eval.yaml dataset name pins the sha256
            seeds={},
            wall_seconds=time.perf_counter() - started,
            extra={"embedding_cache": cache_state()},  # anything else the run should carry
        ),
    )
    write_result(result, out)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lca.errors import RecordFormatError
from lca.importers import file_sha256
from lca.provenance import code_version
from lca.secrets import redacted
from protocols.evals.registry import REGISTRY

RESULT_FORMAT = 1
PACKAGES = {  # what the figures depend on: the name reported, then the distributions that provide it
    "numpy": ("numpy",),
    "faiss": ("faiss-cpu", "faiss-gpu", "faiss"),
    "torch": ("torch",),
    "sentence_transformers": ("sentence-transformers",),
    "bm25s": ("bm25s",),
}
_REVISION = re.compile(r"\+g(?P<rev>[0-9a-f]{7,40})(?P<dirty>\.dirty)?$")
_NAME = re.compile(r"[a-z][a-z0-9-]*")
# Figures measured from the clock or the machine, by the naming the benchmarks share: a reproduction reports them
# side by side and does not require them equal (``Benchmark.run_to_run``; fnmatch patterns over dotted keys).
TIMING_FIGURES = ("*_ms", "*_ms.*", "*seconds*", "*_over_*", "*per_second*", "*rss*", "*load*", "*.wall", "*_s")
_COMMAND: list[tuple[str, ...]] = []


@dataclass(frozen=True)
class Benchmark:
    """One benchmark as ``lca bench <name>`` runs it.

    ``help`` is the one-line argparse help of the subcommand (argparse expands it with ``%``, so a literal
    percent sign is written ``%%``); ``description`` is the longer text ``lca bench <name> --help`` shows.
    ``add_arguments`` adds the benchmark's options to its subparser; ``run`` takes the parsed arguments and
    returns the process exit code (0 on success, 2 for an unusable option or a missing input). A benchmark writes
    its run as a :class:`BenchmarkResult` through ``write_result``.
    """

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    run_to_run: tuple[str, ...] = TIMING_FIGURES

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"a benchmark name is lowercase letters, digits and '-', not {self.name!r}")

    def parser(self, prog: str | None = None) -> argparse.ArgumentParser:
        """A stand-alone parser with this benchmark's arguments (for tests and scripts)."""
        parser = argparse.ArgumentParser(prog=prog or f"lca bench {self.name}", description=self.description)
        self.add_arguments(parser)
        return parser


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetProvenance(_Record):
    """One file a run read. ``official`` is whether its sha256 equals a pin in a protocol's ``eval.yaml``;
    ``name`` is the registered dataset it was read as (or whose pin it matches); ``pinned_sha256`` is that
    dataset's pin (None when the dataset has none or the file is not a registered dataset)."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: str | None = None
    pinned_sha256: str | None = None
    official: bool


class Provenance(_Record):
    """What produced the figures. ``revision``/``tree_clean`` are None outside a git checkout; ``cores`` holds
    ``cpu_count`` and ``affinity`` (plus the thread pools the run used); ``load`` the load averages when the
    benchmark measured them; ``extra`` whatever else one benchmark records (its dataset load report, cache)."""

    code_version: str
    revision: str | None
    tree_clean: bool | None
    date: str
    embedder_id: str | None = None
    datasets: tuple[DatasetProvenance, ...] = ()
    seeds: dict[str, int] = Field(default_factory=dict)
    wall_seconds: float | None = None
    cores: dict[str, int | None] = Field(default_factory=dict)
    load: dict[str, Any] | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    platform: dict[str, str] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    command: tuple[str, ...] | None = None


class BenchmarkResult(_Record):
    """One benchmark run (see the module docstring)."""

    format: int = RESULT_FORMAT
    benchmark: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    metrics: dict[str, Any]
    checks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    rows: tuple[dict[str, Any], ...] = ()
    provenance: Provenance

    @property
    def all_pass(self) -> bool | None:
        """Whether every check passed; None for a benchmark without targets."""
        return all(bool(c.get("pass")) for c in self.checks.values()) if self.checks else None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, path: str | None = None) -> BenchmarkResult:
        if not isinstance(data, Mapping):
            raise RecordFormatError("a benchmark result is a JSON object", path=path)
        if data.get("format") != RESULT_FORMAT:
            raise RecordFormatError(
                f"not a benchmark result of format {RESULT_FORMAT} (format: {data.get('format')!r}); rerun the "
                "benchmark to write one",
                path=path,
                field="format",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecordFormatError.from_validation(exc, path=path) from None

    @classmethod
    def from_json(cls, text: str, *, path: str | None = None) -> BenchmarkResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"not JSON: {exc}", path=path) from None
        return cls.from_dict(data, path=path)

    @classmethod
    def read(cls, path: str | Path) -> BenchmarkResult:
        return cls.from_json(Path(path).read_text(encoding="utf-8"), path=str(path))


def write_result(result: BenchmarkResult, out: str | Path) -> str | None:
    """Write ``result`` to ``out`` (atomically). When a file was there, say so on stderr, naming the run it held;
    returns that message (None when nothing was replaced)."""
    out = Path(out)
    note = None
    if out.exists():
        note = f"note: replaced {out} (it held {_describe(out)})"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(result.to_json())
    os.chmod(tmp, 0o644)  # mkstemp's file is private; a result is not
    os.replace(tmp, out)
    if note:
        print(note, file=sys.stderr)
    return note


def _describe(path: Path) -> str:
    """The run a result file holds, in a few words, whatever its format."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "a file that is not a benchmark result"
    prov = data.get("provenance", {}) if isinstance(data, dict) else {}
    if not isinstance(prov, dict):
        prov = {}
    bench = data.get("benchmark", "an unnamed benchmark") if isinstance(data, dict) else "an unnamed benchmark"
    return f"the {bench} run of {prov.get('date', 'an unknown date')}, code {prov.get('code_version', 'unknown')}"


def code_revision(version: str | None = None) -> tuple[str | None, bool | None]:
    """The git revision and whether the tree was clean, read from ``lca.provenance.code_version()``
    (``0.1.0+g<rev>[.dirty]``); (None, None) outside a checkout."""
    if version is None:
        version = code_version()
    match = _REVISION.search(version)
    if match is None:
        return None, None
    return match["rev"], match["dirty"] is None


def pinned_datasets(registry=None) -> dict[str, str]:
    """Every dataset a protocol's ``eval.yaml`` pins, name to sha256 (the one list of official files)."""
    if registry is None:
        registry = REGISTRY
    return {d.name: d.sha256 for n in registry.available() for d in registry.metadata(n).datasets if d.sha256}


def dataset_provenance(
    path: str | Path, name: str | None = None, *, sha256: str | None = None, registry=None
) -> DatasetProvenance:
    """A dataset file's sha256 checked against the pins: ``name`` is the registered dataset the run read it as;
    without one, the file is named by the pin its sha256 matches, if any. ``sha256`` skips hashing the file
    again when the run already did."""
    sha = sha256 or file_sha256(Path(path))
    pins = pinned_datasets(registry)
    if name is None:
        name = next((n for n, pin in pins.items() if pin == sha), None)
    pinned = pins.get(name) if name else None
    return DatasetProvenance(path=str(path), sha256=sha, name=name, pinned_sha256=pinned, official=sha in pins.values())


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages the figures depend on, read without importing them."""
    out: dict[str, str | None] = {}
    for name, distributions in PACKAGES.items():
        out[name] = None
        for dist in distributions:
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def cores() -> dict[str, int | None]:
    """The machine's cores, the ones this process may use, and the thread pools already loaded libraries use
    (torch and faiss are not imported for this)."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = None
    out: dict[str, int | None] = {"cpu_count": os.cpu_count(), "affinity": affinity}
    if "torch" in sys.modules:
        out["torch_threads"] = sys.modules["torch"].get_num_threads()
    if "faiss" in sys.modules:
        out["faiss_omp_threads"] = sys.modules["faiss"].omp_get_max_threads()
    return out


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # pragma: no cover
        return None


def build_provenance(
    *,
    embedder_id: str | None = None,
    datasets: Iterable[DatasetProvenance] = (),
    seeds: Mapping[str, int] | None = None,
    wall_seconds: float | None = None,
    load: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Provenance:
    """The provenance of a run that ends now: every benchmark builds its record's provenance here."""
    version = code_version()
    revision, clean = code_revision(version)
    return Provenance(
        code_version=version,
        revision=revision,
        tree_clean=clean,
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        embedder_id=embedder_id,
        datasets=tuple(datasets),
        seeds=dict(seeds or {}),
        wall_seconds=None if wall_seconds is None else round(wall_seconds, 3),
        cores=cores(),
        load=dict(load) if load is not None else None,
        versions=package_versions(),
        platform={
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
        extra=dict(extra or {}),
        command=_COMMAND[-1] if _COMMAND else None,
    )


def record_command(argv: Iterable[str]) -> None:
    """Remember the ``lca`` command line this process runs (the CLI calls it as a command starts), so every record
    the command writes names it; each argument passes the secret detector first."""
    _COMMAND.clear()
    _COMMAND.append(("lca", *(redacted(str(arg)) for arg in argv)))


def jsonable(value: Any) -> Any:
    """A config object (dataclass, pydantic model, Path, tuple) as plain JSON values, for ``config``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
