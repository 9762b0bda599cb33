"""LongMemEval for ``lca bench retrieval``: session and turn recall by the official metrics
(``retrieval_metrics``), one store per question's haystack, each question asked on its question date.

``roles="user"`` builds each store from the user turns alone (the official retrieval units; the assistant's
turns are not in the store at all), ``"all"`` from every turn as an agent's store holds them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lca.importers import ImportedSession, import_longmemeval, load_official_json, parse_longmemeval_date
from lca.types import EntryKind
from protocols.evals.dataset_plugin import (
    TOP_IDS,
    Haystack,
    RetrievalAdapter,
    RetrievalQuestion,
    sessions_by,
    timing,
)
from protocols.evals.longmemeval.retrieval_metrics import Units, average, question_units, score_ranking


def longmemeval_summary(results: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
    """Strict and lenient averages, the strict average per question type, timings and per-question rows."""
    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r["question_type"]].append(r)
    return {
        "strict": average(results, convention="strict"),
        "lenient": average(results, convention="lenient"),
        "by_question_type": {t: average(rs, convention="strict") for t, rs in sorted(by_type.items())},
        "seconds_per_question": timing(seconds),
        "questions": len(results),
        "per_question": results,
    }


class LongMemEvalRetrieval(RetrievalAdapter):
    """The first ``limit`` questions of a LongMemEval file, each asked of a store of its own haystack."""

    def __init__(self, path: Path, *, limit: int | None = None, roles: str = "all") -> None:
        self.records = load_official_json(path)
        if limit:
            self.records = self.records[:limit]
        sessions, _ = import_longmemeval(path, question_ids=[str(r["question_id"]) for r in self.records])
        if roles == "user":
            sessions = [
                ImportedSession(s.session_id, tuple(e for e in s.entries if e.kind is EntryKind.USER_TURN))
                for s in sessions
            ]
        self.by_question = sessions_by(sessions, lambda sid: sid.split(":", 2)[1])
        self.record_of = {str(r["question_id"]): r for r in self.records}

    def questions(self) -> list[RetrievalQuestion]:
        return [
            RetrievalQuestion(
                str(r["question_id"]),
                str(r["question_id"]),
                str(r["question"]),
                r,
                as_of=parse_longmemeval_date(r.get("question_date")),
            )
            for r in self.records
        ]

    def haystack(self, key: str) -> Haystack:
        """The question's haystack; its units are the user turns, numbered in haystack order."""
        record = self.record_of[key]
        position = {
            f"{sid}_{i + 1}": n
            for n, (sid, i) in enumerate(
                (sid, i)
                for sid, turns in zip(record["haystack_session_ids"], record["haystack_sessions"], strict=False)
                for i, turn in enumerate(turns)
                if turn.get("role") == "user"
            )
        }
        sessions = self.by_question.get(key, [])
        unit_of = {
            entry.id: position[entry.meta["turn_id"]]
            for session in sessions
            for entry in session.entries
            if entry.meta.get("turn_id") in position
        }
        return Haystack(sessions, unit_of)

    def gold(self, question: RetrievalQuestion, haystack: Haystack) -> Units:
        return question_units(question.item, "turn")

    def row(self, question: RetrievalQuestion, gold: Units, ranking: Sequence[Any], seconds: float) -> dict:
        return {
            "question_id": question.id,
            "question": question.text,
            "question_type": question.item["question_type"],
            "retrieved": [gold.ids[i] for i in ranking[:TOP_IDS]],
            "has_gold": bool(gold.gold),
            "seconds": seconds,
            "metrics": score_ranking(ranking, gold, "turn"),
        }

    def summary(self, rows: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
        return longmemeval_summary(rows, seconds)

    @staticmethod
    def headline(report: Mapping[str, Any]) -> dict[str, float]:
        return {
            "recall_any@5 (strict)": report["strict"]["session"]["recall_any@5"],
            "recall_all@5 (lenient)": report["lenient"]["session"]["recall_all@5"],
            "ndcg_any@5 (strict)": report["strict"]["session"]["ndcg_any@5"],
            "recall_all@10 (lenient)": report["lenient"]["session"]["recall_all@10"],
        }

    @staticmethod
    def table(report: Mapping[str, Any]) -> list[str]:
        """The session tables (strict, lenient) and the turn table, then the strict figures per question type."""
        strict, lenient = report["strict"], report["lenient"]
        lines = [
            "| convention | n | recall_any@5 | recall_all@5 | ndcg_any@5 | recall_any@10 | recall_all@10 |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, table in (("session, strict", strict), ("session, lenient", lenient)):
            s = table["session"]
            lines.append(
                f"| {name} | {table['n']} | {s['recall_any@5']:.4f} | {s['recall_all@5']:.4f} | "
                f"{s['ndcg_any@5']:.4f} | {s['recall_any@10']:.4f} | {s['recall_all@10']:.4f} |"
            )
        t = strict["turn"]
        lines.append(
            f"| turn, strict | {strict['n']} | {t['recall_any@5']:.4f} | {t['recall_all@5']:.4f} | "
            f"{t['ndcg_any@5']:.4f} | {t['recall_any@10']:.4f} | {t['recall_all@10']:.4f} |"
        )
        lines += [
            "",
            "| question type (strict) | n | session recall_any@5 | session recall_all@5 |",
            "| --- | --- | --- | --- |",
        ]
        for qtype, table in report["by_question_type"].items():
            if table["n"]:
                lines.append(
                    f"| {qtype} | {table['n']} | {table['session']['recall_any@5']:.4f} | "
                    f"{table['session']['recall_all@5']:.4f} |"
                )
        return lines
