"""The benchmark-only hybrid ranker (``--retriever legacy``), kept only to compare the store's path against
until it matches on the dev splits; then this module, ``ranking``, ``resonance`` and ``units`` go.
Its weights are ``HybridConfig``'s dataset defaults (``--set`` acts on the store's ``RetrievalConfig``)."""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from protocols.bench.retrieval.legacy_config import HYBRID_DEFAULTS, HybridConfig, used_weights
from protocols.bench.retrieval.ranking import QuerySignals, UnitIndex, rank_units
from protocols.bench.retrieval.resonance import ResonanceIndex
from protocols.bench.retrieval.units import locomo_units, name_pattern, session_keys, without_names
from protocols.evals.locomo.dataset import CATEGORY_NAMES, parse_evidence_ids


def run_longmemeval(
    path: Path,
    retriever: str,
    *,
    embedder,
    chunker,
    limit: int | None,
    progress,
    workdir: Path,
    config: HybridConfig | None = None,
    context: bool = False,
    anchors: bool = True,
    sentence_keys: bool = False,
) -> dict[str, Any]:
    from lca.importers import load_official_json, parse_longmemeval_date
    from lca.temporal_anchor import anchor_weight, temporal_anchor
    from protocols.evals.longmemeval.retrieval_metrics import average, question_units, score_ranking

    config = config or HYBRID_DEFAULTS["longmemeval"]
    records = load_official_json(path)
    if limit:
        records = records[:limit]
    results, seconds = [], []
    for record in progress(records):
        started = time.perf_counter()
        units = question_units(record, "turn")
        query = str(record["question"])
        resonance = None
        if retriever == "resonance":
            question_date = record.get("question_date")

            def resonance(texts=units.texts, dates=units.dates, q=query, asked=question_date):
                index = ResonanceIndex(texts, dates, embedder, workdir, sentence_keys=sentence_keys)
                try:
                    return index.rank(q, asked)
                finally:
                    index.close()

        anchor = temporal_anchor(query, parse_longmemeval_date(record.get("question_date"))) if anchors else None
        weights = np.array([anchor_weight(anchor, parse_longmemeval_date(d)) for d in units.dates]) if anchor else None
        context_texts = None
        if context:
            context_texts = config.context_texts(units.texts, [u.rsplit("_", 1)[0] for u in units.ids])
        dense = retriever != "bm25"
        sentences = config.embeds_sentences(retriever)
        ranking = rank_units(
            UnitIndex(units.texts, embedder, chunker, dense=dense, sentences=sentences),
            query,
            retriever,
            resonance,
            config=config,
            signals=QuerySignals(anchor=weights),
            context=(UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None),
        )
        seconds.append(time.perf_counter() - started)
        results.append(
            {
                "question_id": record["question_id"],
                "question_type": record["question_type"],
                "anchor": anchor.expression if anchor else None,
                "has_gold": bool(units.gold),
                "seconds": seconds[-1],
                "metrics": score_ranking(ranking, units, "turn"),
            }
        )
    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r["question_type"]].append(r)
    return {
        "strict": average(results, convention="strict"),
        "lenient": average(results, convention="lenient"),
        "by_question_type": {t: average(rs, convention="strict") for t, rs in sorted(by_type.items())},
        "seconds_per_question": {"median": statistics.median(seconds), "max": max(seconds), "total": sum(seconds)},
        "questions": len(results),
        "per_question": results,
        "weights_used": sorted(used_weights("longmemeval", context=context, anchors=anchors, units="turns")),
    }


def _turn_signals(view: dict[str, list]) -> tuple[np.ndarray, np.ndarray]:
    """For dialog turns: which turns only ask, and the question turn each turn answers (a turn right after a
    question in its session answers it; -1 for none)."""
    texts, session_of = view["texts"], view["session"]
    asks = np.array(view["asks"], dtype=np.float64)
    replies_to = np.array(
        [i - 1 if i and session_of[i - 1] == session_of[i] and "?" in texts[i - 1] else -1 for i in range(len(texts))]
    )
    return asks, replies_to


def _speaker_signals(record: dict, view: dict[str, list]) -> dict[str, np.ndarray]:
    """Per speaker of the conversation, 1 for the units that speaker said."""
    conversation = record["conversation"]
    return {
        name: np.array([1.0 if s == name else 0.0 for s in view["speaker"]])
        for name in (conversation.get("speaker_a"), conversation.get("speaker_b"))
        if name
    }


def _evidence(qa: dict, known: set[str]) -> tuple[set[str], int]:
    """The question's evidence ids that name a dialog turn, and how many named none (or were malformed)."""
    evidence, unparsed = set(), 0
    for part in parse_evidence_ids(qa.get("evidence", [])):
        if part in known:
            evidence.add(part)
        else:
            unparsed += 1
    return evidence, unparsed


def _locomo_summary(
    per_item: list[dict], seconds: list[float], unparsed: int, ks, units: str, weights: set[str]
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
        "units": units,
        "overall": {f"recall@{k}": mean_of(per_item, f"recall@{k}") for k in ks} | {"n": len(per_item)},
        "categories_1_to_4": {
            f"recall@{k}": mean_of([r for r in per_item if r["category"] != 5], f"recall@{k}") for k in ks
        }
        | {"n": sum(1 for r in per_item if r["category"] != 5)},
        "by_category": by_category,
        "unparsed_evidence_ids": unparsed,
        "seconds_per_question": {"median": statistics.median(seconds), "total": sum(seconds)} if seconds else {},
        "items": len(per_item),
        "per_item": per_item,
        "weights_used": sorted(weights),
    }


def run_locomo(
    path: Path,
    retriever: str,
    *,
    embedder,
    chunker,
    limit: int | None,
    progress,
    workdir: Path,
    config: HybridConfig | None = None,
    context: bool = True,
    anchors: bool = True,
    units: str = "turns",
    sentence_keys: bool = False,
    ks=(1, 5, 10, 25),
) -> dict[str, Any]:
    """Evidence recall@k per item. LoCoMo questions carry no date, so ``anchors`` reads only absolute
    dates in the question ("on 1 May, 2022"), against each unit's session date."""
    from lca.importers import load_official_json, parse_locomo_date
    from lca.temporal_anchor import anchor_weight, dated_anchor

    config = config or HYBRID_DEFAULTS["locomo"]
    records = load_official_json(path)
    if limit:
        records = records[:limit]
    context = context and units == "turns"  # neighbouring turns only make sense for turns
    per_item, seconds, unparsed = [], [], 0
    for record in progress(records):
        view = locomo_units(record, units)
        texts, dates, covers, session_of = view["texts"], view["dates"], view["covers"], view["session"]
        moments = [parse_locomo_date(d) for d in dates]
        context_texts = config.context_texts(texts, session_of, [f"[{d}]" for d in dates]) if context else None
        known = {turn["dia_id"] for key in session_keys(record["conversation"]) for turn in record["conversation"][key]}
        dense = retriever != "bm25"
        index = UnitIndex(texts, embedder, chunker, dense=dense, sentences=config.embeds_sentences(retriever))
        context_index = UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None
        resonance_index = (
            ResonanceIndex(texts, dates, embedder, workdir, sentence_keys=sentence_keys)
            if retriever == "resonance"
            else None
        )
        asks, replies_to = _turn_signals(view) if units == "turns" else (None, None)
        speakers = _speaker_signals(record, view)
        # the names leave the embedded query only where the speaker signal carries them (not summaries)
        names_out = not config.names_in_dense_query and any(view["speaker"])
        for qa in record["qa"]:
            evidence, missed = _evidence(qa, known)
            unparsed += missed
            if not evidence:
                continue
            started = time.perf_counter()
            question = str(qa["question"])
            named = [name for name in speakers if re.search(name_pattern(name), question, re.IGNORECASE)]
            anchor = dated_anchor(question) if anchors else None
            signals = QuerySignals(
                replies_to=replies_to,
                asks=asks,
                speaker=speakers[named[0]] if len(named) == 1 else None,
                anchor=np.array([anchor_weight(anchor, m) for m in moments]) if anchor else None,
            )
            dense_query = without_names(question, speakers) if names_out else None
            resonance = partial(resonance_index.rank, question) if resonance_index is not None else None
            ranking = rank_units(
                index,
                question,
                retriever,
                resonance,
                config=config,
                context=context_index,
                signals=signals,
                dense_query=dense_query,
            )
            seconds.append(time.perf_counter() - started)
            row = {
                "sample_id": record["sample_id"],
                "category": int(qa["category"]),
                "evidence": sorted(evidence),
                "anchor": anchor.expression if anchor else None,
                "seconds": seconds[-1],
            }
            for k in ks:
                found = {dia for i in ranking[:k] for dia in covers[i]}
                row[f"recall@{k}"] = len(evidence & found) / len(evidence)
            per_item.append(row)
        if resonance_index is not None:
            resonance_index.close()
    return _locomo_summary(
        per_item, seconds, unparsed, ks, units, used_weights("locomo", context=context, anchors=anchors, units=units)
    )
