"""LoCoMo for ``lca bench retrieval``: evidence recall@k over dialog turns, one store per conversation.

LoCoMo questions carry no date: each is asked at the end of its conversation (``history_end``), as the locomo
task asks it, so a relative time in it reads against the conversation. A question whose evidence ids name no
turn of its conversation is not scored; the ids that name none (or are malformed) are counted, and the strings
split and ids rewritten on the way are counted too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lca.importers import history_end, import_locomo, load_official_json
from protocols.evals.dataset_plugin import (
    TOP_IDS,
    Haystack,
    RetrievalAdapter,
    RetrievalQuestion,
    sessions_by,
    timing,
)
from protocols.evals.locomo.dataset import CATEGORY_NAMES, parse_evidence_ids
from protocols.evals.locomo.plugin import KS


def locomo_summary(
    per_item: list[dict], seconds: list[float], unparsed: int, ks=KS, repaired: Counter | None = None
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
        "seconds_per_question": timing(seconds),
        "items": len(per_item),
        "per_item": per_item,
    }


class LocomoRetrieval(RetrievalAdapter):
    """The first ``limit`` conversations of a LoCoMo file, every QA item a question of its conversation."""

    def __init__(self, path: Path, *, limit: int | None = None, ks: Sequence[int] = KS) -> None:
        self.records = load_official_json(path)
        if limit:
            self.records = self.records[:limit]
        sessions, _ = import_locomo(path, sample_ids=[str(r["sample_id"]) for r in self.records])
        self.by_sample = sessions_by(sessions, lambda sid: sid.split(":", 2)[1])
        self.ks = tuple(ks)
        self.unparsed = 0
        self.repaired: Counter = Counter()

    def questions(self) -> list[RetrievalQuestion]:
        return [
            RetrievalQuestion(str(record["sample_id"]), f"{record['sample_id']}:{number}", str(qa["question"]), qa)
            for record in self.records
            for number, qa in enumerate(record["qa"])
        ]

    def haystack(self, key: str) -> Haystack:
        sessions = self.by_sample.get(key, [])
        dia_of = {e.id: str(e.meta.get("dia_id")) for s in sessions for e in s.entries}
        return Haystack(sessions, dia_of, ends=history_end(sessions))

    def gold(self, question: RetrievalQuestion, haystack: Haystack) -> set[str] | None:
        """The question's evidence ids that name a dialog turn (None when none does); the ids that named none
        (or were malformed) are counted in ``unparsed``, the strings split and ids rewritten in ``repaired``."""
        known = set(haystack.unit_of.values())
        evidence = set()
        for part in parse_evidence_ids(question.item.get("evidence", []), self.repaired):
            if part in known:
                evidence.add(part)
            else:
                self.unparsed += 1
        return evidence or None

    def row(self, question: RetrievalQuestion, gold: set[str], ranking: Sequence[Any], seconds: float) -> dict:
        row: dict[str, Any] = {
            "question_id": question.id,
            "sample_id": question.haystack,
            "question": question.text,
            "category": int(question.item["category"]),
            "evidence": sorted(gold),
            "retrieved": list(ranking[:TOP_IDS]),
            "seconds": seconds,
        }
        for k in self.ks:
            row[f"recall@{k}"] = len(gold & set(ranking[:k])) / len(gold)
        return row

    def summary(self, rows: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
        return locomo_summary(rows, seconds, self.unparsed, self.ks, self.repaired)

    @staticmethod
    def headline(report: Mapping[str, Any]) -> dict[str, float]:
        return {
            "recall@5": report["overall"]["recall@5"],
            "recall@10": report["overall"]["recall@10"],
            "recall@5 (categories 1-4)": report["categories_1_to_4"]["recall@5"],
        }

    @staticmethod
    def table(report: Mapping[str, Any]) -> list[str]:
        """Recall@k over dialog turns: all categories, categories 1-4 and each category that has items."""
        lines = [
            "| units: dialog turns | n | recall@1 | recall@5 | recall@10 | recall@25 |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, table in [
            ("all categories", report["overall"]),
            ("categories 1-4", report["categories_1_to_4"]),
            *report["by_category"].items(),
        ]:
            if table["n"]:
                lines.append(
                    f"| {name} | {table['n']} | " + " | ".join(f"{table[f'recall@{k}']:.4f}" for k in KS) + " |"
                )
        return lines
