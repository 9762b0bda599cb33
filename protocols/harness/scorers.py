"""Computed scorers: answer match and the model-free substrate measures.

``substrate`` reads what the condition injected (never what the model said): whether a gold
evidence turn is among the injected items' source pointers (``evidence_pointer``; conditions
without pointers, such as summaries, score 0 by construction), the share of the gold evidence's
key terms present in the injected text (``evidence_text``, comparable across every condition),
injected tokens, recall latency, and ``shortfall``: the share of samples whose condition did less than it
claims (no memory written, a failed cycle, an empty handoff; the kinds are in the packet's notes).
"""

from __future__ import annotations

import re
import string
from collections import Counter

from inspect_ai.scorer import Score, mean, scorer

from lca.ledger import key_terms
from protocols.harness.solvers import PACKET_KEY

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD-style: lowercase, drop punctuation and articles, squeeze spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def evidence_text_coverage(injected: str, evidence_texts) -> float:
    """Best coverage over the gold evidence turns of their key terms by the injected text."""
    have = key_terms(injected)
    scores = [len(key_terms(t) & have) / len(key_terms(t)) for t in evidence_texts if key_terms(t)]
    return max(scores, default=0.0)


def answer_match():
    @scorer(metrics={"f1": [mean()], "contains": [mean()]}, name="answer_match")
    def _make():
        async def score(state, target):
            completion = state.output.completion if state.output else ""
            gold = target.text
            contains = float(normalize_answer(gold) in normalize_answer(completion)) if gold else 0.0
            return Score(
                value={"f1": token_f1(completion, gold), "contains": contains},
                answer=completion,
                explanation=f"gold: {gold}",
            )

        return score

    return _make()


def substrate():
    @scorer(
        metrics={
            "evidence_pointer": [mean()],
            "evidence_text": [mean()],
            "injected_tokens": [mean()],
            "recall_latency_ms": [mean()],
            "shortfall": [mean()],
        },
        name="substrate",
    )
    def _make():
        async def score(state, target):
            packet = state.store.get(PACKET_KEY) or {}
            gold = state.metadata.get("gold", {})
            pointers = set(packet.get("pointers", []))
            hit = float(bool(pointers & set(gold.get("evidence", []))))
            coverage = evidence_text_coverage(packet.get("injected_text", ""), gold.get("evidence_texts", []))
            return Score(
                value={
                    "evidence_pointer": hit,
                    "evidence_text": round(coverage, 4),
                    "injected_tokens": float(packet.get("injected_tokens", 0)),
                    "recall_latency_ms": float(packet.get("recall_latency_ms", 0.0)),
                    "shortfall": float(bool((packet.get("notes") or {}).get("shortfalls"))),
                },
                explanation=f"{len(packet.get('items', []))} item(s) injected by {packet.get('condition')}",
                metadata={"packet": packet},
            )

        return score

    return _make()
