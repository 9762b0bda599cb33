"""Bytes per chunk: the index's files by group, the catalog's tables, and what the store holds."""

from __future__ import annotations

from typing import Any

from lca.layout import StoreLayout


def _file_group(name: str) -> str:
    if name.startswith("catalog.sqlite"):
        return "catalog"
    if name.startswith("vectors.faiss"):
        return "vectors"
    if name.startswith("lexical"):
        return "lexical"
    return "other"


def measure_sizes(substrate, layout: StoreLayout) -> tuple[dict[str, Any], dict[str, Any]]:
    """The store's contents and the index's size on disk (after folding the catalog's WAL into its file),
    as ``(store, index_size)``; ``bytes_per_chunk_beyond_text`` is the figure the 2 KB target reads."""
    index = substrate.index
    checkpoint = index.checkpoint_wal()
    stats = index.stats()
    index_dir = layout.index
    files = {str(p.relative_to(index_dir)): p.stat().st_size for p in sorted(index_dir.rglob("*")) if p.is_file()}
    groups = {"catalog": 0, "vectors": 0, "lexical": 0, "other": 0}
    for name, size in files.items():
        groups[_file_group(name)] += size
    total = sum(files.values())
    chunks = stats["chunks"]
    try:
        tables: dict[str, Any] = index.table_sizes()
    except Exception as exc:  # dbstat is a compile-time option of SQLite
        tables = {"unavailable": str(exc)}
    beyond = bytes_beyond_text(total, stats["text_bytes"], chunks)
    per_chunk = {k: round(v / chunks, 1) for k, v in groups.items()} if chunks else {}
    if chunks:
        per_chunk["catalog_minus_text"] = round((groups["catalog"] - stats["text_bytes"]) / chunks, 1)
    store = {
        "catalog_stats": stats,
        "vectors": len(index.vectors),
        "dimension": index.vectors.dimension,
        "approximate_index": index.vectors.approximate,
        "transcript_bytes": sum(p.stat().st_size for p in substrate.transcript.sessions_dir.rglob("*") if p.is_file()),
        "memory_dir_bytes": sum(p.stat().st_size for p in layout.memory.rglob("*") if p.is_file()),
    }
    index_size = {
        "wal_checkpoint": list(checkpoint) if checkpoint else None,
        "total_bytes": total,
        "text_bytes": stats["text_bytes"],
        "bytes_per_chunk_beyond_text": round(beyond, 1) if beyond is not None else None,
        "bytes_per_chunk_total": round(total / chunks, 1) if chunks else None,
        "text_bytes_per_chunk": round(stats["text_bytes"] / chunks, 1) if chunks else None,
        "groups_bytes": groups,
        "groups_bytes_per_chunk": per_chunk,
        "files": files,
        "catalog_tables": tables,
    }
    return store, index_size


def bytes_beyond_text(total_bytes: int, text_bytes: int, chunks: int) -> float | None:
    """Index bytes per chunk beyond the chunk text (unrounded: the check compares this, the report rounds it)."""
    return (total_bytes - text_bytes) / chunks if chunks else None
