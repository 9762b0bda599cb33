"""The weights of an additive score fitted to labelled candidates: a pairwise logistic regression (scikit-learn)
over the differences of a relevant and an irrelevant candidate's parts, with every weight held at or above 0 (the
config's range) by fitting again without a weight that came out negative, and scaled so the anchor weight keeps
its value (a ranking does not change with the score's scale). Folds never split a group (a conversation, a
haystack, a scenario): ``group_folds``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


class FitError(ValueError):
    """The data cannot be fitted (no question with both a relevant and an irrelevant candidate, an anchor that
    comes out at or below 0)."""


@dataclass(frozen=True)
class LabelledQuestion:
    """One question's candidates in the order the defaults rank them: each candidate's parts (columns in the
    order of the fit's names) and whether it is relevant (gold)."""

    question_id: str
    group: str
    parts: np.ndarray  # candidates x names
    relevant: np.ndarray  # bool per candidate


@dataclass(frozen=True)
class FitSettings:
    """How the weights are fitted: ``depth`` irrelevant candidates per question (the defaults' top ones), the
    regularization ``c`` (scikit-learn's C) and the weight whose value is kept (the scale)."""

    depth: int = 50
    c: float = 1.0
    anchor: str = "dense_weight"


def pairs(questions: Sequence[LabelledQuestion], depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(differences, labels, sample weights): each relevant candidate minus each of the question's top ``depth``
    irrelevant ones (label 1) and the reverse (label 0); each question weighs 1 in all."""
    rows, weights = [], []
    for question in questions:
        relevant = np.flatnonzero(question.relevant)
        irrelevant = np.flatnonzero(~question.relevant)[:depth]
        if not len(relevant) or not len(irrelevant):
            continue
        diff = (question.parts[relevant][:, None, :] - question.parts[irrelevant][None, :, :]).reshape(
            -1, question.parts.shape[1]
        )
        rows.append(diff)
        weights.append(np.full(len(diff), 1.0 / len(diff)))
    if not rows:
        raise FitError("no question has both a relevant and an irrelevant candidate: nothing to fit")
    x = np.vstack(rows)
    w = np.concatenate(weights)
    return np.vstack([x, -x]), np.concatenate([np.ones(len(x)), np.zeros(len(x))]), np.concatenate([w, w])


def fit_weights(
    questions: Sequence[LabelledQuestion],
    names: Sequence[str],
    defaults: Mapping[str, float],
    settings: FitSettings = FitSettings(),
    *,
    upper: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """One weight per name, each at least 0 (and at most its ``upper`` bound, where it has one), the anchor at
    its default. A weight whose coefficient comes out negative is set to 0 and the rest fitted again (one at a
    time, the most negative first)."""
    from sklearn.linear_model import LogisticRegression

    if settings.anchor not in names:
        raise FitError(f"the anchor {settings.anchor} is not among the fitted weights {', '.join(names)}")
    x, y, w = pairs(questions, settings.depth)
    active = list(range(len(names)))
    while True:
        model = LogisticRegression(fit_intercept=False, C=settings.c, max_iter=1000)
        model.fit(x[:, active], y, sample_weight=w)
        coef = dict(zip(active, model.coef_[0].tolist(), strict=True))
        negative = [i for i in active if coef[i] < 0 and names[i] != settings.anchor]
        if not negative:
            break
        active.remove(min(negative, key=lambda i: coef[i]))
    anchor = coef[names.index(settings.anchor)]
    if anchor <= 0:
        raise FitError(f"{settings.anchor} came out at {anchor:.4g}: no positive scale to keep")
    scale = defaults[settings.anchor] / anchor
    bound = upper or {}
    return {name: round(min(coef.get(i, 0.0) * scale, bound.get(name, np.inf)), 4) for i, name in enumerate(names)}


def group_folds(groups: Sequence[str], scheme: str, splits: int = 5) -> list[tuple[list[str], list[str]]]:
    """(training groups, held-out groups) per fold: ``leave-one-out`` (one group held out at a time) or
    ``grouped`` (``splits`` folds of whole groups, scikit-learn's GroupKFold). No group is on both sides."""
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    labels = sorted(set(groups))
    if len(labels) < 2:
        raise FitError(f"{len(labels)} group: held-out folds need at least 2")
    if scheme == "leave-one-out":
        splitter: LeaveOneGroupOut | GroupKFold = LeaveOneGroupOut()
    elif scheme == "grouped":
        splitter = GroupKFold(n_splits=min(splits, len(labels)))
    else:
        raise ValueError(f"unknown fold scheme {scheme!r}; known: leave-one-out, grouped")
    index = np.arange(len(labels)).reshape(-1, 1)
    return [
        ([labels[i] for i in train], [labels[i] for i in test]) for train, test in splitter.split(index, groups=labels)
    ]
