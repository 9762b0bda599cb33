"""One retrieval run over a dataset file, through real stores: the dataset's retrieval adapter
(``protocols.evals.dataset_plugin.RetrievalAdapter``, registered in ``protocols.evals.datasets``) gives the
questions, the haystack each is asked of and how it is scored; this builds one store per haystack and asks it
under every configuration given (the run's, and an ablation's or a grid's variants), so a variant costs a search,
not a rebuild.

``progress`` wraps the questions (a bar counts questions, not stores). ``checkpoint``, when given, is called
after each store is done with ``(snapshot, done, total)``: ``snapshot()`` builds the reports of the stores
done so far (only when called: a caller keeps the latest and writes it when it likes), ``done`` and ``total``
count stores, so an interrupted run can keep what finished."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from protocols.bench.retrieval.config import AskedConfig
from protocols.bench.retrieval.stores import HaystackStore, QueryMemo
from protocols.evals.dataset_plugin import DatasetPlugin, RetrievalAdapter
from protocols.evals.datasets import dataset_plugin, retrieval_spec

Reports = dict[str, dict[str, Any]]  # one report per configuration name
Checkpoint = Callable[[Callable[[], Reports], int, int], None]


def run_dataset(
    dataset: str | DatasetPlugin,
    path: Path,
    retriever: str,
    *,
    embedder,
    limit: int | None,
    progress,
    workdir: Path,
    configs: Mapping[str, AskedConfig],
    checkpoint: Checkpoint | None = None,
    asks: Callable[[str], Collection[str]] | None = None,
    **options: Any,
) -> Reports:
    """One report per configuration name over the first ``limit`` records of ``path``; ``options`` are the
    dataset's own (``RetrievalSpec.options``, such as LongMemEval's ``roles``). Each haystack's store is built
    when its first question comes and closed after its last; a question asked of it is ranked under every
    configuration, at its own date or, without one, when its haystack ends; with ``asks``, only under the
    configurations ``asks(haystack key)`` names (``lca fit``: each haystack under its own fold's weights)."""
    plugin = dataset_plugin(dataset) if isinstance(dataset, str) else dataset
    spec = plugin.retrieval if plugin.retrieval is not None else retrieval_spec(plugin.name)  # refused, named
    adapter: RetrievalAdapter = spec.adapter_class()(path, limit=limit, **options)
    embedder = QueryMemo(embedder)
    questions = list(adapter.questions())
    stores = sum(1 for i, q in enumerate(questions) if i == 0 or questions[i - 1].haystack != q.haystack)
    first = next(iter(configs.values())).retrieval
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    store: HaystackStore | None = None
    done = 0
    try:
        for index, question in enumerate(progress(questions)):
            if store is None:
                haystack = adapter.haystack(question.haystack)
                store = HaystackStore(workdir / plugin.name, haystack.sessions, embedder, config=first)
            gold = adapter.gold(question, haystack)
            if gold is not None:
                as_of = question.as_of or haystack.ends
                for name, config in configs.items():
                    if asks is not None and name not in asks(question.haystack):
                        continue
                    started = time.perf_counter()
                    entries = store.rank(question.text, retriever, as_of=as_of, config=config)
                    ranking = [haystack.unit_of[e] for e in entries if e in haystack.unit_of]
                    seconds[name].append(time.perf_counter() - started)
                    rows[name].append(adapter.row(question, gold, ranking, seconds[name][-1]))
            if index + 1 == len(questions) or questions[index + 1].haystack != question.haystack:  # its last
                store.close()
                store = None
                done += 1
                if checkpoint is not None:
                    checkpoint(_finished(rows, seconds, adapter), done, stores)
    finally:
        if store is not None:
            store.close()
    return {name: adapter.summary(rows[name], seconds[name]) for name in configs}


def _finished(
    rows: Mapping[str, list[dict[str, Any]]], seconds: Mapping[str, list[float]], adapter: RetrievalAdapter
) -> Callable[[], Reports]:
    """The reports over the rows each configuration holds now, built only when called (rows added later,
    by a store still being asked, are left out)."""
    counts = {name: len(rows[name]) for name in rows}
    return lambda: {
        name: adapter.summary(rows[name][: counts[name]], list(seconds[name][: counts[name]])) for name in rows
    }
