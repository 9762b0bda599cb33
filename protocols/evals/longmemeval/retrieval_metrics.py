"""LongMemEval's retrieval metrics, as its official evaluation computes them.

Units are user turns only. A session unit's text is its user turns joined by one space; a turn
unit's id is ``{session_id}_{i+1}`` with ``i`` counting every turn of the session. Gold units are
the ids containing ``answer`` (evidence sessions carry it in their id); an evidence session with
no user turn marked ``has_answer`` (or, at turn level, an evidence turn not so marked) is renamed
with ``noans`` and stops being gold. At each k: ``recall_any`` (a gold unit in the top k),
``recall_all`` (every gold unit in the top k), ``ndcg_any`` (binary relevance, DCG = rel_1 + sum
rel_i / log2(i) for i >= 2, over the ideal ordering of all units). A turn ranking is scored at
session level by mapping turns to their sessions and growing k until k distinct sessions are
covered. A question without gold scores recall_any 0, recall_all 1, ndcg 0; the "strict" average
drops such questions, the "lenient" one keeps them; abstention questions (``_abs``) are always
dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KS = (1, 3, 5, 10, 30, 50)


@dataclass(frozen=True)
class Units:
    """One question's retrieval corpus at one granularity."""

    texts: tuple[str, ...]
    ids: tuple[str, ...]
    dates: tuple[str, ...]

    @property
    def gold(self) -> frozenset[str]:
        return frozenset(i for i in self.ids if "answer" in i)


def question_units(record: Mapping[str, Any], granularity: str) -> Units:
    texts: list[str] = []
    ids: list[str] = []
    dates: list[str] = []
    for session_id, turns, date in zip(
        record["haystack_session_ids"], record["haystack_sessions"], record["haystack_dates"], strict=False
    ):
        user = [(i, t) for i, t in enumerate(turns) if t.get("role") == "user"]
        if granularity == "session":
            texts.append(" ".join(t["content"] for _, t in user))
            evidence = "answer" in session_id
            ids.append(
                session_id.replace("answer", "noans")
                if evidence and not any(t.get("has_answer") for _, t in user)
                else session_id
            )
            dates.append(date)
        elif granularity == "turn":
            for i, turn in user:
                unit = f"{session_id}_{i + 1}"
                if "answer" in session_id and not turn.get("has_answer"):
                    unit = unit.replace("answer", "noans")
                texts.append(turn["content"])
                ids.append(unit)
                dates.append(date)
        else:
            raise ValueError(f"granularity must be 'session' or 'turn', got {granularity!r}")
    return Units(tuple(texts), tuple(ids), tuple(dates))


def _dcg(relevances: Sequence[float]) -> float:
    return sum(rel if rank == 1 else rel / math.log2(rank) for rank, rel in enumerate(relevances, 1))


def at_k(ranking: Sequence[int], ids: Sequence[str], gold: Iterable[str], k: int) -> tuple[float, float, float]:
    """recall_any, recall_all, ndcg_any at k for one ranking (indices into ``ids``)."""
    gold = set(gold)
    top = {ids[i] for i in ranking[:k]}
    recall_any = float(any(g in top for g in gold))
    recall_all = float(all(g in top for g in gold))
    relevance = [1.0 if ids[i] in gold else 0.0 for i in ranking[:k]]
    ideal = sorted((1.0 if u in gold else 0.0 for u in ids), reverse=True)[:k]
    ideal_dcg = _dcg(ideal)
    return recall_any, recall_all, (_dcg(relevance) / ideal_dcg if ideal_dcg else 0.0)


def strip_turn(unit_id: str) -> str:
    return unit_id.rsplit("_", 1)[0]


def turn_ranking_as_sessions(
    ranking: Sequence[int], ids: Sequence[str], gold: Iterable[str], k: int
) -> tuple[float, float, float]:
    """A turn ranking scored at session level: k grows until it covers k distinct sessions."""
    sessions = [strip_turn(u) for u in ids]
    gold_sessions = {strip_turn(g) for g in gold}
    effective = k
    while effective <= len(sessions) and len({sessions[i] for i in ranking[:effective]}) < k:
        effective += 1
    return at_k(ranking, sessions, gold_sessions, effective)


def score_ranking(ranking: Sequence[int], units: Units, granularity: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"session": {}, "turn": {}}
    for k in KS:
        r_any, r_all, ndcg = at_k(ranking, units.ids, units.gold, k)
        out[granularity].update({f"recall_any@{k}": r_any, f"recall_all@{k}": r_all, f"ndcg_any@{k}": ndcg})
        if granularity == "turn":
            r_any, r_all, ndcg = turn_ranking_as_sessions(ranking, units.ids, units.gold, k)
            out["session"].update({f"recall_any@{k}": r_any, f"recall_all@{k}": r_all, f"ndcg_any@{k}": ndcg})
    return out


def average(results: Sequence[Mapping[str, Any]], *, convention: str) -> dict[str, Any]:
    """Mean of each metric over questions: abstention dropped; 'strict' also drops questions without gold."""
    if convention not in ("strict", "lenient"):
        raise ValueError("convention is 'strict' or 'lenient'")
    kept = [r for r in results if "_abs" not in r["question_id"] and (convention == "lenient" or r["has_gold"])]
    out: dict[str, Any] = {"n": len(kept)}
    for level in ("session", "turn"):
        names = sorted({name for r in kept for name in r["metrics"][level]})
        out[level] = {name: sum(r["metrics"][level][name] for r in kept) / len(kept) for name in names} if kept else {}
    return out
