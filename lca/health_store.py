"""Health checks over the store's own files, apart from what they hold: symbolic links, whether each session file
still matches its hash chain, and whether the index is whole or a killed write left it part done.

Each reads only (nothing is created, a read-only store is checked as any other); ``lca.health`` composes them into
the one report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lca.index.catalog import Catalog
from lca.index.completeness import incomplete_reason
from lca.layout import StoreLayout
from lca.recall_log import RecallLog
from lca.transcript_chain import chain_check
from lca.types import HealthCheck, HealthStatus

__all__ = ["chain_check", "index_state_check", "link_check", "store_links"]


def store_links(root: Path) -> list[str]:
    """Every symbolic link inside the store (files and folders, a dangling one too), relative to its root, without
    following any of them."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            path = Path(folder) / name
            if path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def link_check(layout: StoreLayout) -> HealthCheck:
    """A link inside the store points out of it: its session is not read, its memory file not loaded, its target
    never written. Each is named, so the user can put the file itself in its place or remove the link."""
    links = store_links(layout.root)
    if not links:
        return HealthCheck("links", HealthStatus.OK, "no symbolic link inside the store", {"links": []})
    shown = ", ".join(links[:5]) + (f" (and {len(links) - 5} more)" if len(links) > 5 else "")
    return HealthCheck(
        "links",
        HealthStatus.FAIL,
        f"{len(links)} symbolic link(s) inside the store: {shown}; the store never follows a link out of itself "
        "(a linked session is not read or appended to, a linked memory file not indexed): replace each with the "
        "file it points to, or remove it",
        {"links": links},
    )


def index_state_check(
    layout: StoreLayout, catalog: Catalog | None, held: Callable[[], np.ndarray] | None = None
) -> HealthCheck:
    """Whether the index is whole: a reindex or an ingest a kill stopped part way fails (search and recall refuse
    it, `lca ingest` completes it). ``catalog`` None: it could not be opened, which the derived_store check names;
    ``held``: the vector ids faiss holds (``lca.index.completeness.incomplete_reason``)."""
    reason = incomplete_reason(layout, catalog, held)
    if reason is not None:
        return HealthCheck(
            "index_complete",
            HealthStatus.FAIL,
            f"the index is incomplete: {reason}; search and recall refuse it: run `lca ingest` to complete it",
            {"complete": False, "reason": reason},
        )
    return HealthCheck(
        "index_complete", HealthStatus.OK, "every write to the index finished", {"complete": True, "reason": None}
    )


def recall_log_check(log: RecallLog) -> HealthCheck:
    """The recall log's size against its bound (``lca.recall_log``): over it only when the bound was lowered or
    a log from before rotation is still whole; the next recall rotates it."""
    size = log.size()
    data = {
        "bytes": size.bytes,
        "max_bytes": size.max_bytes,
        "segments": size.segments,
        "dropped_segments": size.dropped_segments,
    }
    detail = (
        f"{size.bytes / 2**20:.1f} MiB of {size.max_bytes / 2**20:.0f} MiB in {size.segments} compacted segment(s)"
        f" and the active file; {size.dropped_segments} old segment(s) dropped"
    )
    if size.bytes > size.max_bytes:
        return HealthCheck(
            "recall_log", HealthStatus.WARN, detail + "; over its bound until the next recall rotates it", data
        )
    return HealthCheck("recall_log", HealthStatus.OK, detail, data)
