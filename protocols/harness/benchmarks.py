"""What every benchmark dataset shares: the load report, histories loaded by reference, a table view.

Each benchmark's own sample builder lives in its protocol folder (``protocols/evals/<name>/dataset.py``).
A sample's metadata names its history (``history_ref``: the loader, file, sha256, question or
conversation) rather than embedding it: a LongMemEval_S haystack is about 115k tokens, and a log that
copied one per sample would be hundreds of megabytes. The setup solver calls :func:`load_history`,
which imports the loader the reference names, so the harness knows no dataset by name. Every quirk
a loader repairs or cannot parse is counted in :class:`LoadReport`.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoadReport:
    """What loading repaired, could not parse, or left out by a declared slice, with counts."""

    file: str
    sha256: str
    questions: int = 0
    repaired: Counter = field(default_factory=Counter)
    unparsed: list[str] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "sha256": self.sha256,
            "questions": self.questions,
            "repaired": dict(self.repaired),
            "unparsed": self.unparsed[:50],
            "unparsed_count": len(self.unparsed),
            "left_out": dict(self.left_out),
        }


def history_ref(loader: str, file: str, sha256: str, ident: str) -> dict[str, str]:
    """A sample's pointer to its history: ``loader`` is ``module:function``, called with this ref."""
    return {"loader": loader, "file": file, "sha256": sha256, "id": ident}


def load_history(ref: dict[str, Any]) -> dict[str, Any]:
    """The history a ``history_ref`` names, in the shape the setup solver replays
    (``{"identity": {...}, "sessions": [{"id", "entries"}]}``), by the loader the ref names."""
    module, sep, function = str(ref.get("loader", "")).partition(":")
    if not sep or not module or not function:
        raise ValueError(f"history_ref names no loader 'module:function': {ref!r}")
    return getattr(importlib.import_module(module), function)(ref)


def as_hf_dataset(samples):
    """The same samples as a ``datasets.Dataset`` for analysis (question, answer and flat metadata)."""
    import datasets

    rows = [
        {
            "id": str(s.id),
            "question": s.input,
            "answer": s.target,
            **{k: v for k, v in (s.metadata or {}).items() if k not in ("gold", "history_ref")},
            "gold_evidence": list((s.metadata or {}).get("gold", {}).get("evidence", [])),
        }
        for s in samples
    ]
    return datasets.Dataset.from_list(rows)
