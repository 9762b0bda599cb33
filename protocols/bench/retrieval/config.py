"""What a retrieval run asks the store: the retrievers, each dataset's ``RetrievalConfig`` (a file beside
that benchmark's task, ``protocols/evals/<dataset>/retrieval.yaml``; the store's defaults where there is
none), recall's settings for ``resonance`` and a grid of variants. The command line reads this module to
check ``--set`` before any model loads.

A name in ``--set``, ``--grid`` or an ablation is a ``RetrievalConfig`` field (``bm25_weight``), a resonance
weight (``weights.temporal``) or another ``RecallConfig`` field (``recall.mmr_lambda``); the last two act
only where recall ranks, so only ``--retriever resonance`` takes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from itertools import product
from typing import Any

from lca.errors import RecordFormatError
from lca.params import ParameterError, coerce, split_assignment
from lca.retrieval.config import INDEX_FIELDS, RETRIEVAL_FIELDS, RetrievalConfig
from protocols.evals.datasets import dataset_plugin
from protocols.evals.registry import folder_recall_weights, folder_retrieval

RETRIEVERS = ("bm25", "dense", "hybrid", "resonance")


def dataset_config(dataset: str) -> RetrievalConfig:
    """The dataset's retrieval settings, chosen on its dev split: its task folder's ``retrieval.yaml``, which
    the task's substrate conditions rank by too (the store's defaults where no file is)."""
    return folder_retrieval(dataset_plugin(dataset).folder) or RetrievalConfig()


def dataset_recall(dataset: str) -> dict[str, float]:
    """The dataset's resonance weights, as ``weights.TERM`` assignments: its task folder's ``recall-weights.yaml``,
    which the task's full-lca condition recalls by too (recall's defaults where no file is)."""
    return {f"weights.{t}": value for t, value in folder_recall_weights(dataset_plugin(dataset).folder).items()}


def recall_fields() -> dict[str, str]:
    """The recall names a resonance run may set, typed: ``weights.TERM`` and ``recall.FIELD`` for every plain
    ``RecallConfig`` field (the nested weights, authority table and retrieval settings have their own names)."""
    from lca.recall.config import TERMS, RecallConfig

    plain = {
        f"recall.{f.name}": type(f.default).__name__
        for f in fields(RecallConfig)
        if f.default is not MISSING and isinstance(f.default, (bool, int, float, str))
    }
    return plain | {f"weights.{term}": "float" for term in TERMS}


@dataclass(frozen=True)
class AskedConfig:
    """What one pass asks each store: the ranking's ``RetrievalConfig`` and, for ``resonance``, the
    ``RecallConfig`` changes (``weights.TERM`` / ``recall.FIELD`` -> value) over the bench's recall settings."""

    retrieval: RetrievalConfig
    recall: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = self.retrieval.to_dict()
        if self.recall:
            out["recall"] = dict(self.recall)
        return out

    def with_values(self, values: Mapping[str, Any], *, flag: str, item: str) -> AskedConfig:
        """These typed values set over this config (each name already checked by ``split_names``)."""
        ranking = {n: v for n, v in values.items() if n in RETRIEVAL_FIELDS}
        recall = {**self.recall, **{n: v for n, v in values.items() if n not in RETRIEVAL_FIELDS}}
        try:
            asked = AskedConfig(replace(self.retrieval, **ranking), recall)
            asked.recall_config(recall_base())  # a value recall refuses fails now, naming the item
        except ValueError as exc:
            raise ParameterError(flag, item, str(exc)) from None
        return asked

    def recall_config(self, base):
        """``base`` (a RecallConfig) with this config's recall changes and its ranking settings."""
        weights = {n.split(".", 1)[1]: v for n, v in self.recall.items() if n.startswith("weights.")}
        plain = {n.split(".", 1)[1]: v for n, v in self.recall.items() if n.startswith("recall.")}
        try:
            return replace(base, **plain, weights=base.weights.with_overrides(weights), retrieval=self.retrieval)
        except RecordFormatError as exc:
            raise ValueError(f"{exc.field}: {exc.reason}" if exc.field else exc.reason) from None

    def ablations(self, *, resonance: bool = False) -> dict[str, AskedConfig]:
        """One variant per part that is on, with it off: the ranking's parts and, where recall ranks
        (``resonance``), each resonance term besides similarity whose weight is not zero."""
        variants = {name: AskedConfig(variant, self.recall) for name, variant in self.retrieval.ablations().items()}
        if resonance:
            weights = self.recall_config(recall_base()).weights
            for term, value in vars(weights).items():
                if term != "similarity" and value:
                    variants[f"weights.{term}=0"] = AskedConfig(self.retrieval, {**self.recall, f"weights.{term}": 0.0})
        return variants


def recall_config_for(chunks: int):
    """Recall as the benchmark asks it of a store of ``chunks`` chunks: every candidate of a pool of up to 100
    ranked and kept (no floor, no quota, no budget, no MMR), so the ranking scored is recall's resonance order."""
    from lca.recall import RecallConfig

    pool = max(1, min(chunks, 100))
    return RecallConfig(
        pool=pool,
        floor=-1.0,
        floor_mode="absolute",
        date_anchor=False,
        memory_quota=0,
        transcript_quota=pool,
        token_budget=10**7,
        item_char_cap=10**6,
        mmr_lambda=1.0,
    )


def recall_base():
    """The RecallConfig a resonance run starts from for a large store."""
    return recall_config_for(100)


def split_names(names: Sequence[str], *, resonance: bool, flag: str, items: Sequence[str]) -> dict[str, str]:
    """The type of each name, refusing a name nothing has, and a recall name outside a resonance run."""
    recall = recall_fields()
    known = {**RETRIEVAL_FIELDS, **recall}
    out = {}
    for name, item in zip(names, items, strict=True):
        if name not in known:
            hint = f"; a resonance weight is set as weights.{name}" if f"weights.{name}" in recall else ""
            raise ParameterError(flag, item, f"unknown name '{name}'; known: {', '.join(sorted(known))}{hint}")
        if name in recall and not resonance:
            raise ParameterError(flag, item, f"'{name}' sets recall, which only --retriever resonance ranks by")
        out[name] = known[name]
    return out


def with_assignments(asked: AskedConfig, items: Sequence[str] | None, *, resonance: bool, flag: str = "--set"):
    """``name=value`` items over ``asked``, in order; a name given twice is refused."""
    pairs = [split_assignment(item, flag=flag) for item in items or ()]
    types = split_names([n for n, _ in pairs], resonance=resonance, flag=flag, items=list(items or ()))
    seen: set[str] = set()
    for item, (name, raw) in zip(items or (), pairs, strict=True):
        if name in seen:
            raise ParameterError(flag, item, f"'{name}' is given twice")
        seen.add(name)
        asked = asked.with_values({name: coerce(raw, types[name], flag=flag, item=item)}, flag=flag, item=item)
    return asked


def grid_variants(
    config: AskedConfig | RetrievalConfig, items: Sequence[str] | None, *, resonance: bool = False
) -> dict[str, AskedConfig]:
    """``--grid name=v1,v2`` items: every combination of the listed values over ``config``, by name."""
    asked = config if isinstance(config, AskedConfig) else AskedConfig(config)
    axes: list[tuple[str, list]] = []
    for item in items or ():
        name, raw = split_assignment(item, flag="--grid")
        if name in INDEX_FIELDS:  # one store is built per haystack; a grid varies only how it is asked
            raise ParameterError("--grid", item, f"{name} is how the stores are built; run once per value instead")
        kind = split_names([name], resonance=resonance, flag="--grid", items=[item])[name]
        values = [coerce(v.strip(), kind, flag="--grid", item=item) for v in raw.split(",")]
        axes.append((name, values))
    variants: dict[str, AskedConfig] = {}
    for combination in product(*(values for _, values in axes)):
        changes = {name: value for (name, _), value in zip(axes, combination)}
        label = ",".join(f"{n}={v}" for n, v in changes.items())
        variants[label] = asked.with_values(changes, flag="--grid", item=label)
    return variants
