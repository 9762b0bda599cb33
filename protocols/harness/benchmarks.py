"""LongMemEval and LoCoMo as inspect datasets: one Sample per question.

Haystacks enter through the substrate's importers, so they become authoritative transcript.
A sample's metadata names its history (``history_ref``: file, sha256, question or conversation)
rather than embedding it: a LongMemEval_S haystack is about 115k tokens, and a log that copied
one per sample would be hundreds of megabytes. The setup solver loads the history by reference
(cached per file). Gold evidence is kept under ``gold`` for scorers only. Every quirk the importers
repair or cannot parse is counted in ``LoadReport``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lca.importers import (file_sha256, import_locomo, import_longmemeval, load_official_json,
                           parse_longmemeval_date)


@dataclass
class LoadReport:
    """What loading repaired or could not parse, with counts."""

    file: str
    sha256: str
    questions: int = 0
    repaired: Counter = field(default_factory=Counter)
    unparsed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "sha256": self.sha256, "questions": self.questions,
                "repaired": dict(self.repaired), "unparsed": self.unparsed[:50], "unparsed_count": len(self.unparsed)}


# ---- LongMemEval ------------------------------------------------------------------------------------
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
        for sid, turns in zip(record["haystack_session_ids"], record["haystack_sessions"]):
            if sid not in gold_sessions:
                continue
            marked = [i for i, t in enumerate(turns) if t.get("has_answer")]
            if not marked:
                report.repaired["longmemeval_evidence_session_without_has_answer"] += 1
            for i in marked or range(len(turns)):
                evidence.append(f"lme:{qid}:{sid}#lme:{qid}:{sid}:{i + 1}")
                texts.append(turns[i]["content"])
        report.questions += 1
        samples.append(Sample(
            id=qid, input=str(record["question"]), target=answer,
            metadata={"question_type": record.get("question_type"), "abstention": qid.endswith("_abs"),
                      "asked_at": _iso_or_none(parse_longmemeval_date(record.get("question_date"))),
                      "probe": qid,
                      "history_ref": {"dataset": "longmemeval", "file": str(path), "sha256": report.sha256,
                                      "id": qid},
                      "gold": {"evidence": evidence, "evidence_texts": texts[:20]},
                      "dataset_sha256": report.sha256}))
    return samples, report


def _iso_or_none(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


# ---- LoCoMo -----------------------------------------------------------------------------------------
def locomo_samples(path: Path | str, *, limit: int | None = None):
    """One Sample per QA item; category-2 questions get the paper's date instruction appended."""
    from inspect_ai.dataset import Sample

    path = Path(path)
    records = load_official_json(path)
    report = LoadReport(str(path), file_sha256(path))
    samples = []
    for record in records[:limit] if limit else records:
        sample_id = str(record["sample_id"])
        sessions, _ = locomo_history(str(path), sample_id)
        by_dia = {e.meta.get("dia_id"): e for s in sessions for e in s.entries}
        for n, qa in enumerate(record["qa"]):
            category = int(qa["category"])
            if "answer" not in qa:
                report.repaired["locomo_answer_missing_adversarial_used"] += 1
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            if not isinstance(answer, str):
                report.repaired["locomo_non_string_answer"] += 1
                answer = str(answer)
            evidence, texts = [], []
            for raw in qa.get("evidence", []):
                parts = [p.strip() for p in str(raw).replace(",", ";").split(";") if p.strip()]
                if len(parts) > 1:
                    report.repaired["locomo_evidence_split"] += 1
                for part in parts:
                    entry = by_dia.get(part)
                    if entry is None:
                        report.unparsed.append(f"{sample_id} qa {n}: evidence '{part}'")
                        continue
                    evidence.append(f"{entry.session_id}#{entry.id}")
                    texts.append(entry.content)
            question = str(qa["question"])
            if category == 2:
                question += " Use DATE of CONVERSATION to answer with an approximate date."
            report.questions += 1
            samples.append(Sample(
                id=f"{sample_id}:{n}", input=question, target=answer,
                metadata={"category": category, "probe": f"{sample_id}:{n}", "asked_at": None,
                          "history_ref": {"dataset": "locomo", "file": str(path), "sha256": report.sha256,
                                          "id": sample_id},
                          "gold": {"evidence": evidence, "evidence_texts": texts},
                          "dataset_sha256": report.sha256}))
    return samples, report


@lru_cache(maxsize=4)
def locomo_history(path: str, sample_id: str):
    return import_locomo(path, sample_ids=[sample_id])


@lru_cache(maxsize=8)
def longmemeval_history(path: str, question_id: str):
    return import_longmemeval(path, question_ids=[question_id])


def load_history(ref: dict[str, Any]) -> dict[str, Any]:
    """The history a ``history_ref`` names, in the shape the setup solver replays."""
    if ref["dataset"] == "locomo":
        sessions, _ = locomo_history(ref["file"], ref["id"])
    elif ref["dataset"] == "longmemeval":
        sessions, _ = longmemeval_history(ref["file"], ref["id"])
    else:
        raise ValueError(f"unknown history dataset {ref['dataset']!r}")
    return {"identity": {}, "sessions": [{"id": s.session_id, "entries": list(s.entries)} for s in sessions]}


def as_hf_dataset(samples):
    """The same samples as a ``datasets.Dataset`` for analysis (question, answer and flat metadata)."""
    import datasets

    rows = [{"id": str(s.id), "question": s.input, "answer": s.target,
             **{k: v for k, v in (s.metadata or {}).items() if k not in ("gold", "history_ref")},
             "gold_evidence": list((s.metadata or {}).get("gold", {}).get("evidence", []))} for s in samples]
    return datasets.Dataset.from_list(rows)
