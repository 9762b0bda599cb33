"""The contract of the resonance term table (``lca.recall.resonance.RESONANCE_TERMS``): every row is complete,
matches the weights record, and moves the score wherever its term is non-zero."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from datetime import UTC, datetime

import pytest

from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.recall import RESONANCE_TERMS, TERMS, RecallConfig, RecallContext, ResonanceWeights, resonance_score
from lca.recall.resonance import ROLES
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

AS_OF = datetime(2026, 3, 1, tzinfo=UTC)
CONTEXT = RecallContext("backup schedule for the harbour server", channel="cli", role="ops", as_of=AS_OF)
EVERY_TERM_ON = ResonanceWeights(activation=0.05)  # activation is off by default; on here so its history is read


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small store on which every term is non-zero for some candidate: memories of every authority with tags and
    experience, dated user and agent turns in the recall's channel, and a retrieval history (activation)."""
    home = tmp_path_factory.mktemp("term-table")
    config = RecallConfig(floor=0.0, weights=EVERY_TERM_ON)
    with Substrate(home, embedder=FakeHashingEmbedder(), recall_config=config) as s:
        for n, authority in enumerate(Authority):
            record = MemoryRecord(
                id=f"m{n}",
                type=MemoryType.FACT,
                created=datetime(2026, 1, 1),
                authority=authority,
                privacy=Privacy.PUBLIC,
                tags=["ops"] if n % 2 else [],
            )
            s.memory.write(record, f"backup schedule note {n}: the harbour server runs nightly at {n} am")
        s.ingest()
        s.append(
            [
                make_entry(
                    "s",
                    n,
                    f"turn {n}: the backup schedule on the harbour server, rotation {n}",
                    kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
                    channel="cli",
                    timestamp=f"2026-02-{10 + n}T10:00:00+00:00",
                )
                for n in range(1, 7)
            ]
        )
        s.experience.record("memory:m1", "approved")
        s.recall(CONTEXT)  # records what it injected: the next recalls read an activation for it
        yield s


def test_every_term_is_declared_whole():
    assert TERMS == tuple(t.name for t in RESONANCE_TERMS)
    assert len(set(TERMS)) == len(TERMS)
    weights = {f.name: f.default for f in fields(ResonanceWeights)}
    for term in RESONANCE_TERMS:
        assert callable(term.function), term.name
        assert term.description.strip() and term.symbol.strip(), term.name
        assert term.role in ROLES, term.name
        assert term.sign == (-1 if term.role == "penalty" else 1), term.name
        low, high = term.weight_bound
        assert low <= term.default <= high, term.name
        assert term.bound[0] <= term.bound[1], term.name
        assert weights[term.name] == term.default, f"{term.name}: ResonanceWeights has no field, or another default"
    assert list(weights) == list(TERMS)


def test_the_score_is_the_signed_sum_of_the_table():
    terms = {name: 0.1 * (n + 1) for n, name in enumerate(TERMS)}
    expected = sum(t.sign * getattr(EVERY_TERM_ON, t.name) * terms[t.name] for t in RESONANCE_TERMS)
    assert resonance_score(terms, EVERY_TERM_ON) == pytest.approx(expected)
    tilt = sum(getattr(EVERY_TERM_ON, t.name) * t.bound[1] for t in RESONANCE_TERMS if t.role == "tilt")
    assert EVERY_TERM_ON.tilt_bound == pytest.approx(tilt)


def test_a_weight_outside_its_bound_is_refused():
    from lca.errors import RecordFormatError

    for term in RESONANCE_TERMS:
        with pytest.raises(RecordFormatError) as info:
            ResonanceWeights.from_mapping({term.name: term.weight_bound[0] - 1.0})
        assert info.value.field == term.name


@pytest.mark.parametrize("term", RESONANCE_TERMS, ids=lambda t: t.name)
def test_every_term_is_in_its_bound_and_moves_the_score(store, term):
    weighted = store.recall(CONTEXT, config=RecallConfig(floor=0.0, weights=EVERY_TERM_ON))
    ablated = store.recall(CONTEXT, config=RecallConfig(floor=0.0, weights=replace(EVERY_TERM_ON, **{term.name: 0.0})))
    low, high = term.bound
    assert all(low <= c.terms[term.name] <= high for c in weighted.candidates)
    live = {c.chunk_id: c for c in weighted.candidates if c.terms[term.name] != 0}
    assert live, f"the fixture store gives {term.name} no non-zero value: it cannot show the term counts"
    score_without = {c.chunk_id: c.score for c in ablated.candidates}
    for chunk_id, c in live.items():
        assert not math.isclose(c.score, score_without[chunk_id], abs_tol=1e-12), (term.name, chunk_id)
        assert set(c.terms) == set(TERMS)
