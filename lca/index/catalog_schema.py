"""The catalog's schema: its tables, its version, and the migrations that bring an older catalog up to it.

A catalog records its ``schema_version`` in ``meta``. One this code writes opens as it is. One a migration in
``MIGRATIONS`` covers is brought up to date in place, in one transaction, the first time a process that may write it
opens it: the catalog is derived, but rebuilding a large store's index to add a column would cost its embeddings
again. A read-only store of a migratable version is read as it is (what the newer columns hold reads as unknown).
Any other version is refused with the one remedy: ``lca reindex`` rebuilds the index from the transcript.

Version 3 added who spoke to each chunk (``chunks.subagent_id``, ``chunks.peer_agent``). Chunks indexed before it
carry neither, so the migration leaves ``SPEAKERS_PENDING`` in ``meta`` and the next ingest fills them in from the
transcript (``lca.ingest``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lca.errors import LCAError
from lca.types import SPEAKER_FIELDS

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS embedders (code INTEGER PRIMARY KEY, embedder_id TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS texts (
    text_hash TEXT PRIMARY KEY,
    vector_id INTEGER NOT NULL UNIQUE,
    embedder INTEGER NOT NULL REFERENCES embedders(code),
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    row INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL UNIQUE,
    text_hash TEXT NOT NULL REFERENCES texts(text_hash),
    source_type TEXT NOT NULL,
    session_id TEXT,
    entry_id TEXT,
    memory_id TEXT,
    path TEXT,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    part INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    timestamp TEXT,
    channel TEXT,
    subagent_id TEXT,
    peer_agent TEXT
);
CREATE INDEX IF NOT EXISTS chunks_text ON chunks(text_hash);
CREATE INDEX IF NOT EXISTS chunks_memory ON chunks(memory_id);
CREATE TABLE IF NOT EXISTS embedding_failures (
    chunk_id TEXT PRIMARY KEY,
    text_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    pointer TEXT NOT NULL,
    part INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    timestamp TEXT,
    channel TEXT,
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL,
    first_at REAL NOT NULL,
    last_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sentence_keys (
    chunk_id TEXT NOT NULL REFERENCES chunks(chunk_id),
    text_hash TEXT NOT NULL REFERENCES texts(text_hash),
    PRIMARY KEY (chunk_id, text_hash)
);
CREATE INDEX IF NOT EXISTS sentence_keys_text ON sentence_keys(text_hash);
CREATE TABLE IF NOT EXISTS window_keys (
    chunk_id TEXT PRIMARY KEY REFERENCES chunks(chunk_id),
    text_hash TEXT NOT NULL REFERENCES texts(text_hash)
);
CREATE INDEX IF NOT EXISTS chunks_session ON chunks(session_id);
CREATE TABLE IF NOT EXISTS watermarks (source TEXT PRIMARY KEY, position TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (  # who spoke: the subagent that wrote a turn, the peer agent it came from
        "ALTER TABLE chunks ADD COLUMN subagent_id TEXT",
        "ALTER TABLE chunks ADD COLUMN peer_agent TEXT",
    ),
}
"""version -> the statements that bring a catalog of that version to the next one."""

SPEAKERS_PENDING = "speakers_pending"
"""A ``meta`` key the migration to version 3 sets: chunks indexed before it do not say who spoke yet; the next ingest
fills them in from the transcript and removes the key."""

SPEAKER_COLUMNS = SPEAKER_FIELDS  # the chunks table names them as the source pointer does

STORED_TEXT = (  # every column holding text a writer chose: the chunk texts first
    "texts.text",
    *(f"chunks.{c}" for c in ("session_id", "entry_id", "memory_id", "path", "timestamp", "channel")),
    *(f"chunks.{c}" for c in SPEAKER_COLUMNS),
    *(f"embedding_failures.{c}" for c in ("text", "pointer", "timestamp", "channel", "error")),
    "watermarks.source",
    "meta.value",
)


def chunk_columns(speakers: bool) -> str:
    """The columns a chunk is read from (``lca.index.catalog``), the speaker columns as NULL where the catalog has
    none (a read-only catalog older than version 3)."""
    tail = ", ".join(SPEAKER_COLUMNS) if speakers else "NULL, NULL"
    return (
        "row, chunk_id, c.text_hash, source_type, session_id, entry_id, memory_id, path, "
        f"char_start, char_end, part, parts, timestamp, t.text, channel, {tail}"
    )


def stored_version(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return row[0] if row else None


def _refusal(path: Path, stored: str) -> LCAError:
    return LCAError(
        f"{path}: catalog schema version {stored}, this code writes {SCHEMA_VERSION}; "
        "the index is derived: run `lca reindex` to rebuild it from the transcript"
    )


def check_readable(db: sqlite3.Connection, path: Path) -> None:
    """A catalog this process only reads: its version is this code's, or one a migration covers (read as it is)."""
    stored = stored_version(db)
    if stored is not None and stored != str(SCHEMA_VERSION) and not _migratable(stored):
        raise _refusal(path, stored)


def bring_up_to_date(db: sqlite3.Connection, path: Path) -> None:
    """Migrate a writable catalog that holds tables to ``SCHEMA_VERSION``, in one transaction (the version read
    again inside it, so two processes opening one catalog migrate it once); refuse a version no migration covers."""
    stored = stored_version(db)
    if stored is None or stored == str(SCHEMA_VERSION):
        return
    if not _migratable(stored):
        raise _refusal(path, stored)
    db.execute("BEGIN IMMEDIATE")
    try:
        version = int(stored_version(db) or SCHEMA_VERSION)
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version]:
                db.execute(statement)
            if version == 2:
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, '1')", (SPEAKERS_PENDING,))
            version += 1
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _migratable(stored: str) -> bool:
    """Whether the migrations lead from ``stored`` to this code's version."""
    if not stored.isdigit():
        return False
    version = int(stored)
    while version in MIGRATIONS:
        version += 1
    return version == SCHEMA_VERSION and int(stored) < SCHEMA_VERSION


def has_speaker_columns(db: sqlite3.Connection) -> bool:
    """Whether the chunks table says who spoke (version 3 on; not a read-only catalog left at version 2)."""
    return {row[1] for row in db.execute("PRAGMA table_info(chunks)").fetchall()} >= set(SPEAKER_COLUMNS)
