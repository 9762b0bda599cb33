"""The running hash chain over each session file (lca.transcript_chain): appends keep it, any change to the lines it
covers is named, lines after them only extend it, and a file as it was recorded is not read again."""

from __future__ import annotations

import pytest

import lca.transcript_chain as transcript_chain
from lca.layout import StoreLayout
from lca.transcript import TranscriptStore, encode_entry
from lca.transcript_chain import CHAIN_SEED, ChainBook, extend
from tests.conftest import make_entry


@pytest.fixture
def store(tmp_path):
    transcript = TranscriptStore(tmp_path)
    for n in range(1, 5):  # four appends: the chain is extended by each, never recomputed
        transcript.append([make_entry("s", n, f"turn {n} of the session")])
    return transcript


def book_of(store: TranscriptStore) -> ChainBook:
    return ChainBook(StoreLayout(store.root))


def test_appends_extend_the_recorded_chain_over_exactly_the_file(store):
    path = store.session_path("s")
    state = book_of(store).load(path)
    assert state is not None and (state.covered, state.lines) == (path.stat().st_size, 4)
    assert state.chain == extend(CHAIN_SEED, path.read_bytes().splitlines(keepends=True))[0]


def test_a_file_as_recorded_is_not_read_and_a_changed_one_is(store, monkeypatch):
    path = store.session_path("s")
    monkeypatch.setattr(transcript_chain, "FINE_RACY_NS", -(10**18))
    monkeypatch.setattr(transcript_chain, "RACY_NS", -(10**18))
    assert book_of(store).verify(path).unchanged
    with open(path, "ab") as handle:  # a line a hand appended: read, and only extends the chain
        handle.write(encode_entry(make_entry("s", 5, "a fifth turn")))
    verdict = book_of(store).verify(path)
    assert not verdict.unchanged and verdict.problem is None and verdict.state and verdict.state.lines == 5


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda lines: lines[:-1], "fewer than the"),  # the last line removed
        (lambda lines: [lines[0], lines[2], lines[1], lines[3]], "changed, swapped, inserted or removed"),
        (lambda lines: [lines[0], lines[0], *lines[1:]], "changed, swapped, inserted or removed"),
        (lambda lines: [lines[0].replace(b"turn 1", b"TURN 1"), *lines[1:]], "changed, swapped"),
    ],
)
def test_a_change_to_the_recorded_lines_is_named_and_not_recorded(store, change, named):
    path = store.session_path("s")
    recorded = book_of(store).load(path)
    path.write_bytes(b"".join(change(path.read_bytes().splitlines(keepends=True))))
    problem = book_of(store).refresh(path)
    assert problem is not None and named in problem and str(path) in problem
    assert book_of(store).load(path) == recorded  # the writer's refresh leaves the old record for health to hold


def test_a_torn_tail_is_not_a_line_and_recovery_keeps_the_chain(store):
    path = store.session_path("s")
    with open(path, "ab") as handle:
        handle.write(b'{"v":1,"id":"s:5","cont')
    assert book_of(store).verify(path).problem is None
    store.recover("s")  # quarantines the torn bytes, then records the chain of the file it leaves
    state = book_of(store).load(path)
    assert state is not None and state.lines == 4 and state.covered == path.stat().st_size
