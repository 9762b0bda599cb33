"""LongMemEval as inspect samples: one Sample per question, its haystack loaded by reference.

The haystack enters through the substrate's importer (``lca.importers.import_longmemeval``), so it
becomes authoritative transcript. Gold evidence (the turns marked ``has_answer`` in the evidence
sessions, or the whole session when none is marked) is kept under ``gold`` for scorers only.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from lca.importers import file_sha256, import_longmemeval, load_official_json, parse_longmemeval_date
from protocols.harness.benchmarks import LoadReport, history_ref

LOADER = f"{__name__}:load_history"


def longmemeval_samples(path: Path | str, *, limit: int | None = None):
    from inspect_ai.dataset import Sample

    path = Path(path)
    records = load_official_json(path)
    report = LoadReport(str(path), file_sha256(path))
    samples = []
    for record in records[:limit] if limit else records:
        answer = record.get("answer")
        if not isinstance(answer, str):
            report.repaired["longmemeval_non_string_answer"] += 1
            answer = str(answer)
        qid = str(record["question_id"])
        gold_sessions = set(record.get("answer_session_ids") or ())
        evidence, texts = [], []
        for sid, turns in zip(record["haystack_session_ids"], record["haystack_sessions"], strict=False):
            if sid not in gold_sessions:
                continue
            marked = [i for i, t in enumerate(turns) if t.get("has_answer")]
            if not marked:
                report.repaired["longmemeval_evidence_session_without_has_answer"] += 1
            for i in marked or range(len(turns)):
                evidence.append(f"lme:{qid}:{sid}#lme:{qid}:{sid}:{i + 1}")
                texts.append(turns[i]["content"])
        report.questions += 1
        samples.append(
            Sample(
                id=qid,
                input=str(record["question"]),
                target=answer,
                metadata={
                    "question_type": record.get("question_type"),
                    "abstention": qid.endswith("_abs"),
                    "asked_at": _iso_or_none(parse_longmemeval_date(record.get("question_date"))),
                    "probe": qid,
                    "history_ref": history_ref(LOADER, str(path), report.sha256, qid),
                    "gold": {"evidence": evidence, "evidence_texts": texts[:20]},
                    "dataset_sha256": report.sha256,
                },
            )
        )
    return samples, report


def _iso_or_none(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


@lru_cache(maxsize=8)
def longmemeval_history(path: str, question_id: str):
    return import_longmemeval(path, question_ids=[question_id])


def load_history(ref: dict[str, Any]) -> dict[str, Any]:
    """One question's haystack, in the shape the setup solver replays."""
    sessions, _ = longmemeval_history(ref["file"], ref["id"])
    return {"identity": {}, "sessions": [{"id": s.session_id, "entries": list(s.entries)} for s in sessions]}
