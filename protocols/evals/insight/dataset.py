"""The insight protocol's samples: one per corpus of a planted-corpus file (``card.py`` writes it), the corpus's
records in metadata (read back by the solver), its name as the id and its gold counts as the target."""

from __future__ import annotations

from pathlib import Path

from lca.importers import file_sha256
from protocols.evals.insight.corpus import gold_pairs, load_corpora

REPO = Path(__file__).resolve().parents[3]
DEFAULT_CORPUS = REPO / "data" / "insight" / "insight-planted-v1.jsonl"
FIXTURE = REPO / "data" / "insight" / "insight-planted-fixture.jsonl"


def insight_samples(path: Path | str, *, limit: int | None = None):
    """The samples, the file's sha256 and the task metadata (the task's ``load``)."""
    from inspect_ai.dataset import Sample

    corpora = list(load_corpora(path).items())[:limit]
    samples = [
        Sample(
            id=name,
            input=f"Run one integration cycle over the {len(records)} records of planted corpus '{name}' and surface "
            "the records from different domains that share a skeleton.",
            target=str(len(gold_pairs(records))),
            metadata={"corpus": name, "records": [r.__dict__ for r in records]},
        )
        for name, records in corpora
    ]
    return samples, file_sha256(Path(path)), {"corpora": [name for name, _ in corpora]}
