"""``lca bench retrieval``: the substrate's recall scored by the benchmarks' own retrieval metrics,
with no LLM in the loop.

Retrievers, so each layer's contribution shows:
- ``bm25``: bm25s with the substrate's tokenizer (lowercase, English stopwords, Snowball stems);
- ``dense``: all-MiniLM-L6-v2 cosine; a unit longer than the embedder's input is split by the
  substrate's chunker and scores as its best piece (never truncated);
- ``hybrid``: ``HybridConfig``: z-scored dense plus 0.5 x z-scored BM25, sentence keys, one round
  of Rocchio feedback, and each dataset's signals (temporal anchors; for LoCoMo also the
  neighbour-context key, question-turn, answer-after-question and named-speaker signals). Each part
  is a weight ``--set`` can zero, so each can be ablated; ``--fusion rrf`` is the substrate store's
  reciprocal-rank fusion alone. Chosen on the dev splits only (docs/benchmarks.md);
- ``resonance``: the full recall pipeline of a real substrate built from the haystack (transcript,
  faiss, bm25s, SQLite), candidates ranked by resonance score R with the question date as
  ``as_of``; the units beyond its candidate pool follow in hybrid order. ``--sentence-keys on``
  builds that substrate with the store's sentence keys.

LoCoMo is scored over dialog turns, observations or session summaries (``--units``), the LoCoMo
paper's three RAG settings. Embeddings are cached by content hash across runs (``--cache``), so a
warm run embeds nothing.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

RETRIEVERS = ("bm25", "dense", "hybrid", "resonance")
RRF_K = 60


@dataclass(frozen=True)
class HybridConfig:
    """The hybrid retriever's weights, in z units of the fused score. The per-dataset defaults
    (``HYBRID_DEFAULTS``) were chosen on the dev splits only; ``--set name=value`` overrides one."""

    fusion: str = "z"             # "z": z-scored dense + bm25_weight x z-scored BM25, then the rest below;
                                  # "rrf": the store's reciprocal-rank fusion of dense and BM25, nothing else
    bm25_weight: float = 0.5
    context_weight: float = 1.0   # the neighbour-context key, when the dataset builds one (LoCoMo)
    context_before: int = 1       # the context key holds this many turns before the unit (same session) ...
    context_after: int = 1        # ... and this many after
    anchor_weight: float = 4.0    # added on the day a temporal anchor points at
    feedback_weight: float = 0.6  # Rocchio feedback: the query vector plus w x the mean of the top units' vectors
    feedback_depth: int = 3       # how many top units feed back
    question_weight: float = 0.0  # subtracted from a turn that only asks (ends in "?", shares no photo): a question
                                  # states no fact, and it yields its place to the reply below
    reply_weight: float = 0.0     # a turn answering a question turn adds w x the question's positive score
    speaker_weight: float = 0.0   # added to the turns of the one speaker a question names
    sentences: bool = True        # each sentence of a unit is also a dense key (the unit scores as its best)
    names_in_dense_query: bool = True  # False: the speakers' names leave the embedded query (the speaker signal
                                       # carries them; a name otherwise pulls every turn of that speaker)

    def __post_init__(self) -> None:
        if self.fusion not in ("z", "rrf"):
            raise ValueError(f"fusion must be 'z' or 'rrf', not {self.fusion!r}")
        if self.feedback_depth < 1:
            raise ValueError(f"feedback_depth must be at least 1, not {self.feedback_depth}")
        if self.context_before < 0 or self.context_after < 0:
            raise ValueError(f"context_before and context_after must be at least 0, not "
                             f"{self.context_before} and {self.context_after}")

    def context_texts(self, texts: Sequence[str], session_of: Sequence[str], header: Sequence[str] = ()) -> list[str]:
        """Each unit's context key: the unit with its neighbours in the same session (and a header line per unit)."""
        n = len(texts)
        return ["\n".join(([header[i]] if header else [])
                          + [texts[j] for j in range(i - self.context_before, i + self.context_after + 1)
                             if 0 <= j < n and session_of[j] == session_of[i]])
                for i in range(n)]

    def embeds_sentences(self, retriever: str) -> bool:
        """Sentence keys are built only where they are scored: z fusion in the hybrid (and resonance's tail)."""
        return self.sentences and self.fusion == "z" and retriever in ("hybrid", "resonance")

    def with_overrides(self, pairs: Sequence[str]) -> "HybridConfig":
        """``name=value`` strings (from ``--set``) applied over this config, each checked by name and type."""
        known = {f.name: f.type for f in fields(self)}
        changes: dict[str, Any] = {}
        for pair in pairs:
            name, sep, raw = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise ValueError(f"--set {pair!r}: expected name=value with name one of {', '.join(known)}")
            kind = str(known[name])
            try:
                changes[name] = {"str": str, "int": int, "float": float, "bool": _flag}[kind](raw.strip())
            except ValueError:
                raise ValueError(f"--set {pair!r}: {name} takes a {kind}") from None
        return replace(self, **changes)


def _flag(raw: str) -> bool:
    if raw.lower() in ("1", "true", "on", "yes"):
        return True
    if raw.lower() in ("0", "false", "off", "no"):
        return False
    raise ValueError(raw)


# chosen on LongMemEval_S dev and LoCoMo (no other split was looked at); see docs/benchmarks.md
HYBRID_DEFAULTS = {
    "longmemeval": HybridConfig(),
    "locomo": HybridConfig(question_weight=2.0, reply_weight=0.3, speaker_weight=0.6, context_before=2,
                           names_in_dense_query=False),
}


def znorm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    spread = scores.std()
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)


# ---- rankers over a list of unit texts ---------------------------------------------------------
class UnitIndex:
    """One corpus of units, embedded and BM25-indexed once, scored for many queries."""

    def __init__(self, texts: Sequence[str], embedder, chunker, *, dense: bool = True, sentences: bool = False) -> None:
        from lca.index.chunker import sentence_keys
        from lca.index.lexical import Bm25LexicalIndex

        self.n = len(texts)
        self.embedder = embedder
        self.lexical = Bm25LexicalIndex()
        self.lexical.build(list(range(self.n)), texts, "bench")
        self.vectors = self.owner = self.whole = None
        if dense:
            pieces: list[str] = []
            owner: list[int] = []
            whole: list[bool] = []   # a piece of the unit's own text, not one of its sentence keys
            for i, text in enumerate(texts):
                keys = [(piece.text, True) for piece in chunker.split(text or " ")]
                if sentences:
                    keys += [(piece.text, False) for sentence in sentence_keys(text or "")
                             for piece in chunker.split(sentence)]
                for key, is_whole in keys:
                    pieces.append(key)
                    owner.append(i)
                    whole.append(is_whole)
            self.vectors = embedder.embed(pieces)
            self.owner = np.asarray(owner)
            self.whole = np.asarray(whole)

    def bm25(self, query: str) -> np.ndarray:
        scores = np.zeros(self.n, dtype=np.float32)
        found, rows = self.lexical.search(query, self.n)
        scores[rows] = found
        return scores

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_query(query), dtype=np.float32)

    def dense(self, query: str | np.ndarray) -> np.ndarray:
        """Cosine to the query (text or unit vector); a unit scores as its best piece (a unit longer than
        the embedder's input has several, and with ``sentences`` each sentence is a piece too)."""
        qvec = self.query_vector(query) if isinstance(query, str) else query
        sims = self.vectors @ qvec
        scores = np.full(self.n, -1.0, dtype=np.float32)
        np.maximum.at(scores, self.owner, sims.astype(np.float32))
        return scores

    def centroid(self, units: Sequence[int]) -> np.ndarray:
        """The mean vector of some units (each the mean of its own text's pieces), for relevance feedback."""
        return np.mean([self.vectors[(self.owner == i) & self.whole].mean(axis=0) for i in units], axis=0)


def ranking_of(scores: np.ndarray) -> list[int]:
    """Descending score, ties by position (stable)."""
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))]


def rrf(*rankings: Sequence[int], n: int) -> list[int]:
    fused = np.zeros(n, dtype=np.float64)
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] += 1.0 / (RRF_K + rank)
    return ranking_of(fused)


@dataclass(frozen=True)
class QuerySignals:
    """What a dataset knows about a query beyond its text, each an array over the units (or None)."""

    anchor: np.ndarray | None = None       # temporal-anchor closeness in [0, 1]
    replies_to: np.ndarray | None = None   # index of the question turn a unit answers, or -1
    asks: np.ndarray | None = None         # 1 for a turn that only asks a question
    speaker: np.ndarray | None = None      # 1 for the turns of the speaker the question names


def hybrid_scores(units: UnitIndex, query: str, config: HybridConfig, *, context: UnitIndex | None = None,
                  signals: QuerySignals = QuerySignals(), dense_query: str | None = None) -> np.ndarray:
    """z fusion of dense and BM25 (and the context key), then the query's signals, then one round of
    Rocchio feedback on the dense side when ``config.feedback_weight`` is set. ``dense_query`` is the
    text embedded for the dense side when it differs from the BM25 query (default: ``query``)."""
    bm25 = znorm(units.bm25(query))
    context_bm25 = znorm(context.bm25(query)) if context is not None else None

    def fuse(qvec: np.ndarray) -> np.ndarray:
        fused = znorm(units.dense(qvec)) + config.bm25_weight * bm25
        if context is not None:
            fused += config.context_weight * (znorm(context.dense(qvec)) + config.bm25_weight * context_bm25)
        if signals.anchor is not None:
            fused += config.anchor_weight * signals.anchor
        if signals.asks is not None and config.question_weight:
            fused -= config.question_weight * signals.asks   # before the reply inherits from its question
        if signals.replies_to is not None and config.reply_weight:
            asked = signals.replies_to >= 0
            fused[asked] += config.reply_weight * np.maximum(fused[signals.replies_to[asked]], 0.0)
        if signals.speaker is not None and config.speaker_weight:
            fused += config.speaker_weight * signals.speaker
        return fused

    qvec = units.query_vector(query if dense_query is None else dense_query)
    fused = fuse(qvec)
    if config.feedback_weight:
        top = ranking_of(fused.astype(np.float32))[:config.feedback_depth]
        moved = qvec + config.feedback_weight * units.centroid(top)
        fused = fuse((moved / np.linalg.norm(moved)).astype(np.float32))
    return fused


def rank_units(units: UnitIndex, query: str, retriever: str, resonance: Callable[[], list[int]] | None = None, *,
               config: HybridConfig = HybridConfig(), context: UnitIndex | None = None,
               signals: QuerySignals = QuerySignals(), dense_query: str | None = None) -> list[int]:
    if retriever == "bm25":
        return ranking_of(units.bm25(query))
    if retriever == "dense":
        return ranking_of(units.dense(query))
    if config.fusion == "rrf":
        hybrid = rrf(ranking_of(units.dense(query)), ranking_of(units.bm25(query)), n=units.n)
    else:
        hybrid = ranking_of(hybrid_scores(units, query, config, context=context, signals=signals,
                                          dense_query=dense_query).astype(np.float32))
    if retriever == "hybrid":
        return hybrid
    head = resonance() if resonance is not None else []
    seen = set(head)
    return head + [i for i in hybrid if i not in seen]


# ---- full resonance recall over a real substrate -------------------------------------------------
def _history_time(raw: str | None) -> str:
    """A LongMemEval or LoCoMo date as ISO 8601 (the epoch of 2000 when absent or unreadable)."""
    from lca.importers import parse_locomo_date, parse_longmemeval_date

    moment = parse_longmemeval_date(raw) or parse_locomo_date(raw) if raw else None
    return moment.isoformat() if moment is not None else "2000-01-01T00:00:00"


class ResonanceIndex:
    """A real substrate (transcript, faiss, bm25s, SQLite) built from one corpus, ranked by resonance
    score R for each query; entries are named by position (a haystack may repeat a session id)."""

    def __init__(self, texts: Sequence[str], dates: Sequence[str | None], embedder, workdir: Path, *,
                 sentence_keys: bool = False) -> None:
        import shutil

        from lca.recall import RecallConfig
        from lca.substrate import Substrate
        from lca.types import EntryKind, TranscriptEntry

        shutil.rmtree(workdir, ignore_errors=True)
        self.workdir = workdir
        entries = [TranscriptEntry(id=f"u{i}", session_id="haystack", agent_id="bench", kind=EntryKind.USER_TURN,
                                   timestamp=_history_time(date), content=text or " ")
                   for i, (text, date) in enumerate(zip(texts, dates))]
        pool = min(len(entries), 100)
        config = RecallConfig(pool=pool, floor=-1.0, memory_quota=0, transcript_quota=pool, token_budget=10 ** 7,
                              item_char_cap=10 ** 6, mmr_lambda=1.0)
        self.substrate = Substrate(workdir, embedder=embedder, recall_config=config, sentence_keys=sentence_keys)
        self.substrate.append(entries)

    def rank(self, query: str, as_of: str | None = None) -> list[int]:
        from datetime import datetime

        from lca.recall import RecallContext

        asked = datetime.fromisoformat(_history_time(as_of)) if as_of else None
        result = self.substrate.recall(RecallContext(query=query, as_of=asked))
        order: list[int] = []
        for candidate in result.candidates:   # sorted by resonance score
            index = int(candidate.source[len("transcript:haystack#u"):].split("[", 1)[0])
            if index not in order:
                order.append(index)
        return order

    def close(self) -> None:
        import shutil

        self.substrate.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


# ---- datasets -------------------------------------------------------------------------------------
def run_longmemeval(path: Path, retriever: str, *, embedder, chunker, limit: int | None, progress,
                    workdir: Path, config: HybridConfig | None = None, context: bool = False,
                    anchors: bool = True, sentence_keys: bool = False) -> dict[str, Any]:
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
            def resonance(texts=units.texts, dates=units.dates, q=query, asked=record.get("question_date")):
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
        ranking = rank_units(UnitIndex(units.texts, embedder, chunker, dense=dense, sentences=sentences), query,
                             retriever, resonance,
                             config=config, signals=QuerySignals(anchor=weights),
                             context=UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None)
        seconds.append(time.perf_counter() - started)
        results.append({"question_id": record["question_id"], "question_type": record["question_type"],
                        "anchor": anchor.expression if anchor else None,
                        "has_gold": bool(units.gold), "seconds": seconds[-1],
                        "metrics": score_ranking(ranking, units, "turn")})
    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r["question_type"]].append(r)
    return {
        "strict": average(results, convention="strict"), "lenient": average(results, convention="lenient"),
        "by_question_type": {t: average(rs, convention="strict") for t, rs in sorted(by_type.items())},
        "seconds_per_question": {"median": statistics.median(seconds), "max": max(seconds),
                                 "total": sum(seconds)},
        "questions": len(results), "per_question": results,
        "weights_used": sorted(used_weights("longmemeval", context=context, anchors=anchors, units="turns")),
    }


LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LOCOMO_UNITS = ("turns", "observations", "summaries")


def _dia_ids(raw: object) -> list[str]:
    """Evidence or observation ids as given: a string (possibly "D8:6; D9:17" or "D1:3,D1:4") or a list."""
    parts = raw if isinstance(raw, list) else [raw]
    return [piece.strip() for part in parts for piece in str(part).replace(",", ";").split(";") if piece.strip()]


def _session_keys(conversation: dict) -> list[str]:
    """The sessions that exist, in order (some records carry more ``_date_time`` keys than sessions)."""
    return sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))


def _name_pattern(name: str) -> str:
    """A speaker named by first name, with or without a possessive ("Caroline", "Caroline's")."""
    return rf"\b{re.escape(name.split()[0])}(?:'s)?\b"


def without_names(question: str, names) -> str:
    """The question with the speakers' first names taken out, for the embedded (dense) query."""
    for name in names:
        question = re.sub(_name_pattern(name), "", question, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", question).strip()


def locomo_units(record: dict, units: str = "turns") -> dict[str, list]:
    """One conversation's retrieval units, as the LoCoMo paper's RAG study used them.

    ``turns``: each dialog turn ("speaker: text", with the image caption when the turn shares a photo);
    ``asks`` marks a turn that only asks (its text ends in "?" and it shares no photo);
    ``observations``: each fact of the record's ``observation`` view, covering the turns it cites;
    ``summaries``: each session summary, covering every turn of its session. ``covers`` holds the
    dialog ids a unit retrieves; evidence recall counts an evidence id found once any top-k unit covers it.
    """
    if units not in LOCOMO_UNITS:
        raise ValueError(f"unknown LoCoMo retrieval unit {units!r}; known: {', '.join(LOCOMO_UNITS)}")
    conversation = record["conversation"]
    sessions = _session_keys(conversation)
    out: dict[str, list] = {"texts": [], "dates": [], "covers": [], "session": [], "speaker": [], "asks": []}

    def add(text: str, when: str, covers: list[str], session: str, speaker: str, asks: bool = False) -> None:
        out["texts"].append(text)
        out["dates"].append(when)
        out["covers"].append(covers)
        out["session"].append(session)
        out["speaker"].append(speaker)
        out["asks"].append(asks)

    for key in sessions:
        when = conversation.get(f"{key}_date_time", "")
        if units == "turns":
            for turn in conversation[key]:
                caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                asks = str(turn["text"]).rstrip().endswith("?") and not caption   # a photo is content however asked
                add(f"{turn['speaker']}: {turn['text']}{caption}", when, [turn["dia_id"]], key, turn["speaker"], asks)
        elif units == "observations":
            facts = (record.get("observation") or {}).get(f"{key}_observation") or {}
            for speaker, items in facts.items():
                for item in items:
                    add(f"{item[0]}", when, _dia_ids(item[1]) if len(item) > 1 else [], key, speaker)
        else:
            summary = (record.get("session_summary") or {}).get(f"{key}_summary")
            if summary:
                add(str(summary), when, [turn["dia_id"] for turn in conversation[key]], key, "")
    return out


def run_locomo(path: Path, retriever: str, *, embedder, chunker, limit: int | None, progress,
               workdir: Path, config: HybridConfig | None = None, context: bool = True, anchors: bool = True,
               units: str = "turns", sentence_keys: bool = False, ks=(1, 5, 10, 25)) -> dict[str, Any]:
    """Evidence recall@k per item. LoCoMo questions carry no date, so ``anchors`` reads only absolute
    dates in the question ("on 1 May, 2022"), against each unit's session date."""
    from lca.importers import load_official_json, parse_locomo_date
    from lca.temporal_anchor import anchor_weight, dated_anchor

    config = config or HYBRID_DEFAULTS["locomo"]
    records = load_official_json(path)
    if limit:
        records = records[:limit]
    context = context and units == "turns"   # neighbouring turns only make sense for turns
    per_item, seconds, unparsed = [], [], 0
    for record in progress(records):
        view = locomo_units(record, units)
        texts, dates, covers, session_of = view["texts"], view["dates"], view["covers"], view["session"]
        moments = [parse_locomo_date(d) for d in dates]
        context_texts = config.context_texts(texts, session_of, [f"[{d}]" for d in dates]) if context else None
        known = {turn["dia_id"] for key in _session_keys(record["conversation"]) for turn in record["conversation"][key]}
        dense = retriever != "bm25"
        index = UnitIndex(texts, embedder, chunker, dense=dense,
                          sentences=config.embeds_sentences(retriever))
        context_index = UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None
        resonance_index = (ResonanceIndex(texts, dates, embedder, workdir, sentence_keys=sentence_keys)
                           if retriever == "resonance" else None)
        replies_to = asks = None
        if units == "turns":   # a turn right after a question in its session answers it
            asks = np.array(view["asks"], dtype=np.float64)
            replies_to = np.array([i - 1 if i and session_of[i - 1] == session_of[i] and "?" in texts[i - 1] else -1
                                   for i in range(len(texts))])
        speakers = {name: np.array([1.0 if s == name else 0.0 for s in view["speaker"]])
                    for name in (record["conversation"].get("speaker_a"), record["conversation"].get("speaker_b")) if name}
        # the names leave the embedded query only where the speaker signal carries them (not summaries)
        names_out = not config.names_in_dense_query and any(view["speaker"])
        for qa in record["qa"]:
            evidence = set()
            for part in _dia_ids(qa.get("evidence", [])):
                if part in known:
                    evidence.add(part)
                else:
                    unparsed += 1
            if not evidence:
                continue
            started = time.perf_counter()
            question = str(qa["question"])
            named = [name for name in speakers if re.search(_name_pattern(name), question, re.IGNORECASE)]
            anchor = dated_anchor(question) if anchors else None
            signals = QuerySignals(replies_to=replies_to, asks=asks, speaker=speakers[named[0]] if len(named) == 1 else None,
                                   anchor=np.array([anchor_weight(anchor, m) for m in moments]) if anchor else None)
            dense_query = without_names(question, speakers) if names_out else None
            ranking = rank_units(index, question, retriever,
                                 (lambda q=question: resonance_index.rank(q)) if resonance_index is not None else None,
                                 config=config, context=context_index, signals=signals, dense_query=dense_query)
            seconds.append(time.perf_counter() - started)
            row = {"sample_id": record["sample_id"], "category": int(qa["category"]), "evidence": sorted(evidence),
                   "anchor": anchor.expression if anchor else None, "seconds": seconds[-1]}
            for k in ks:
                found = {dia for i in ranking[:k] for dia in covers[i]}
                row[f"recall@{k}"] = len(evidence & found) / len(evidence)
            per_item.append(row)
        if resonance_index is not None:
            resonance_index.close()

    def mean_of(rows, name):
        return sum(r[name] for r in rows) / len(rows) if rows else None
    by_category = {f"{c} {LOCOMO_CATEGORIES[c]}": {f"recall@{k}": mean_of([r for r in per_item if r["category"] == c],
                                                                          f"recall@{k}") for k in ks}
                   | {"n": sum(1 for r in per_item if r["category"] == c)} for c in sorted(LOCOMO_CATEGORIES)}
    return {"units": units,
            "overall": {f"recall@{k}": mean_of(per_item, f"recall@{k}") for k in ks} | {"n": len(per_item)},
            "categories_1_to_4": {f"recall@{k}": mean_of([r for r in per_item if r["category"] != 5], f"recall@{k}")
                                  for k in ks} | {"n": sum(1 for r in per_item if r["category"] != 5)},
            "by_category": by_category, "unparsed_evidence_ids": unparsed,
            "seconds_per_question": {"median": statistics.median(seconds), "total": sum(seconds)} if seconds else {},
            "items": len(per_item), "per_item": per_item,
            "weights_used": sorted(used_weights("locomo", context=context, anchors=anchors, units=units))}


# ---- ablation: what each part of the hybrid adds ------------------------------------------------------
SIGNAL_WEIGHTS = ("bm25_weight", "context_weight", "anchor_weight", "feedback_weight", "question_weight",
                  "reply_weight", "speaker_weight")


def ablations(config: HybridConfig, *, uses: set[str]) -> dict[str, HybridConfig]:
    """One variant per part that is switched on in ``config`` and used by the run (``uses`` names the
    weights the run's units can act on): that part off, everything else as it is."""
    variants = {f"{name}=0": replace(config, **{name: 0.0})
                for name in SIGNAL_WEIGHTS if name in uses and getattr(config, name)}
    if config.sentences:
        variants["sentences=off"] = replace(config, sentences=False)
    if not config.names_in_dense_query and "speaker_weight" in uses:
        variants["names_in_dense_query=on"] = replace(config, names_in_dense_query=True)
    return variants


def used_weights(dataset: str, *, context: bool, anchors: bool, units: str) -> set[str]:
    """The hybrid weights a run can act on, given what it built (``context``: it built context keys);
    the rest multiply a signal the run never builds. Each runner reports its set as ``weights_used``."""
    uses = {"bm25_weight", "feedback_weight"}
    if context:
        uses.add("context_weight")
    if anchors:
        uses.add("anchor_weight")
    if dataset == "locomo" and units == "turns":
        uses |= {"question_weight", "reply_weight", "speaker_weight"}
    elif dataset == "locomo" and units == "observations":
        uses.add("speaker_weight")
    return uses


def headline(report: dict[str, Any], dataset: str) -> dict[str, float]:
    """The figures an ablation table compares: the headline figures at k=5 and their @10 companions."""
    if dataset == "longmemeval":
        return {"recall_any@5 (strict)": report["strict"]["session"]["recall_any@5"],
                "recall_all@5 (lenient)": report["lenient"]["session"]["recall_all@5"],
                "ndcg_any@5 (strict)": report["strict"]["session"]["ndcg_any@5"],
                "recall_all@10 (lenient)": report["lenient"]["session"]["recall_all@10"]}
    return {"recall@5": report["overall"]["recall@5"], "recall@10": report["overall"]["recall@10"],
            "recall@5 (categories 1-4)": report["categories_1_to_4"]["recall@5"]}


def ablation_table(ablation: dict[str, Any], dataset: str) -> str:
    prov = ablation["provenance"]
    names = list(ablation["default"])
    lines = [f"# {dataset} retrieval, hybrid ablation ({prov['embedder']})", "",
             f"file {prov['file']} (sha256 {prov['sha256'][:16]}...), code {prov['code_version']}; "
             f"each row turns one part off, the rest at the default", "",
             "| variant | " + " | ".join(names) + f" | change in {names[0]} |",
             "| --- | " + " | ".join("---" for _ in names) + " | --- |",
             "| default | " + " | ".join(f"{ablation['default'][n]:.4f}" for n in names) + " | |"]
    for variant, row in ablation["variants"].items():
        lines.append(f"| {variant} | " + " | ".join(f"{row['metrics'][n]:.4f}" for n in names)
                     + f" | {row['delta'][names[0]]:+.4f} |")
    return "\n".join(lines) + "\n"


# ---- the command ------------------------------------------------------------------------------------
def run_retrieval_bench(args) -> int:
    from tqdm import tqdm

    from lca.importers import file_sha256
    from lca.index.chunker import Chunker
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder
    from lca.provenance import code_version
    from protocols.data_paths import find_data_file

    units = getattr(args, "units", None)
    try:   # options are checked before any file is read or model loaded
        if units is not None and args.dataset != "locomo":
            raise ValueError("--units applies to LoCoMo only (LongMemEval's official units are user turns)")
        config = HYBRID_DEFAULTS[args.dataset].with_overrides(
            ([f"fusion={args.fusion}"] if args.fusion else []) + list(getattr(args, "set", None) or []))
        if getattr(args, "sentence_keys", None) is not None and args.retriever != "resonance":
            raise ValueError("--sentence-keys is the substrate store's option: it applies to --retriever resonance "
                             "(the hybrid's own sentence keys are --set sentences=on|off)")
        if getattr(args, "ablate", False) and (args.retriever != "hybrid" or config.fusion != "z"):
            raise ValueError("--ablate turns off the parts of the hybrid's z fusion one at a time: "
                             "it needs --retriever hybrid and --fusion z")
    except ValueError as exc:
        import sys

        print(f"lca: error: {exc}", file=sys.stderr)
        return 2
    path = find_data_file("locomo" if args.dataset == "locomo" else "longmemeval_s_dev", args.data)
    if path is None:
        raise FileNotFoundError(f"no {args.dataset} file: pass --data PATH (a file in the official format, plain, "
                                ".gz or .xz, or a folder holding it) or set LCA_DATA")
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache)
    chunker = Chunker(embedder)
    workdir = Path(args.out).parent / "work-retrieval"

    def progress(items, desc: str = f"{args.dataset} {args.retriever}"):
        return tqdm(items, desc=desc, unit="q", disable=args.quiet)

    def cache_state() -> dict[str, Any]:
        return {"path": str(embedder.path), "hits": embedder.hits, "misses": embedder.misses}

    started = time.perf_counter()
    runner = run_longmemeval if args.dataset == "longmemeval" else run_locomo
    options: dict[str, Any] = {"config": config}
    if args.context is not None:
        options["context"] = args.context == "on"
    if args.anchors is not None:
        options["anchors"] = args.anchors == "on"
    if units is not None:
        options["units"] = units
    if getattr(args, "sentence_keys", None) is not None:
        options["sentence_keys"] = args.sentence_keys == "on"
    report = runner(path, args.retriever, embedder=embedder, chunker=chunker, limit=args.limit, progress=progress,
                    workdir=workdir, **options)
    report["provenance"] = {"dataset": args.dataset, "file": str(path), "sha256": file_sha256(path),
                            "retriever": args.retriever, "embedder": embedder.embedder_id,
                            "options": {**options, "config": asdict(config)},
                            "code_version": code_version(), "limit": args.limit,
                            "embedding_cache": cache_state(),
                            "wall_seconds": time.perf_counter() - started}
    out = Path(args.out.format(dataset=args.dataset, retriever=args.retriever,
                               units=f"-{units}" if units and units != "turns" else ""))
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(path: Path, data: dict[str, Any], table: str) -> None:
        """The JSON and its markdown table beside it, and the table on the terminal."""
        path.write_text(json.dumps(data, indent=2, default=float), encoding="utf-8")
        path.with_suffix(".md").write_text(table, encoding="utf-8")
        print(table)
        print(f"wrote {path} and {path.with_suffix('.md')}")

    write(out, report, markdown_table(report, args.dataset))
    if getattr(args, "ablate", False):
        default = headline(report, args.dataset)
        ablation: dict[str, Any] = {"default": default, "variants": {}}
        for variant, variant_config in ablations(config, uses=set(report["weights_used"])).items():
            variant_report = runner(path, args.retriever, embedder=embedder, chunker=chunker, limit=args.limit,
                                    progress=lambda items, v=variant: progress(items, f"without {v}"),
                                    workdir=workdir, **{**options, "config": variant_config})
            metrics = headline(variant_report, args.dataset)
            ablation["variants"][variant] = {"config": asdict(variant_config), "metrics": metrics,
                                             "delta": {n: metrics[n] - default[n] for n in default}}
        ablation["provenance"] = {**report["provenance"], "wall_seconds": time.perf_counter() - started,
                                  "embedding_cache": cache_state()}
        write(out.with_name(f"{out.stem}-ablation.json"), ablation, ablation_table(ablation, args.dataset))
    embedder.close()
    return 0


def markdown_table(report: dict[str, Any], dataset: str) -> str:
    prov = report["provenance"]
    lines = [f"# {dataset} retrieval, {prov['retriever']} ({prov['embedder']})", "",
             f"file {prov['file']} (sha256 {prov['sha256'][:16]}...), code {prov['code_version']}", ""]
    if dataset == "longmemeval":
        strict, lenient = report["strict"], report["lenient"]
        lines += ["| convention | n | recall_any@5 | recall_all@5 | ndcg_any@5 | recall_any@10 | recall_all@10 |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, table in (("session, strict", strict), ("session, lenient", lenient)):
            s = table["session"]
            lines.append(f"| {name} | {table['n']} | {s['recall_any@5']:.4f} | {s['recall_all@5']:.4f} | "
                         f"{s['ndcg_any@5']:.4f} | {s['recall_any@10']:.4f} | {s['recall_all@10']:.4f} |")
        t = strict["turn"]
        lines.append(f"| turn, strict | {strict['n']} | {t['recall_any@5']:.4f} | {t['recall_all@5']:.4f} | "
                     f"{t['ndcg_any@5']:.4f} | {t['recall_any@10']:.4f} | {t['recall_all@10']:.4f} |")
        lines += ["", "| question type (strict) | n | session recall_any@5 | session recall_all@5 |", "| --- | --- | --- | --- |"]
        for qtype, table in report["by_question_type"].items():
            if table["n"]:
                lines.append(f"| {qtype} | {table['n']} | {table['session']['recall_any@5']:.4f} | "
                             f"{table['session']['recall_all@5']:.4f} |")
    else:
        unit_name = {"turns": "dialog turns", "observations": "observations", "summaries": "session summaries"}
        lines += [f"| units: {unit_name[report.get('units', 'turns')]} | n | recall@1 | recall@5 | recall@10 | recall@25 |", "| --- | --- | --- | --- | --- | --- |"]
        for name, table in [("all categories", report["overall"]), ("categories 1-4", report["categories_1_to_4"]),
                            *report["by_category"].items()]:
            if table["n"]:
                lines.append(f"| {name} | {table['n']} | " + " | ".join(f"{table[f'recall@{k}']:.4f}" for k in (1, 5, 10, 25))
                             + " |")
    sec = report.get("seconds_per_question", {})
    if sec:
        lines += ["", f"seconds per question: median {sec['median']:.2f}, total {sec['total']:.1f}; wall "
                      f"{prov['wall_seconds']:.1f} s; embedding cache hits {prov['embedding_cache']['hits']}, "
                      f"misses {prov['embedding_cache']['misses']}"]
    return "\n".join(lines) + "\n"
