"""``lca bench retrieval``: the substrate's recall scored by the benchmarks' own retrieval metrics,
with no LLM in the loop.

Retrievers, so each layer's contribution shows:
- ``bm25``: bm25s with the substrate's tokenizer (lowercase, English stopwords, Snowball stems);
- ``dense``: all-MiniLM-L6-v2 cosine; a unit longer than the embedder's input is split by the
  substrate's chunker and scores as its best piece (never truncated);
- ``hybrid``: the two fused. ``--fusion z`` (default) adds z-scored dense and 0.5 x z-scored BM25
  scores; ``--fusion rrf`` is the substrate store's reciprocal-rank fusion (k = 60). Both were
  compared on the dev splits only (z: LongMemEval_S session recall_any@5 0.947 vs 0.938; LoCoMo
  turn recall@5 0.524 vs 0.454). With ``--context`` (LoCoMo's default) each dialog turn is also
  scored through a key made of the session date, the turn before it and the turn after it (many
  evidence turns answer the previous turn's question); with temporal anchors (LongMemEval's
  default) a question that says "two weeks ago" or "last Saturday" lifts the units dated near
  that day (lca.temporal_anchor);
- ``resonance``: the full recall pipeline of a real substrate built from the haystack (transcript,
  faiss, bm25s, SQLite), candidates ranked by resonance score R with the question date as
  ``as_of``; the units beyond its candidate pool follow in hybrid order.

Embeddings are cached by content hash across runs (``--cache``), so a warm run embeds nothing.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

RETRIEVERS = ("bm25", "dense", "hybrid", "resonance")
RRF_K = 60
BM25_WEIGHT = 0.5    # z fusion: dense + 0.5 x BM25 (chosen on the dev splits)
ANCHOR_WEIGHT = 4.0  # z units added on the anchored day (chosen on the LongMemEval_S dev split)


def znorm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    spread = scores.std()
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)


# ---- rankers over a list of unit texts ---------------------------------------------------------
class UnitIndex:
    """One corpus of units, embedded and BM25-indexed once, scored for many queries."""

    def __init__(self, texts: Sequence[str], embedder, chunker, *, dense: bool = True) -> None:
        from lca.index.lexical import Bm25LexicalIndex

        self.n = len(texts)
        self.embedder = embedder
        self.lexical = Bm25LexicalIndex()
        self.lexical.build(list(range(self.n)), texts, "bench")
        self.vectors = self.owner = None
        if dense:
            pieces: list[str] = []
            owner: list[int] = []
            for i, text in enumerate(texts):
                for piece in chunker.split(text or " "):
                    pieces.append(piece.text)
                    owner.append(i)
            self.vectors = embedder.embed(pieces)
            self.owner = np.asarray(owner)

    def bm25(self, query: str) -> np.ndarray:
        scores = np.zeros(self.n, dtype=np.float32)
        found, rows = self.lexical.search(query, self.n)
        scores[rows] = found
        return scores

    def dense(self, query: str) -> np.ndarray:
        """A unit longer than the embedder's input scores as its best piece."""
        sims = self.vectors @ self.embedder.embed_query(query)
        scores = np.full(self.n, -1.0, dtype=np.float32)
        np.maximum.at(scores, self.owner, sims.astype(np.float32))
        return scores


def ranking_of(scores: np.ndarray) -> list[int]:
    """Descending score, ties by position (stable)."""
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))]


def rrf(*rankings: Sequence[int], n: int) -> list[int]:
    fused = np.zeros(n, dtype=np.float64)
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] += 1.0 / (RRF_K + rank)
    return ranking_of(fused)


def rank_units(units: "UnitIndex", query: str, retriever: str,
               resonance: Callable[[], list[int]] | None = None, *, fusion: str = "z",
               context: "UnitIndex | None" = None, anchor: np.ndarray | None = None) -> list[int]:
    if retriever == "bm25":
        return ranking_of(units.bm25(query))
    dense_values = units.dense(query)
    dense = ranking_of(dense_values)
    if retriever == "dense":
        return dense
    bm25_values = units.bm25(query)
    if fusion == "rrf":
        hybrid = rrf(dense, ranking_of(bm25_values), n=units.n)
    else:
        fused = znorm(dense_values) + BM25_WEIGHT * znorm(bm25_values)
        if context is not None:
            fused += znorm(context.dense(query)) + BM25_WEIGHT * znorm(context.bm25(query))
        if anchor is not None:
            fused += ANCHOR_WEIGHT * anchor
        hybrid = ranking_of(fused.astype(np.float32))
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

    def __init__(self, texts: Sequence[str], dates: Sequence[str | None], embedder, workdir: Path) -> None:
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
        self.substrate = Substrate(workdir, embedder=embedder, recall_config=config)
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
                    workdir: Path, fusion: str = "z", context: bool = False, anchors: bool = True) -> dict[str, Any]:
    from lca.importers import parse_longmemeval_date
    from lca.temporal_anchor import anchor_weight, temporal_anchor
    from lca.importers import load_official_json
    from protocols.evals.longmemeval.retrieval_metrics import average, question_units, score_ranking

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
                index = ResonanceIndex(texts, dates, embedder, workdir)
                try:
                    return index.rank(q, asked)
                finally:
                    index.close()
        anchor = temporal_anchor(query, parse_longmemeval_date(record.get("question_date"))) if anchors else None
        weights = np.array([anchor_weight(anchor, parse_longmemeval_date(d)) for d in units.dates]) if anchor else None
        context_texts = None
        if context:
            sessions = [u.rsplit("_", 1)[0] for u in units.ids]
            context_texts = [" ".join(units.texts[j] for j in (i - 1, i, i + 1)
                                      if 0 <= j < len(units.texts) and sessions[j] == sessions[i])
                             for i in range(len(units.texts))]
        dense = retriever != "bm25"
        ranking = rank_units(UnitIndex(units.texts, embedder, chunker, dense=dense), query, retriever, resonance,
                             fusion=fusion, anchor=weights,
                             context=UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None)
        seconds.append(time.perf_counter() - started)
        results.append({"question_id": record["question_id"], "question_type": record["question_type"],
                        "anchor": anchor.expression if anchor else None,
                        "has_gold": bool(units.gold), "metrics": score_ranking(ranking, units, "turn")})
    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r["question_type"]].append(r)
    return {
        "strict": average(results, convention="strict"), "lenient": average(results, convention="lenient"),
        "by_question_type": {t: average(rs, convention="strict") for t, rs in sorted(by_type.items())},
        "seconds_per_question": {"median": statistics.median(seconds), "max": max(seconds),
                                 "total": sum(seconds)},
        "questions": len(results), "per_question": results,
    }


LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def run_locomo(path: Path, retriever: str, *, embedder, chunker, limit: int | None, progress,
               workdir: Path, fusion: str = "z", context: bool = True, anchors: bool = False,
               ks=(1, 5, 10, 25)) -> dict[str, Any]:
    from lca.importers import load_official_json

    records = load_official_json(path)
    if limit:
        records = records[:limit]
    per_item, seconds, unparsed = [], [], 0
    for record in progress(records):
        conversation = record["conversation"]
        texts, ids, dates, session_of = [], [], [], []
        for key in sorted((k for k in conversation if k.startswith("session_") and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1])):
            when = conversation.get(f"{key}_date_time", "")
            for turn in conversation[key]:
                caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                texts.append(f"{turn['speaker']}: {turn['text']}{caption}")
                ids.append(turn["dia_id"])
                dates.append(when)
                session_of.append(key)
        context_texts = None
        if context:
            context_texts = ["\n".join([f"[{dates[i]}]"] + [texts[j] for j in (i - 1, i, i + 1)
                                                             if 0 <= j < len(texts) and session_of[j] == session_of[i]])
                             for i in range(len(texts))]
        known = set(ids)
        dense = retriever != "bm25"
        index = UnitIndex(texts, embedder, chunker, dense=dense)
        context_index = UnitIndex(context_texts, embedder, chunker, dense=dense) if context_texts else None
        resonance_index = ResonanceIndex(texts, dates, embedder, workdir) if retriever == "resonance" else None
        for qa in record["qa"]:
            evidence = []
            for raw in qa.get("evidence", []):
                for part in str(raw).replace(",", ";").split(";"):
                    part = part.strip()
                    if part in known:
                        evidence.append(part)
                    elif part:
                        unparsed += 1
            if not evidence:
                continue
            started = time.perf_counter()
            ranking = rank_units(index, str(qa["question"]), retriever,
                                 (lambda q=str(qa["question"]): resonance_index.rank(q))
                                 if resonance_index is not None else None, fusion=fusion, context=context_index)
            seconds.append(time.perf_counter() - started)
            ranked = [ids[i] for i in ranking]
            row = {"sample_id": record["sample_id"], "category": int(qa["category"]), "evidence": sorted(set(evidence))}
            for k in ks:
                top = set(ranked[:k])
                row[f"recall@{k}"] = sum(1 for e in set(evidence) if e in top) / len(set(evidence))
            per_item.append(row)
        if resonance_index is not None:
            resonance_index.close()

    def mean_of(rows, name):
        return sum(r[name] for r in rows) / len(rows) if rows else None
    by_category = {f"{c} {LOCOMO_CATEGORIES[c]}": {f"recall@{k}": mean_of([r for r in per_item if r["category"] == c],
                                                                          f"recall@{k}") for k in ks}
                   | {"n": sum(1 for r in per_item if r["category"] == c)} for c in sorted(LOCOMO_CATEGORIES)}
    return {"overall": {f"recall@{k}": mean_of(per_item, f"recall@{k}") for k in ks} | {"n": len(per_item)},
            "categories_1_to_4": {f"recall@{k}": mean_of([r for r in per_item if r["category"] != 5], f"recall@{k}")
                                  for k in ks} | {"n": sum(1 for r in per_item if r["category"] != 5)},
            "by_category": by_category, "unparsed_evidence_ids": unparsed,
            "seconds_per_question": {"median": statistics.median(seconds), "total": sum(seconds)} if seconds else {},
            "items": len(per_item), "per_item": per_item}


# ---- the command ------------------------------------------------------------------------------------
def run_retrieval_bench(args) -> int:
    from tqdm import tqdm

    from lca.importers import file_sha256
    from lca.index.chunker import Chunker
    from lca.index.embedders import SentenceTransformerEmbedder
    from lca.index.embedding_cache import CachedEmbedder
    from lca.provenance import code_version
    from protocols.data_paths import find_data_file

    path = find_data_file("locomo" if args.dataset == "locomo" else "longmemeval_s_dev", args.data)
    if path is None:
        raise FileNotFoundError(f"no {args.dataset} file: pass --data PATH (a file in the official format, plain, "
                                ".gz or .xz, or a folder holding it) or set LCA_DATA")
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.cache)
    chunker = Chunker(embedder)
    workdir = Path(args.out).parent / "work-retrieval"

    def progress(items):
        return tqdm(items, desc=f"{args.dataset} {args.retriever}", unit="q", disable=args.quiet)

    started = time.perf_counter()
    runner = run_longmemeval if args.dataset == "longmemeval" else run_locomo
    options = {"fusion": args.fusion}
    if args.context is not None:
        options["context"] = args.context == "on"
    if args.anchors is not None:
        options["anchors"] = args.anchors == "on"
    report = runner(path, args.retriever, embedder=embedder, chunker=chunker, limit=args.limit, progress=progress,
                    workdir=workdir, **options)
    report["provenance"] = {"dataset": args.dataset, "file": str(path), "sha256": file_sha256(path),
                            "retriever": args.retriever, "embedder": embedder.embedder_id, "options": options,
                            "code_version": code_version(), "limit": args.limit,
                            "embedding_cache": {"path": str(embedder.path), "hits": embedder.hits,
                                                "misses": embedder.misses},
                            "wall_seconds": time.perf_counter() - started}
    out = Path(args.out.format(dataset=args.dataset, retriever=args.retriever))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=float), encoding="utf-8")
    table = markdown_table(report, args.dataset)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {out} and {out.with_suffix('.md')}")
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
        lines += ["| units: dialog turns | n | recall@1 | recall@5 | recall@10 | recall@25 |", "| --- | --- | --- | --- | --- | --- |"]
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
