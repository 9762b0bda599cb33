"""The benchmark datasets, one line each: every caller that knows datasets reads this table.

``lca ingest --format`` and its per-format options, ``lca bench retrieval --dataset`` and its per-dataset options,
the retrieval records' rows, targets and tables, and the data files (``find_data_file``, pinned by each
folder's ``eval.yaml``) all come from the :class:`~protocols.evals.dataset_plugin.DatasetPlugin` registered
here. Adding a dataset is its eval folder (``eval.yaml``, ``dataset.py``, ``plugin.py``, ``retrieval.py`` for
the retrieval bench), its fixture under ``data/fixtures/``, and one entry below.
"""

from __future__ import annotations

from lca.errors import LCAError
from protocols.evals.dataset_plugin import DatasetPlugin, Option, RetrievalSpec
from protocols.evals.locomo.plugin import DATASET as LOCOMO
from protocols.evals.longmemeval.plugin import DATASET as LONGMEMEVAL

DATASETS: dict[str, DatasetPlugin] = {plugin.name: plugin for plugin in (LOCOMO, LONGMEMEVAL)}


def dataset_plugin(name: str) -> DatasetPlugin:
    """A registered dataset by name; an unknown name is refused with the list."""
    if name not in DATASETS:
        raise LCAError(f"unknown dataset '{name}'; known: {', '.join(DATASETS)}")
    return DATASETS[name]


def retrieval_spec(name: str) -> RetrievalSpec:
    """How ``lca bench retrieval`` runs and reports the registered dataset of this name."""
    spec = dataset_plugin(name).retrieval
    if spec is None:
        raise LCAError(
            f"dataset '{name}' declares no retrieval adapter; retrieval datasets: {', '.join(retrieval_datasets())}"
        )
    return spec


def retrieval_datasets() -> dict[str, DatasetPlugin]:
    """The datasets ``lca bench retrieval`` runs (those that declare a retrieval adapter), in table order."""
    return {name: plugin for name, plugin in DATASETS.items() if plugin.retrieval is not None}


def options_by_flag(kind: str) -> dict[str, tuple[Option, list[DatasetPlugin]]]:
    """Each per-dataset option once (``kind``: ``import`` for ``lca ingest``, ``retrieval`` for ``lca bench
    retrieval``), with the datasets that read it. Two datasets may share an option only if they declare it alike."""
    out: dict[str, tuple[Option, list[DatasetPlugin]]] = {}
    for plugin in DATASETS.values():
        if kind == "import":
            options = plugin.import_options
        elif kind == "retrieval":
            options = plugin.retrieval.options if plugin.retrieval is not None else ()
        else:
            raise ValueError(f"kind is 'import' or 'retrieval', not {kind!r}")
        for option in options:
            if option.flag in out and out[option.flag][0] != option:
                raise LCAError(f"{option.flag} is declared differently by {plugin.name} and another dataset")
            out.setdefault(option.flag, (option, []))[1].append(plugin)
    return out
