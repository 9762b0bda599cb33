"""One retrieval run over a dataset file, through real stores: LongMemEval (session and turn recall by the
official metrics, one store per question's haystack) and LoCoMo (evidence recall@k over dialog turns, one
store per conversation). Each store is built once and asked under every configuration given (the run's,
and an ablation's or a grid's variants), so a variant costs a search, not a rebuild.

``progress`` wraps the questions (a bar counts questions, not stores). ``checkpoint``, when given, is called
after each store is done with ``(snapshot, done, total)``: ``snapshot()`` builds the reports of the stores
done so far (only when called: a caller keeps the latest and writes it when it likes), ``done`` and ``total``
count stores, so an interrupted run can keep what finished."""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from protocols.bench.retrieval.config import AskedConfig
from protocols.bench.retrieval.stores import HaystackStore, QueryMemo, sessions_by
from protocols.evals.locomo.dataset import CATEGORY_NAMES, parse_evidence_ids

TOP_IDS = 10  # retrieved unit ids kept in each per-item row
Reports = dict[str, dict[str, Any]]  # one report per configuration name
Checkpoint = Callable[[Callable[[], Reports], int, int], None]


def run_longmemeval(
    path: Path,
    retriever: str,
    *,
    embedder,
    limit: int | None,
    progress,
    workdir: Path,
    configs: Mapping[str, AskedConfig],
    roles: str = "all",
    checkpoint: Checkpoint | None = None,
) -> Reports:
    """One report per configuration name. ``roles="user"`` builds each store from the user turns alone (the
    official retrieval units; the assistant's turns are not in the store at all), ``"all"`` from every turn as
    an agent's store holds them."""
    from lca.importers import ImportedSession, import_longmemeval, load_official_json, parse_longmemeval_date
    from lca.types import EntryKind
    from protocols.evals.longmemeval.retrieval_metrics import question_units, score_ranking

    embedder = QueryMemo(embedder)
    records = load_official_json(path)
    if limit:
        records = records[:limit]
    sessions, _ = import_longmemeval(path, question_ids=[str(r["question_id"]) for r in records])
    if roles == "user":
        sessions = [
            ImportedSession(s.session_id, tuple(e for e in s.entries if e.kind is EntryKind.USER_TURN))
            for s in sessions
        ]
    by_question = sessions_by(sessions, lambda sid: sid.split(":", 2)[1])
    first = next(iter(configs.values())).retrieval
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    for done, record in enumerate(progress(records), 1):  # one question, and one store, per record
        qid = str(record["question_id"])
        units = question_units(record, "turn")
        position = {
            f"{sid}_{i + 1}": n
            for n, (sid, i) in enumerate(
                (sid, i)
                for sid, turns in zip(record["haystack_session_ids"], record["haystack_sessions"], strict=False)
                for i, turn in enumerate(turns)
                if turn.get("role") == "user"
            )
        }
        unit_of = {
            entry.id: position[entry.meta["turn_id"]]
            for session in by_question.get(qid, [])
            for entry in session.entries
            if entry.meta.get("turn_id") in position
        }
        store = HaystackStore(workdir / "longmemeval", by_question.get(qid, []), embedder, config=first)
        try:
            as_of = parse_longmemeval_date(record.get("question_date"))
            for name, config in configs.items():
                started = time.perf_counter()
                entries = store.rank(str(record["question"]), retriever, as_of=as_of, config=config)
                ranking = [unit_of[e] for e in entries if e in unit_of]
                seconds[name].append(time.perf_counter() - started)
                results[name].append(
                    {
                        "question_id": qid,
                        "question": str(record["question"]),
                        "question_type": record["question_type"],
                        "retrieved": [units.ids[i] for i in ranking[:TOP_IDS]],
                        "has_gold": bool(units.gold),
                        "seconds": seconds[name][-1],
                        "metrics": score_ranking(ranking, units, "turn"),
                    }
                )
        finally:
            store.close()
        if checkpoint is not None:
            checkpoint(_finished(results, seconds, _longmemeval_summary), done, len(records))
    return {name: _longmemeval_summary(results[name], seconds[name]) for name in configs}


def _finished(
    rows: Mapping[str, list[dict[str, Any]]],
    seconds: Mapping[str, list[float]],
    summary: Callable[[list[dict[str, Any]], list[float]], dict[str, Any]],
) -> Callable[[], Reports]:
    """The reports over the rows each configuration holds now, built only when called (rows added later,
    by a store still being asked, are left out)."""
    counts = {name: len(rows[name]) for name in rows}
    return lambda: {name: summary(rows[name][: counts[name]], list(seconds[name][: counts[name]])) for name in rows}


def _longmemeval_summary(results: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
    from protocols.evals.longmemeval.retrieval_metrics import average

    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r["question_type"]].append(r)
    return {
        "strict": average(results, convention="strict"),
        "lenient": average(results, convention="lenient"),
        "by_question_type": {t: average(rs, convention="strict") for t, rs in sorted(by_type.items())},
        "seconds_per_question": _timing(seconds),
        "questions": len(results),
        "per_question": results,
    }


def _timing(seconds: list[float]) -> dict[str, float]:
    return {"median": statistics.median(seconds), "max": max(seconds), "total": sum(seconds)} if seconds else {}


def _evidence(qa: dict, known: set[str], repaired: Counter) -> tuple[set[str], int]:
    """The question's evidence ids that name a dialog turn, and how many named none (or were malformed); the
    strings split and ids rewritten on the way are counted in ``repaired``."""
    evidence, unparsed = set(), 0
    for part in parse_evidence_ids(qa.get("evidence", []), repaired):
        if part in known:
            evidence.add(part)
        else:
            unparsed += 1
    return evidence, unparsed


def locomo_summary(
    per_item: list[dict], seconds: list[float], unparsed: int, ks, repaired: Counter | None = None
) -> dict[str, Any]:
    """Mean recall@k overall, over categories 1-4 and per category, with timings and per-item rows."""

    def mean_of(rows, name):
        return sum(r[name] for r in rows) / len(rows) if rows else None

    by_category = {
        f"{c} {CATEGORY_NAMES[c]}": {
            f"recall@{k}": mean_of([r for r in per_item if r["category"] == c], f"recall@{k}") for k in ks
        }
        | {"n": sum(1 for r in per_item if r["category"] == c)}
        for c in sorted(CATEGORY_NAMES)
    }
    return {
        "units": "turns",
        "overall": {f"recall@{k}": mean_of(per_item, f"recall@{k}") for k in ks} | {"n": len(per_item)},
        "categories_1_to_4": {
            f"recall@{k}": mean_of([r for r in per_item if r["category"] != 5], f"recall@{k}") for k in ks
        }
        | {"n": sum(1 for r in per_item if r["category"] != 5)},
        "by_category": by_category,
        "unparsed_evidence_ids": unparsed,
        "repaired_evidence_ids": dict(sorted((repaired or Counter()).items())),
        "seconds_per_question": _timing(seconds),
        "items": len(per_item),
        "per_item": per_item,
    }


def run_locomo(
    path: Path,
    retriever: str,
    *,
    embedder,
    limit: int | None,
    progress,
    workdir: Path,
    configs: Mapping[str, AskedConfig],
    ks=(1, 5, 10, 25),
    checkpoint: Checkpoint | None = None,
) -> Reports:
    """Evidence recall@k per item over dialog turns, one report per configuration name. LoCoMo questions
    carry no date: each is asked at the end of its conversation (``history_end``), as the locomo task asks
    it, so a relative time in it reads against the conversation. ``progress`` counts questions (one
    conversation holds about 200): each conversation's store is built when its first question comes."""
    from lca.importers import history_end, import_locomo, load_official_json

    embedder = QueryMemo(embedder)
    records = load_official_json(path)
    if limit:
        records = records[:limit]
    sessions, _ = import_locomo(path, sample_ids=[str(r["sample_id"]) for r in records])
    by_sample = sessions_by(sessions, lambda sid: sid.split(":", 2)[1])
    first = next(iter(configs.values())).retrieval
    per_item: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    unparsed, repaired = 0, Counter()
    questions = [(record, number, qa) for record in records for number, qa in enumerate(record["qa"])]
    conversations = sum(1 for record in records if record["qa"])
    store: HaystackStore | None = None
    dia_of: dict[str, str] = {}
    known: set[str] = set()
    asked: datetime | None = None
    done = 0
    try:
        for index, (record, number, qa) in enumerate(progress(questions)):
            sample = str(record["sample_id"])
            if store is None:
                dia_of = {e.id: str(e.meta.get("dia_id")) for s in by_sample.get(sample, []) for e in s.entries}
                known = set(dia_of.values())
                asked = history_end(by_sample.get(sample, []))
                store = HaystackStore(workdir / "locomo", by_sample.get(sample, []), embedder, config=first)
            evidence, missed = _evidence(qa, known, repaired)
            unparsed += missed
            if evidence:
                question = str(qa["question"])
                for name, config in configs.items():
                    started = time.perf_counter()
                    ranking = [
                        dia_of[e] for e in store.rank(question, retriever, as_of=asked, config=config) if e in dia_of
                    ]
                    seconds[name].append(time.perf_counter() - started)
                    row: dict[str, Any] = {
                        "question_id": f"{sample}:{number}",
                        "sample_id": sample,
                        "question": question,
                        "category": int(qa["category"]),
                        "evidence": sorted(evidence),
                        "retrieved": ranking[:TOP_IDS],
                        "seconds": seconds[name][-1],
                    }
                    for k in ks:
                        row[f"recall@{k}"] = len(evidence & set(ranking[:k])) / len(evidence)
                    per_item[name].append(row)
            if index + 1 == len(questions) or questions[index + 1][0] is not record:  # its last question
                store.close()
                store = None
                done += 1
                if checkpoint is not None:
                    summary = partial(locomo_summary, unparsed=unparsed, ks=ks, repaired=repaired)
                    checkpoint(_finished(per_item, seconds, summary), done, conversations)
    finally:
        if store is not None:
            store.close()
    return {name: locomo_summary(per_item[name], seconds[name], unparsed, ks, repaired) for name in configs}
