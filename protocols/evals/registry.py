"""The protocols, found by their folders: a folder holding an ``eval.yaml`` is a protocol.

Adding a protocol touches only its folder: ``eval.yaml`` (validated by :class:`ProtocolMetadata`,
unknown fields refused naming the file and field), ``README.md`` with the required sections, the
task module the metadata names, and ``dataset.py``. Nothing else lists protocols or their data
files: the CLI, ``protocols.evals.data_paths`` and the contract test all ask this registry.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lca.errors import LCAError, RecordFormatError
from lca.retrieval import RetrievalConfig

EVALS_ROOT = Path(__file__).resolve().parent
REPO = EVALS_ROOT.parents[1]
METADATA_FILE = "eval.yaml"
README_FILE = "README.md"
DATASET_MODULE = "dataset.py"
RETRIEVAL_FILE = "retrieval.yaml"  # optional: the ranking a benchmark's stores use, chosen on its dev split
# optional: the resonance weights its full-lca recall uses, chosen on its dev split (a store's recall.yaml, a
# whole RecallConfig, is another schema)
RECALL_WEIGHTS_FILE = "recall-weights.yaml"
README_SECTIONS = ("What it measures", "How to run it", "Parameters", "Measures", "Caveats")
_SHA256 = r"^[0-9a-f]{64}$"
_NAME = r"^[a-z][a-z0-9_-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetFile(_Strict):
    """One file a protocol reads. ``file`` is its known name (or a glob pattern) under the data root
    (``--data``, ``$LCA_DATA``, ``../shared/data``) or, with ``location: repository``, under the
    repository; ``sha256`` pins the official file where one exists."""

    name: str = Field(pattern=_NAME)
    file: str = Field(min_length=1)
    location: Literal["data_root", "repository"] = "data_root"
    sha256: str | None = Field(default=None, pattern=_SHA256)
    description: str = Field(min_length=1)
    source: str = ""
    licence: str = ""


class Measure(_Strict):
    """One reported measure: the scorer that produces it and how it is computed or judged (``judged``: by a model
    the task calls, such as a grader role, and reported in the log like a computed one). A ``rated`` measure is
    rated by a study's rater panel after the run, not reported by the task: ``scorer`` is the scorer that prepares
    its items (what a rater is shown, ``protocols.harness.rating_views``), and it carries its ``rubric`` (the
    rating prompt a study starts from), its ``scale`` and its ``level`` of measurement, which a study's judged
    measure of that name must use (``protocols.study.rubrics``)."""

    name: str = Field(min_length=1)
    kind: Literal["computed", "judged", "rated"]
    scorer: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    rubric: str = ""
    scale: tuple[int | float | str, ...] = ()
    level: Literal["nominal", "ordinal", "interval"] | None = None

    @model_validator(mode="after")
    def _rated_fields(self) -> Measure:
        if self.kind == "rated":
            missing = [f for f in ("rubric", "scale", "level") if not getattr(self, f)]
            if missing:
                raise ValueError(f"rated measure '{self.name}' needs {', '.join(missing)}")
            if len(self.scale) < 2 or len(set(self.scale)) != len(self.scale):
                raise ValueError(f"rated measure '{self.name}': a scale of at least two distinct values")
        elif self.rubric or self.scale or self.level:
            raise ValueError(f"{self.kind} measure '{self.name}' takes no rubric, scale or level (a rated one does)")
        return self

    @property
    def reported(self) -> bool:
        """The task's log reports it (computed and judged); a rated measure is rated after the run."""
        return self.kind != "rated"


class ProtocolMetadata(_Strict):
    """An ``eval.yaml``. ``task`` is ``FILE.py@FUNCTION`` (what ``inspect eval`` takes); ``datasets[0]``
    is the default; ``data_parameter`` is the task parameter that selects a dataset file; ``fixture``
    is a small hand-written file in the same format (repository-relative) the contract test runs on;
    ``config`` holds the task's default parameters."""

    name: str = Field(pattern=_NAME)
    title: str = Field(min_length=1)
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    description: str = Field(min_length=1)
    task: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.py@[A-Za-z_][A-Za-z0-9_]*$")
    main_score: str = Field(min_length=1)
    datasets: tuple[DatasetFile, ...] = Field(min_length=1)
    data_parameter: str = Field(min_length=1)
    fixture: str = Field(min_length=1)
    config: dict[str, Any]
    measures: tuple[Measure, ...] = Field(min_length=1)
    citation: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ProtocolMetadata:
        names = [m.name for m in self.measures]
        if len(set(names)) != len(names):
            raise ValueError("measure names repeat")
        if self.main_score not in names:
            raise ValueError(f"main_score '{self.main_score}' is not among the measures: {', '.join(names)}")
        datasets = [d.name for d in self.datasets]
        if len(set(datasets)) != len(datasets):
            raise ValueError("dataset names repeat")
        if self.data_parameter not in self.config:
            raise ValueError(f"data_parameter '{self.data_parameter}' is not a config parameter")
        return self

    @property
    def task_file(self) -> str:
        return self.task.partition("@")[0]

    @property
    def task_function(self) -> str:
        return self.task.partition("@")[2]

    def dataset(self, name: str) -> DatasetFile:
        for dataset in self.datasets:
            if dataset.name == name:
                return dataset
        raise LCAError(
            f"protocol '{self.name}' has no dataset '{name}'; known: {', '.join(d.name for d in self.datasets)}"
        )


@lru_cache(maxsize=64)
def _read_metadata(path: Path, mtime_ns: int) -> ProtocolMetadata:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RecordFormatError(f"not valid YAML: {exc}", path=str(path)) from None
    if not isinstance(data, dict):
        raise RecordFormatError("expected a mapping of fields", path=str(path))
    try:
        metadata = ProtocolMetadata.model_validate(data)
    except ValidationError as exc:
        raise RecordFormatError.from_validation(exc, path=str(path)) from None
    if metadata.name != path.parent.name:
        raise RecordFormatError(
            f"name '{metadata.name}' differs from its folder '{path.parent.name}'", path=str(path), field="name"
        )
    return metadata


def folder_metadata(path: str | Path) -> ProtocolMetadata:
    """The validated ``eval.yaml`` of a protocol folder (or of the folder holding ``path``, so a task
    module can call ``folder_metadata(__file__)``)."""
    path = Path(path).resolve()
    folder = path if path.is_dir() else path.parent
    file = folder / METADATA_FILE
    if not file.is_file():
        raise LCAError(f"{folder}: not a protocol folder (no {METADATA_FILE})")
    return _read_metadata(file, file.stat().st_mtime_ns)


def folder_retrieval(path: str | Path) -> RetrievalConfig | None:
    """The protocol folder's ``retrieval.yaml`` (of the folder holding ``path``, as ``folder_metadata``), or
    None where it has none: the one file both the protocol's task and ``lca bench retrieval`` rank by."""
    path = Path(path).resolve()
    file = (path if path.is_dir() else path.parent) / RETRIEVAL_FILE
    return RetrievalConfig.from_file(file) if file.is_file() else None


def folder_recall_weights(path: str | Path) -> dict[str, float]:
    """The protocol folder's ``recall-weights.yaml`` (``weights: {TERM: value}``), checked as
    ``ResonanceWeights`` checks them; empty where the folder has none. The one file both the protocol's full-lca
    condition and ``lca bench retrieval --retriever resonance`` recall by."""
    from lca.recall.config import ResonanceWeights  # loads numpy: not for the bench listing

    path = Path(path).resolve()
    file = (path if path.is_dir() else path.parent) / RECALL_WEIGHTS_FILE
    if not file.is_file():
        return {}
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RecordFormatError(f"not valid YAML: {exc}", path=str(file)) from None
    if not isinstance(data, dict) or set(data) - {"weights"} or not isinstance(data.get("weights", {}), dict):
        raise RecordFormatError("expected only a 'weights' mapping of resonance terms", path=str(file))
    weights = dict(data.get("weights") or {})
    ResonanceWeights.from_mapping(weights, source=str(file))
    return {str(term): float(value) for term, value in weights.items()}


class ProtocolRegistry:
    """The protocol folders under one root. The default root is this package, whose task modules are
    imported as ``protocols.evals.<name>.<module>``; any other root (a test's tmp_path) is read from
    files."""

    def __init__(self, root: str | Path = EVALS_ROOT, *, package: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.package = package if package is not None else ("protocols.evals" if self.root == EVALS_ROOT else None)

    def folders(self) -> dict[str, Path]:
        return {p.parent.name: p.parent for p in sorted(self.root.glob(f"*/{METADATA_FILE}"))}

    def available(self) -> list[str]:
        return sorted(self.folders())

    def folder(self, name: str) -> Path:
        folders = self.folders()
        if name not in folders:
            raise LCAError(f"unknown protocol '{name}'; known: {', '.join(sorted(folders))}")
        return folders[name]

    def metadata(self, name: str) -> ProtocolMetadata:
        return folder_metadata(self.folder(name))

    def task(self, name: str):
        metadata = self.metadata(name)
        folder = self.folder(name)
        module_name = metadata.task_file.removesuffix(".py")
        if self.package:
            module = importlib.import_module(f"{self.package}.{name}.{module_name}")
        else:
            spec = importlib.util.spec_from_file_location(
                f"_lca_protocol_{name}_{module_name}", folder / metadata.task_file
            )
            if spec is None or spec.loader is None:
                raise LCAError(f"{folder / metadata.task_file}: cannot be imported")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        try:
            return getattr(module, metadata.task_function)
        except AttributeError:
            raise LCAError(f"{folder / metadata.task_file} defines no task '{metadata.task_function}'") from None

    def dataset_file(self, dataset: str) -> DatasetFile:
        """A dataset by its name, across every protocol (names are unique)."""
        found = {d.name: d for n in self.available() for d in self.metadata(n).datasets}
        if dataset not in found:
            raise LCAError(f"unknown dataset '{dataset}'; known: {', '.join(sorted(found))}")
        return found[dataset]

    def problems(self, name: str) -> list[str]:
        """What breaks the protocol contract in a folder (empty when it holds): the metadata, the
        required files, the README's sections, the task function and the declared fixture."""
        folder = self.folder(name)
        try:
            metadata = folder_metadata(folder)
        except LCAError as exc:
            return [str(exc)]
        out: list[str] = []
        readme = folder / README_FILE
        if not readme.is_file():
            out.append(f"{folder}: missing {README_FILE}")
        else:
            headings = {h.strip().lower() for h in re.findall(r"^#{2,3}\s+(.+)$", readme.read_text(), re.M)}
            out += [f"{readme}: missing section '## {s}'" for s in README_SECTIONS if s.lower() not in headings]
        if self.package and not (folder / "__init__.py").is_file():  # imported (and packaged) as a package
            out.append(f"{folder}: missing __init__.py")
        if not (folder / DATASET_MODULE).is_file():
            out.append(f"{folder}: missing {DATASET_MODULE}")
        task_file = folder / metadata.task_file
        if not task_file.is_file():
            out.append(f"{folder}: missing {metadata.task_file} (the task module eval.yaml names)")
        elif metadata.task_function not in _task_functions(task_file):
            out.append(f"{task_file}: no @task function '{metadata.task_function}'")
        if not (REPO / metadata.fixture).is_file():  # an absolute fixture path stays itself
            out.append(f"{folder / METADATA_FILE}: fixture {metadata.fixture} does not exist")
        return out


def _task_functions(path: Path) -> set[str]:
    """Names of the functions a module decorates with ``@task`` (read, not imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (isinstance(target, ast.Name) and target.id == "task") or (
                    isinstance(target, ast.Attribute) and target.attr == "task"
                ):
                    out.add(node.name)
    return out


REGISTRY = ProtocolRegistry()


def available_protocols() -> list[str]:
    """The registered protocol names, sorted."""
    return REGISTRY.available()


def protocol_metadata(name: str) -> ProtocolMetadata:
    """A protocol's validated ``eval.yaml``; unknown names are refused with the list."""
    return REGISTRY.metadata(name)


def protocol_task(name: str):
    """The @task function of a protocol by name; unknown names are refused with the list."""
    return REGISTRY.task(name)


def dataset_file(name: str) -> DatasetFile:
    """A dataset file's declaration by its name (``locomo``, ``longmemeval_s_dev``, ...)."""
    return REGISTRY.dataset_file(name)
