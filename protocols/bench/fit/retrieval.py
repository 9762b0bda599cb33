"""The retrieval fusion weights fitted on a labelled benchmark (LoCoMo, LongMemEval), through the retrieval
bench's real stores (``protocols.bench.retrieval``): one pass ranks every question under the starting config and
keeps each candidate's parts of its score as the product's ranker computes them (``HaystackStore.parts``); the
weights are fitted per fold on the other groups' questions (``model``); a second pass ranks each held-out group
by the product's search under its fold's fitted ``RetrievalConfig``. The weights fitted are the additive ones
the starting config has on; the rest (feedback, windows, fusion) stay as they are."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lca.retrieval import RetrievalConfig
from protocols.bench.fit.model import FitError, FitSettings, LabelledQuestion, fit_weights
from protocols.bench.retrieval.config import AskedConfig
from protocols.bench.retrieval.stores import HaystackStore, QueryMemo

# the weights a score adds linearly (each times its part); the feedback rounds and windows are not among them
ADDITIVE_WEIGHTS = (
    "dense_weight",
    "bm25_weight",
    "context_weight",
    "window_key_weight",
    "phrase_weight",
    "anchor_weight",
    "question_weight",
    "reply_weight",
    "when_weight",
    "now_weight",
    "speaker_weight",
)
KEPT_IRRELEVANT = 100  # irrelevant candidates kept per question (the defaults' top ones): more than a fit reads


@dataclass(frozen=True)
class Target:
    """A dataset's held-out figure: its name, how its groups are folded, each row's value (None: not scored)."""

    metric: str
    folds: str
    value: Callable[[Mapping[str, Any]], float | None]


def _longmemeval_value(row: Mapping[str, Any]) -> float | None:
    """Session recall_any@5 under the strict convention (abstention and questions without gold dropped)."""
    if "_abs" in row["question_id"] or not row["has_gold"]:
        return None
    return float(row["metrics"]["session"]["recall_any@5"])


TARGETS = {
    "locomo": Target("recall@5", "leave-one-out", lambda row: float(row["recall@5"])),
    "longmemeval": Target("session recall_any@5 (strict)", "grouped", _longmemeval_value),
}


def fitted_names(config: RetrievalConfig) -> list[str]:
    """The weights a fit from ``config`` varies: the additive ones it has on (dense first: the scale)."""
    if config.fusion != "z":
        raise FitError(f"the fit weighs the z fusion's parts; the config's fusion is {config.fusion!r}")
    return [name for name in ADDITIVE_WEIGHTS if getattr(config, name)]


def with_weights(config: RetrievalConfig, weights: Mapping[str, float]) -> RetrievalConfig:
    """``config`` with these weights, each checked as ``--set`` checks it."""
    return config.with_overrides([f"{name}={value}" for name, value in weights.items()], flag="lca fit")


Ranked = tuple[list[str], list[dict[str, float] | None]]  # entry ids best first; each one's parts (None: unscored)


class Kind:
    """What a fit varies and how a store ranks by it: the retrieval config's weights (``hybrid``) here, recall's
    resonance weights in ``protocols.bench.fit.recall`` (``resonance``)."""

    name = "retrieval"
    retriever = "hybrid"
    anchor = "dense_weight"

    def __init__(self, start: AskedConfig) -> None:
        self.start = start
        self.names = fitted_names(start.retrieval)

    @property
    def defaults(self) -> dict[str, float]:
        return {name: float(getattr(self.start.retrieval, name)) for name in self.names}

    def upper(self) -> dict[str, float]:
        return {}

    def asked(self, weights: Mapping[str, float]) -> AskedConfig:
        return AskedConfig(with_weights(self.start.retrieval, weights), self.start.recall)

    def rank(self, store: HaystackStore, text: str, as_of) -> Ranked:
        entries, parts = store.parts(text, as_of=as_of, config=self.start.retrieval)
        return entries, list(parts)

    def written(self, weights: Mapping[str, float]) -> dict[str, Any]:
        """The file's body: every field of the RetrievalConfig."""
        return self.asked(weights).retrieval.to_dict()


def _is_gold(gold: Any, unit: Any) -> bool:
    units = getattr(gold, "ids", None)  # LongMemEval's Units: positions into its ids; LoCoMo: a set of ids
    return units[unit] in gold.gold if units is not None else unit in gold


@dataclass
class Collected:
    """Pass one: each question's labelled candidates, its row under the starting config, its group."""

    questions: list[LabelledQuestion]
    rows: dict[str, dict[str, Any]]
    group_of: dict[str, str]


def collect(kind: Kind, plugin, path: Path, *, embedder, limit, progress, workdir: Path, **options) -> Collected:
    """Every question of the file ranked by the product under the starting config, with its candidates' parts."""
    adapter = plugin.retrieval.adapter_class()(path, limit=limit, **options)
    memo = QueryMemo(embedder)
    out = Collected([], {}, {})
    store: HaystackStore | None = None
    key = None
    try:
        for question in progress(adapter.questions()):
            if question.haystack != key:
                if store is not None:
                    store.close()
                haystack = adapter.haystack(question.haystack)
                store = HaystackStore(workdir / plugin.name, haystack.sessions, memo, config=kind.start.retrieval)
                key = question.haystack
            assert store is not None  # built above for the question's haystack
            gold = adapter.gold(question, haystack)
            if gold is None:
                continue
            started = time.perf_counter()
            entries, parts = kind.rank(store, question.text, question.as_of or haystack.ends)
            seconds = time.perf_counter() - started
            ranked = [(haystack.unit_of[e], p) for e, p in zip(entries, parts, strict=True) if e in haystack.unit_of]
            kept = [(unit, p) for unit, p in ranked if p is not None]
            relevant = np.array([_is_gold(gold, unit) for unit, _ in kept], dtype=bool)
            keep = relevant | (np.cumsum(~relevant) <= KEPT_IRRELEVANT)
            matrix = np.array([[p.get(n, 0.0) for n in kind.names] for _, p in kept], dtype=np.float64)
            matrix = matrix.reshape(-1, len(kind.names))
            out.questions.append(LabelledQuestion(question.id, question.haystack, matrix[keep], relevant[keep]))
            out.rows[question.id] = adapter.row(question, gold, [unit for unit, _ in ranked], seconds)
            out.group_of[question.id] = question.haystack
    finally:
        if store is not None:
            store.close()
    return out


def fold_weights(
    kind: Kind, collected: Collected, folds: list[tuple[list[str], list[str]]], settings: FitSettings
) -> list[dict[str, float]]:
    """Each fold's weights, fitted on its training groups' questions only."""
    out = []
    for train, _ in folds:
        chosen = set(train)
        questions = [q for q in collected.questions if q.group in chosen]
        out.append(fit_weights(questions, kind.names, kind.defaults, settings, upper=kind.upper()))
    return out


def held_out_rows(
    kind: Kind,
    plugin,
    path: Path,
    fold_of: Mapping[str, int],
    weights: list[dict[str, float]],
    *,
    embedder,
    limit,
    progress,
    workdir: Path,
    **options,
) -> dict[str, dict[str, Any]]:
    """Each question's row ranked by the product under its own group's fold weights (never trained on it)."""
    from protocols.bench.retrieval.runners import run_dataset

    asked = {f"fold {i}": kind.asked(w) for i, w in enumerate(weights)}
    reports = run_dataset(
        plugin,
        path,
        kind.retriever,
        embedder=embedder,
        limit=limit,
        progress=progress,
        workdir=workdir,
        configs=asked,
        asks=lambda key: {f"fold {fold_of.get(key)}"},
        **options,
    )
    rows_key = plugin.retrieval.rows
    return {row["question_id"]: row for report in reports.values() for row in report[rows_key]}
