"""What a benchmark dataset is to this project: one record, :class:`DatasetPlugin`, that every caller reads.

A dataset's plug-in sits in its eval folder (``protocols/evals/<name>/plugin.py``, exporting ``DATASET``) and
joins the table in ``protocols.evals.datasets``. It declares, in the way an MTEB task declares its metadata:

- its **files**, their sha256 pins, description, licence and citation: the folder's ``eval.yaml`` (read through
  ``protocols.evals.registry``), which ``find_data_file`` (``--data``, ``$LCA_DATA``) and the provenance of
  every result (``dataset_provenance``) already read;
- its **importer** (file -> ``ImportedSession``; the substrate's own in ``lca.importers`` for LoCoMo and
  LongMemEval) and the ``lca ingest --format NAME`` options that only it reads (:class:`Option`);
- its **loader** for the eval (file -> inspect samples and a load report);
- its **retrieval adapter** for ``lca bench retrieval`` (:class:`RetrievalAdapter`: the questions, one store's
  haystack each is asked of, the gold, a row per question with the official metrics, the summary) and how the
  bench reports it (:class:`RetrievalSpec`: the per-question rows, the metric names rows carry, the targets).

The loader and the adapter are named as ``"module:attribute"`` and imported when first used: the command line
builds its parser from this record, and the harness, inspect and the metric code stay unloaded until a run
asks for them.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from lca.importers import ImportedSession, ImportReport
from protocols.evals.data_paths import locate_data_file
from protocols.evals.registry import REPO, ProtocolMetadata, folder_metadata

TOP_IDS = 10  # the retrieved unit ids a retrieval row keeps
Targets = Mapping[str, tuple[tuple[str, ...], float]]  # check name -> (where its figure is in a summary, its floor)


@dataclass(frozen=True)
class Option:
    """One command-line option only some datasets read: ``--sample`` for LoCoMo, ``--share-sessions`` for
    LongMemEval. ``keyword`` is the importer's (or the retrieval adapter's) keyword it fills; ``kind`` is how it
    is given: ``append`` (repeatable text), ``int`` (one count, at least ``minimum`` when set), ``flag`` (on or
    off) or ``choice`` (one of ``choices``, ``default`` when not given)."""

    flag: str
    keyword: str
    help: str
    kind: Literal["append", "int", "flag", "choice"]
    choices: tuple[str, ...] = ()
    default: Any = None
    minimum: int | None = None

    @property
    def dest(self) -> str:
        """The parsed arguments' attribute: ``--share-sessions`` -> ``share_sessions``."""
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kinds: dict[str, dict[str, Any]] = {
            "append": {"action": "append"},
            "int": {"type": int},
            "flag": {"action": "store_true"},
            "choice": {"choices": list(self.choices), "default": self.default},
        }
        parser.add_argument(self.flag, help=self.help, **kinds[self.kind])

    def given(self, args: argparse.Namespace) -> bool:
        """Whether the option was given: a choice other than its default, any other option set."""
        value = getattr(args, self.dest, None)
        return value != self.default if self.kind == "choice" else bool(value)


@dataclass(frozen=True)
class RetrievalQuestion:
    """One question of a retrieval run: the haystack (``haystack``, a store's key) it is asked of, its text, when
    it is asked (``as_of``; None: when its haystack ends, ``Haystack.ends``) and the file's item it came from."""

    haystack: str
    id: str
    text: str
    item: Any = None
    as_of: datetime | None = None


@dataclass(frozen=True)
class Haystack:
    """What one store is built from: the imported sessions, the official retrieval unit of each entry id that
    is one (``unit_of``; the store's ranking of entries is read as a ranking of these units), and the moment a
    question without a date of its own is asked (``ends``)."""

    sessions: Sequence[ImportedSession]
    unit_of: Mapping[str, Any]
    ends: datetime | None = None


class RetrievalAdapter(ABC):
    """One pass of ``lca bench retrieval`` over a dataset file: built from the file (the first ``limit`` of its
    records, and the options its :class:`RetrievalSpec` declares), it gives the questions in order and, for
    each, the haystack its store is built from, the gold it is scored against, and its row; ``summary`` turns
    the rows into the run's report (the official averages, ``seconds_per_question`` and the rows under
    ``RetrievalSpec.rows``). The bench's runner builds and asks the stores; nothing here touches one."""

    @abstractmethod
    def __init__(self, path: Path, *, limit: int | None = None, **options: Any) -> None: ...

    @abstractmethod
    def questions(self) -> Sequence[RetrievalQuestion]:
        """Every question, grouped by haystack (a store is built once, at its haystack's first question)."""

    @abstractmethod
    def haystack(self, key: str) -> Haystack:
        """The haystack a store is built from for questions whose ``haystack`` is ``key``."""

    @abstractmethod
    def gold(self, question: RetrievalQuestion, haystack: Haystack) -> Any | None:
        """What the question is scored against, or None when it cannot be scored (counted, not asked)."""

    @abstractmethod
    def row(self, question: RetrievalQuestion, gold: Any, ranking: Sequence[Any], seconds: float) -> dict[str, Any]:
        """The question's row: its ids, the units ranked (``ranking``, best first), the official metrics."""

    @abstractmethod
    def summary(self, rows: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
        """The run's report over these rows (the rows so far, for a checkpoint)."""

    @staticmethod
    @abstractmethod
    def headline(report: Mapping[str, Any]) -> dict[str, float]:
        """The figures an ablation's or a grid's table compares."""

    @staticmethod
    @abstractmethod
    def table(report: Mapping[str, Any]) -> list[str]:
        """A run's figures as markdown table lines (the record's ``.md`` puts the heading and checks around)."""


@dataclass(frozen=True)
class HeldOut:
    """A grid's leave-one-group-out figure: each group of rows (``group``, a row field: a LoCoMo conversation)
    scored under the variant best on the others, by the row field ``metric``; the fitted figure is the summary's
    ``summary`` table's ``metric``. Checked as ``check`` against the floor of the run's target ``target``."""

    check: str
    target: str
    group: str
    metric: str
    summary: str


@dataclass(frozen=True)
class RetrievalSpec:
    """How ``lca bench retrieval --dataset NAME`` runs and reports a dataset. ``file`` is the ``eval.yaml``
    dataset it reads (found like every data file; its sha256 pin goes into the record's provenance);
    ``adapter`` names the :class:`RetrievalAdapter`; ``rows`` is the summary's key holding the per-question rows;
    ``metrics`` the official metrics each row carries (each a path of keys into the row); ``targets`` the checks
    a run's record carries; ``options`` what only this dataset's run reads; ``records`` what ``--limit`` counts."""

    file: str
    adapter: str
    rows: str
    metrics: tuple[tuple[str, ...], ...]
    targets: Targets
    records: str
    options: tuple[Option, ...] = ()
    held_out: HeldOut | None = None

    def adapter_class(self) -> type[RetrievalAdapter]:
        found = resolve(self.adapter)
        if not (isinstance(found, type) and issubclass(found, RetrievalAdapter)):
            raise TypeError(f"{self.adapter} is not a RetrievalAdapter")
        return found


@dataclass(frozen=True)
class DatasetPlugin:
    """One benchmark dataset. ``name`` is ``lca ingest --format NAME`` and ``lca bench retrieval --dataset NAME``
    and the eval folder ``folder`` (whose ``eval.yaml`` declares the files, their pins, the licence, the citation
    and the fixture); ``title`` is how a message names it. ``importer(path, max_entry_bytes=..., **keywords)``
    gives the sessions and the import report, ``import_options`` the ``lca ingest`` options it reads; ``loader``
    names the eval's ``(path) -> (samples, load report)``; ``retrieval`` is how ``lca bench retrieval`` runs it
    (None: not a retrieval benchmark)."""

    name: str
    title: str
    folder: Path
    importer: Callable[..., tuple[list[ImportedSession], ImportReport]]
    loader: str
    import_options: tuple[Option, ...] = ()
    retrieval: RetrievalSpec | None = None

    def __post_init__(self) -> None:
        if self.folder.name != self.name:
            raise ValueError(f"dataset '{self.name}' lives in a folder of its name, not {self.folder}")

    @property
    def metadata(self) -> ProtocolMetadata:
        """The folder's validated ``eval.yaml`` (``ProtocolMetadata``): files, pins, licence, citation, fixture."""
        return folder_metadata(self.folder)

    @property
    def fixture(self) -> Path:
        """The small hand-written file in this format the contract tests run on (``eval.yaml``'s ``fixture``)."""
        return REPO / self.metadata.fixture

    def find_file(self, dataset: str, explicit: str | Path | None = None) -> Path | None:
        """The file of one of its ``eval.yaml`` datasets: ``explicit`` (``--data``: the file or a folder holding
        it), else under ``$LCA_DATA`` or ``../shared/data`` (``protocols.evals.data_paths``)."""
        return locate_data_file(self.metadata.dataset(dataset), explicit)

    def import_file(
        self, path: Path | str, *, max_entry_bytes: int | None, options: Mapping[str, Any] | None = None
    ) -> tuple[list[ImportedSession], ImportReport]:
        """The file's sessions through the importer; ``options`` by ``Option.dest`` (the parsed arguments)."""
        given = options or {}
        keywords = {o.keyword: given[o.dest] for o in self.import_options if o.dest in given}
        return self.importer(path, max_entry_bytes=max_entry_bytes, **keywords)

    def load(self, path: Path | str):
        """The eval's samples and load report for a file in this format."""
        return resolve(self.loader)(path)


def resolve(reference: str) -> Any:
    """``"package.module:attribute"`` -> the attribute, imported now."""
    module, _, attribute = reference.partition(":")
    if not attribute:
        raise ValueError(f"'{reference}' names no attribute: write 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)


def sessions_by(sessions: Sequence[ImportedSession], key) -> dict[str, list[ImportedSession]]:
    """Imported sessions grouped by ``key(session_id)`` (a question id, a conversation's sample id), in order
    (the importer has already given a session id repeated within a haystack its own ``~N`` name)."""
    out: dict[str, list[ImportedSession]] = {}
    for session in sessions:
        out.setdefault(key(session.session_id), []).append(session)
    return out


def timing(seconds: list[float]) -> dict[str, float]:
    """A summary's ``seconds_per_question``: median, maximum and total (empty when nothing was asked)."""
    return {"median": statistics.median(seconds), "max": max(seconds), "total": sum(seconds)} if seconds else {}


def metric_value(row: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` in a row or a summary, or None where the path leads nowhere."""
    value: Any = row
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value
