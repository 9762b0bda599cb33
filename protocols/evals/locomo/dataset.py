"""LoCoMo as inspect samples: one Sample per QA item, its conversation loaded by reference.

The conversation enters through the substrate's importer (``lca.importers.import_locomo``), so it
becomes authoritative transcript. Evidence ids (``D1:3``) are mapped to the imported entries and kept
under ``gold`` for scorers only; ids that are malformed or point at no turn are counted, never dropped
silently. Category-2 questions get the paper's date instruction appended. The evidence-id parser and
the category table live here once; the retrieval benchmark imports them.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from lca.importers import file_sha256, history_end, import_locomo, load_official_json
from protocols.harness.benchmarks import LoadReport, history_ref

LOADER = f"{__name__}:load_history"
# LoCoMo's own category ids and names; other projects relabel them, reports always use these.
CATEGORY_NAMES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
DATE_INSTRUCTION = " Use DATE of CONVERSATION to answer with an approximate date."
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")  # D3:12, and the file's variants D:11:26 and D30:05


def parse_evidence_ids(raw: object, repaired: Counter | None = None) -> list[str]:
    """Evidence or observation ids as given: one string or a list of them. A string may hold several ids
    (``"D8:6; D9:17"``, ``"D1:3,D1:4"``, ``"D9:1 D4:4 D4:6"``), split on ';', ',' and whitespace; an id written out
    of form (``"D:11:26"``, ``"D30:05"``) is read as the turn it names (``D11:26``, ``D30:5``). What matches no form
    passes through as written (``"D"``): whether an id names a real turn is the caller's check, and the caller counts
    it. ``repaired``, when given, counts the strings split and the ids rewritten."""
    ids: list[str] = []
    for part in raw if isinstance(raw, list) else [raw]:
        pieces = [p for p in re.split(r"[;,\s]+", str(part)) if p]
        if repaired is not None and len(pieces) > 1:
            repaired["locomo_evidence_split"] += 1
        for piece in pieces:
            form = _EVIDENCE_ID.fullmatch(piece)
            canonical = f"D{int(form[1])}:{int(form[2])}" if form else piece
            if repaired is not None and canonical != piece:
                repaired["locomo_evidence_id_rewritten"] += 1
            ids.append(canonical)
    return ids


def locomo_samples(path: Path | str, *, limit: int | None = None, sessions: int = 0):
    """One Sample per QA item; category-2 questions get the paper's date instruction appended.

    ``sessions`` > 0 slices each conversation to its first that many sessions and keeps only the questions
    whose evidence lies wholly inside them (questions without evidence ids cannot be placed and are left
    out); both counts are in the load report. A slice keeps a study with a slow agent model within its time
    budget without changing the questions it does ask."""
    if sessions < 0:
        raise ValueError(f"locomo: sessions must be 0 (all) or a positive count, not {sessions}")
    from inspect_ai.dataset import Sample

    path = Path(path)
    records = load_official_json(path)
    report = LoadReport(str(path), file_sha256(path))
    samples = []
    for record in records[:limit] if limit else records:
        sample_id = str(record["sample_id"])
        history, _ = locomo_history(str(path), sample_id)
        by_dia = {e.meta.get("dia_id"): e for s in history for e in s.entries}
        kept_ids = {e.id for s in history[:sessions] for e in s.entries} if sessions else set()
        end = history_end(history[:sessions] if sessions else history)  # asked after the history it is told
        for n, qa in enumerate(record["qa"]):
            if sessions:
                cited = [by_dia.get(p) for raw in qa.get("evidence", []) for p in parse_evidence_ids(raw)]
                if not cited or any(e is None or e.id not in kept_ids for e in cited):
                    report.left_out["outside_session_slice"] += 1
                    continue
            category = int(qa["category"])
            if "answer" not in qa:
                report.repaired["locomo_answer_missing_adversarial_used"] += 1
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            if not isinstance(answer, str):
                report.repaired["locomo_non_string_answer"] += 1
                answer = str(answer)
            evidence, texts = [], []
            for raw in qa.get("evidence", []):
                for part in parse_evidence_ids(raw, report.repaired):
                    entry = by_dia.get(part)
                    if entry is None:
                        report.unparsed.append(f"{sample_id} qa {n}: evidence '{part}'")
                        continue
                    evidence.append(f"{entry.session_id}#{entry.id}")
                    texts.append(entry.content)
            question = str(qa["question"])
            if category == 2:
                question += DATE_INSTRUCTION
            report.questions += 1
            samples.append(
                Sample(
                    id=f"{sample_id}:{n}",
                    input=question,
                    target=answer,
                    metadata={
                        "category": category,
                        "probe": f"{sample_id}:{n}",
                        "asked_at": end.isoformat() if end else None,
                        "history_ref": history_ref(LOADER, str(path), report.sha256, sample_id)
                        | ({"sessions": sessions} if sessions else {}),
                        "gold": {"evidence": evidence, "evidence_texts": texts},
                        "dataset_sha256": report.sha256,
                    },
                )
            )
    return samples, report


@lru_cache(maxsize=4)
def locomo_history(path: str, sample_id: str):
    return import_locomo(path, sample_ids=[sample_id])


def load_history(ref: dict[str, Any]) -> dict[str, Any]:
    """One conversation, in the shape the setup solver replays."""
    sessions, _ = locomo_history(ref["file"], ref["id"])
    if ref.get("sessions"):
        sessions = sessions[: int(ref["sessions"])]
    return {"identity": {}, "sessions": [{"id": s.session_id, "entries": list(s.entries)} for s in sessions]}
