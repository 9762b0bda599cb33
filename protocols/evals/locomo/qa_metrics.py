"""LoCoMo's QA score, as its official evaluation computes it.

Normalization: drop commas, lowercase, drop punctuation, replace the words a / an / the / and
with a space, squeeze whitespace; then Porter-stem every token (NLTK) and take token F1 over the
multiset overlap. By category (LoCoMo's own ids): 2 temporal, 3 open-domain, 4 single-hop: F1
against the answer (for 3, the answer is first cut at its first ';'); 1 multi-hop: split both
sides on commas, best F1 over prediction parts for each gold part, averaged over gold parts;
5 adversarial: 1 when the prediction says "no information available" or "not mentioned".
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache

from protocols.evals.locomo.dataset import CATEGORY_NAMES

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def normalize(text: str) -> str:
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    stem = _stemmer().stem
    return [stem(w) for w in normalize(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = _tokens(prediction), _tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    parts = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)


def locomo_score(prediction: str, answer: object, category: int) -> float:
    """The score of one QA item; ``answer`` may be an int (six items are) or absent for category 5."""
    if category == 5:
        lowered = prediction.lower()
        return float("no information available" in lowered or "not mentioned" in lowered)
    gold = str(answer)
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return float(multi_answer_f1(prediction, gold))
    if category in (2, 4):
        return token_f1(prediction, gold)
    if category == 3:
        return token_f1(prediction, gold)
    raise ValueError(f"unknown LoCoMo category {category!r}; known: {sorted(CATEGORY_NAMES)}")
