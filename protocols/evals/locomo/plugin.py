"""LoCoMo as a dataset plug-in (``protocols.evals.dataset_plugin``): its files are in ``eval.yaml``, its importer
is the substrate's (``lca.importers.import_locomo``), its loader ``dataset.py``, its retrieval adapter
``retrieval.py``; this record is what ``lca ingest --format locomo`` and ``lca bench retrieval --dataset
locomo`` read."""

from __future__ import annotations

from pathlib import Path

from lca.importers import import_locomo
from protocols.evals.dataset_plugin import DatasetPlugin, HeldOut, Option, RetrievalSpec

KS = (1, 5, 10, 25)  # the depths of evidence recall@k
TARGET = "recall@5 (dialog turns)"

DATASET = DatasetPlugin(
    name="locomo",
    title="LoCoMo",
    folder=Path(__file__).resolve().parent,
    importer=import_locomo,
    loader="protocols.evals.locomo.dataset:locomo_samples",
    import_options=(
        Option("--sample", "sample_ids", "LoCoMo sample_id to import (repeatable; default all)", "append"),
    ),
    retrieval=RetrievalSpec(
        file="locomo",
        adapter="protocols.evals.locomo.retrieval:LocomoRetrieval",
        rows="per_item",
        metrics=tuple((f"recall@{k}",) for k in KS),
        targets={TARGET: (("overall", "recall@5"), 0.78)},  # the target
        records="conversations",
        held_out=HeldOut(
            check=f"{TARGET}, leave one conversation out",
            target=TARGET,
            group="sample_id",
            metric="recall@5",
            summary="overall",
        ),
    ),
)
