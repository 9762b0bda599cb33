"""LongMemEval as a dataset plug-in (``protocols.evals.dataset_plugin``): its files are in ``eval.yaml``, its
importer is the substrate's (``lca.importers.import_longmemeval``), its loader ``dataset.py``, its retrieval
adapter ``retrieval.py`` scored by ``retrieval_metrics``; this record is what ``lca ingest --format
longmemeval`` and ``lca bench retrieval --dataset longmemeval`` read."""

from __future__ import annotations

from pathlib import Path

from lca.importers import import_longmemeval
from protocols.evals.dataset_plugin import DatasetPlugin, Option, RetrievalSpec
from protocols.evals.longmemeval.retrieval_metrics import KS

DATASET = DatasetPlugin(
    name="longmemeval",
    title="LongMemEval",
    folder=Path(__file__).resolve().parent,
    importer=import_longmemeval,
    loader="protocols.evals.longmemeval.dataset:longmemeval_samples",
    import_options=(
        Option("--question", "question_ids", "LongMemEval question_id to import (repeatable)", "append"),
        Option("--limit", "limit", "LongMemEval: import the first N questions", "int", minimum=1),
        Option(
            "--share-sessions",
            "share_sessions",
            "LongMemEval: import each distinct haystack session once, not once per question",
            "flag",
        ),
    ),
    retrieval=RetrievalSpec(
        file="longmemeval_s_dev",
        adapter="protocols.evals.longmemeval.retrieval:LongMemEvalRetrieval",
        rows="per_question",
        metrics=tuple(
            ("metrics", level, f"{name}@{k}")
            for level in ("session", "turn")
            for name in ("recall_any", "recall_all", "ndcg_any")
            for k in KS
        ),
        targets={  # the targets
            "session recall_any@5 (strict)": (("strict", "session", "recall_any@5"), 0.97),
            "session recall_all@5 (lenient)": (("lenient", "session", "recall_all@5"), 0.88),
        },
        records="questions",
        options=(
            Option(
                "--roles",
                "roles",
                "LongMemEval: build each store from every turn (default, as an agent's store holds them) or from the "
                "user turns alone (the official retrieval units)",
                "choice",
                choices=("all", "user"),
                default="all",
            ),
        ),
    ),
)
