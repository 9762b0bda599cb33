"""Whether the derived index is whole, or a write that was killed left it part done.

An ingest commits the catalog batch by batch and saves the faiss and BM25 files once, at its end (``flush``), so a
kill in between leaves catalog texts with no saved vector. ``flush`` records the catalog generation it saved
(``SAVED_META``); a catalog whose generation moved past it, with no writer holding ``write.lock``, is an ingest
that was stopped. A reindex writes ``index/rebuilding.json`` before it deletes anything and removes it once the
index is rebuilt, so a reindex killed part way (an index empty or half built) is named too. Either state is
reported by health as a failure and refused by search and recall in one line (``IndexIncompleteError``) rather
than answered from; ``lca ingest`` completes it (re-embedding what faiss lacks, indexing on from the
watermarks) and clears the marker. While a writer holds the lock, a reader answers from what is there.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from lca.errors import LCAError
from lca.fileio import atomic_write_bytes, fsync_dir, refuse_link, writer_active
from lca.index.catalog import Catalog
from lca.layout import StoreLayout

SAVED_META = "saved_generation"  # catalog meta: the chunks generation whose faiss and BM25 files were last saved
REBUILD_MARKER = "rebuilding.json"  # in index/: a reindex began and has not finished


class IndexIncompleteError(LCAError):
    """A write was killed part way through the index: searching it would answer from part of the store (or from
    nothing, after a reindex deleted it). ``lca ingest`` completes it."""


def rebuild_marker(layout: StoreLayout) -> Path:
    return layout.index / REBUILD_MARKER


def begin_rebuild(layout: StoreLayout) -> None:
    """Mark the index as being rebuilt (durably, before anything is deleted), then delete the rest of it: the
    catalog first, so a kill mid-way leaves no watermark that vouches for vectors already gone."""
    refuse_link(layout.index, "nothing was deleted or rebuilt")  # never delete what a link points at
    marker = rebuild_marker(layout)
    started = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "pid": os.getpid()}
    atomic_write_bytes(marker, (json.dumps(started) + "\n").encode())
    children = sorted(layout.index.iterdir(), key=lambda p: (not p.name.startswith("catalog"), p.name))
    for child in children:
        if child == marker:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink(missing_ok=True)
    fsync_dir(layout.index)


def finish_rebuild(layout: StoreLayout) -> None:
    """The index was rebuilt to the transcript's and memory files' end: the marker goes."""
    marker = rebuild_marker(layout)
    if marker.exists():
        marker.unlink()
        fsync_dir(layout.index)


def record_saved(catalog: Catalog) -> None:
    """After ``flush`` saved faiss and BM25: they hold the catalog's current generation."""
    catalog.set_meta(SAVED_META, catalog.get_meta("chunks_generation") or "")


def incomplete_reason(
    layout: StoreLayout, catalog: Catalog | None, held: Callable[[], np.ndarray] | None = None
) -> str | None:
    """Why the index is not whole, or None. ``held`` gives the vector ids faiss holds as the reader loaded it: a
    catalog past its saved generation is incomplete only if some text has no vector there (the process that wrote
    it, before its flush, holds them all; a kill after the save but before it was recorded loses nothing). Stores
    indexed before the saved generation was recorded read as whole, as they did, until their next ingest."""
    marker = rebuild_marker(layout)
    if marker.exists():
        try:
            started = str(json.loads(marker.read_bytes()).get("started", "?"))
        except (OSError, ValueError, AttributeError):
            started = "?"
        return f"a reindex started at {started} did not finish (killed or failed part way)"
    if catalog is None:
        return None
    saved = catalog.get_meta(SAVED_META)
    generation = catalog.get_meta("chunks_generation")
    if saved is None or generation is None or generation == saved:
        return None
    missing = np.setdiff1d(np.asarray(catalog.vector_ids(), dtype=np.int64), held()) if held is not None else None
    if missing is not None and not len(missing):
        return None
    count = f"{len(missing)} catalog text(s) have no saved vector: " if missing is not None else ""
    return f"{count}an ingest was stopped after it wrote chunks to the catalog and before it saved their vectors"


def check_searchable(layout: StoreLayout, catalog: Catalog, held: Callable[[], np.ndarray]) -> None:
    """Refuse, in one line, to read an index a killed write left part done. A write in progress (a writer holds
    ``write.lock``) is not refused: it is answered from."""
    reason = incomplete_reason(layout, catalog, held)
    if reason is not None and not writer_active(layout.write_lock):
        raise IndexIncompleteError(
            f"the index at {layout.index} is incomplete: {reason}; run `lca ingest` to complete it "
            "(nothing was searched)"
        )
