"""``rank_frame``'s parts: the score is each weight times its part, summed, and a part is recorded for every weight
that acts (what ``lca fit`` weighs)."""

from __future__ import annotations

import dataclasses

import numpy as np

from lca.retrieval import Frame, QueryFacts, RetrievalConfig, rank_frame
from lca.retrieval.config import SIGNAL_WEIGHTS
from tests.lca.retrieval.test_signals import frame

SIGNALS = RetrievalConfig(
    fusion="z",
    bm25_weight=0.7,
    context_weight=0.5,
    phrase_weight=1.5,
    anchor_weight=2.0,
    question_weight=3.0,
    reply_weight=0.3,
    when_weight=1.0,
    now_weight=1.0,
    speaker_weight=1.0,
    feedback_weight=0.0,
)


def signal_frame() -> Frame:
    base = frame(
        [0.9, 0.5, 0.52, 0.1, 0.3, 0.7],
        lexical=[2.0, 0.0, 1.0, 0.0, 3.0, 0.5],
        session=[0, 0, 1, 1, 1, 0],
        seq=[0, 1, 0, 1, 2, 2],
        speaker=[0, 1, 0, 1, 0, 1],
        days=[10.0, 10.0, 12.0, 12.0, 13.0, 20.0],
        asks=[False, True, False, False, True, False],
        asked=[False, True, True, False, True, False],
    )
    return dataclasses.replace(
        base, phrase=np.array([1.0, 0, 0, 2.0, 0, 0]), tells_time=np.array([0, 1.0, 0, 0, 1.0, 0])
    )


def test_the_score_is_the_sum_of_each_weight_times_its_part():
    facts = QueryFacts(speaker=1, anchor_day=12.0, anchor_tolerance=1.0, asks_when=True, asks_now=True)
    parts: dict[str, np.ndarray] = {}
    fused, _ = rank_frame(signal_frame(), SIGNALS, facts, parts=parts)
    acting = {name for name in ("dense_weight", "bm25_weight", *SIGNAL_WEIGHTS) if getattr(SIGNALS, name)}
    assert set(parts) == acting  # every weight that is on has its part (this frame gives each its input)
    rebuilt = sum(getattr(SIGNALS, name) * part for name, part in parts.items())
    np.testing.assert_allclose(fused, rebuilt, atol=1e-12)
    assert (parts["question_weight"] <= 0).all() and parts["question_weight"][1] == -1.0  # it subtracts


def test_parts_leave_the_score_as_it_was_and_name_only_what_acts():
    facts = QueryFacts(speaker=1, anchor_day=12.0, anchor_tolerance=1.0, asks_when=True, asks_now=True)
    plain, _ = rank_frame(signal_frame(), SIGNALS, facts)
    parts: dict[str, np.ndarray] = {}
    with_parts, _ = rank_frame(signal_frame(), SIGNALS, facts, parts=parts)
    np.testing.assert_array_equal(plain, with_parts)
    quiet: dict[str, np.ndarray] = {}
    rank_frame(signal_frame(), SIGNALS, QueryFacts(), parts=quiet)  # no speaker, no date, no when or now
    assert not {"speaker_weight", "anchor_weight", "when_weight", "now_weight"} & set(quiet)
