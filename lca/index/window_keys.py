"""Window keys: a turn embedded together with its neighbours in its session, one extra dense key per turn.

A turn often makes sense only with the turns around it ("Yes, twice a week" answers the question before
it). Its window key is the text of the ``window_key_before`` turns before it, itself and the
``window_key_after`` turns after it (same session, row order: the neighbours the ranking reads), embedded
as one text. The ranking scores it as a signal of its own (``RetrievalConfig.window_key_weight``), never as
the turn's best key. Written when turns are added (``RetrievalConfig.window_keys``); a turn's key is written
again when a later turn enters its window, and a turn alone in its session has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lca.index.catalog import Catalog
from lca.index.vectors import FaissVectorIndex, vector_id_for
from lca.ports import Embedder
from lca.retrieval import RetrievalConfig
from lca.types import text_digest

EmbedFn = Callable[[list[tuple[str, str]]], tuple[dict[str, np.ndarray], dict[str, str]]]
AddVectorsFn = Callable[[np.ndarray, np.ndarray], None]  # (vector ids, vectors): into the store's vector index


class WindowKeyedStore(Protocol):
    """What writing window keys reads of an ``IndexStore`` (named here so this module need not import it)."""

    catalog_: Catalog
    embedder: Embedder
    retrieval: RetrievalConfig

    @property
    def vectors(self) -> FaissVectorIndex: ...


@dataclass(frozen=True)
class WindowKeyWrite:
    """What one refresh of window keys did."""

    written: int  # keys set or moved to a new window text
    embedded: int  # window texts embedded (the rest were already in the store)
    failed: int  # keys whose text could not be embedded (their turns keep no window key until the next write)


def fitted_windows(
    texts: Sequence[str], positions: Sequence[int], before: int, after: int, embedder: Embedder
) -> dict[int, str | None]:
    """The window of each turn at ``positions`` among its session's ``texts`` (row order; ``None`` for a turn
    alone), narrowed until the embedder reads all of it: the turns after it go first, then the farthest before
    it, so the turn itself is never cut off (the model's own truncation would cut the end: the turns after it,
    then the turn)."""
    spans = {at: (max(0, at - before), min(len(texts), at + after + 1)) for at in positions}
    out: dict[int, str | None] = {}
    while spans:
        out.update({at: None for at, (lo, hi) in spans.items() if hi - lo <= 1})
        windows = {at: "\n".join(texts[lo:hi]) for at, (lo, hi) in spans.items() if hi - lo > 1}
        counts = embedder.count_tokens(list(windows.values())) if windows else []
        narrowed = {}
        for (at, window), count in zip(windows.items(), counts, strict=True):
            lo, hi = spans[at]
            if count <= embedder.max_input_tokens:
                out[at] = window
            elif hi - 1 > at:
                narrowed[at] = (lo, hi - 1)
            else:
                narrowed[at] = (lo + 1, hi)
        spans = narrowed
    return out


def refresh_window_keys(
    catalog: Catalog,
    sessions: set[str],
    new_chunks: set[str],
    before: int,
    after: int,
    embedder: Embedder,
    embed: EmbedFn,
    add_vectors: AddVectorsFn,
    embedder_code: int,
) -> WindowKeyWrite:
    """Write the window key of every turn whose window holds one of ``new_chunks`` (in ``sessions``).
    Each window fits what ``embedder`` reads (``fitted_windows``); ``embed`` is the store's fail-closed
    embedding; the caller holds the catalog's transaction."""
    wanted: dict[str, str | None] = {}
    for session_id in sorted(sessions):
        members = catalog.session_texts(session_id)
        texts = [text for _, text in members]
        touched = {
            other
            for at, (chunk_id, _) in enumerate(members)
            if chunk_id in new_chunks
            for other in range(max(0, at - after), min(len(members), at + before + 1))
        }
        for at, window in fitted_windows(texts, sorted(touched), before, after, embedder).items():
            wanted[members[at][0]] = window
    if not wanted:
        return WindowKeyWrite(0, 0, 0)
    current = catalog.window_keys_of(list(wanted))
    by_hash = {text_digest(text): text for text in wanted.values() if text is not None}
    have = catalog.known_text_hashes(set(by_hash))
    vectors, _ = embed([(h, t) for h, t in by_hash.items() if h not in have])
    if vectors:
        add_vectors(np.asarray([vector_id_for(h) for h in vectors], dtype=np.int64), np.vstack(list(vectors.values())))
        for text_hash in vectors:
            catalog.insert_text(text_hash, vector_id_for(text_hash), by_hash[text_hash], embedder_code)
    written = failed = 0
    for chunk_id, text in wanted.items():
        key: str | None = text_digest(text) if text is not None else None
        if key is not None and key not in have and key not in vectors:
            failed += 1
            key = None  # an old window no longer describes the turn: it goes too
        if current.get(chunk_id) != key:
            catalog.set_window_key(chunk_id, key)
            written += key is not None
    return WindowKeyWrite(written, len(vectors), failed)


def write_window_keys(
    store: WindowKeyedStore, sessions: set[str], new_chunks: set[str], embed: EmbedFn
) -> WindowKeyWrite:
    """``refresh_window_keys`` in one catalog transaction of ``store``, counted in its counters; ``embed``: the
    store's own, which holds back what fails rather than storing a bad vector."""
    catalog = store.catalog_
    catalog.begin()
    try:
        written = refresh_window_keys(
            catalog,
            sessions,
            new_chunks,
            store.retrieval.window_key_before,
            store.retrieval.window_key_after,
            store.embedder,
            embed,
            store.vectors.add,
            catalog.embedder_code(store.embedder.embedder_id),
        )
        if written.written or written.failed:
            catalog.bump_generation()
        catalog.add_counter("embedded_texts", written.embedded)
        catalog.add_counter("window_key_failures", written.failed)
        catalog.commit()
    except BaseException:
        catalog.rollback()
        raise
    return written
