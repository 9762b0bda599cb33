"""The SQLite catalog: what every chunk is, where it came from, and which vector it uses."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lca.errors import DerivedStoreDamagedError, LCAError
from lca.index.catalog_schema import (
    SCHEMA,
    SCHEMA_VERSION,
    SPEAKER_COLUMNS,
    STORED_TEXT,
    bring_up_to_date,
    check_readable,
    chunk_columns,
    has_speaker_columns,
)
from lca.types import Chunk, SourcePointer, SourceType

__all__ = ["SCHEMA_VERSION", "Catalog"]


def _row_to_chunk(row: Sequence) -> tuple[int, Chunk]:
    pointer = SourcePointer(
        source_type=SourceType(row[3]),
        session_id=row[4],
        entry_id=row[5],
        memory_id=row[6],
        path=row[7],
        char_start=row[8],
        char_end=row[9],
        subagent_id=row[15],
        peer_agent=row[16],
    )
    return row[0], Chunk(
        chunk_id=row[1],
        text=row[13],
        text_hash=row[2],
        pointer=pointer,
        part=row[10],
        parts=row[11],
        timestamp=row[12],
        channel=row[14],
    )


_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _named(connection: sqlite3.Connection, exc: sqlite3.DatabaseError) -> Exception:
    """SQLite's 'this file is not a sound database' as DerivedStoreDamagedError naming the file; others as they are."""
    code = getattr(exc, "sqlite_errorcode", None)
    if (code is not None and code & 0xFF in _DAMAGE_CODES) or str(exc).startswith(("no such table", "no such column")):
        return DerivedStoreDamagedError(getattr(connection, "path", "catalog"), exc)
    return exc


@contextmanager
def _damage_named(connection: sqlite3.Connection) -> Iterator[None]:
    """Re-raise SQLite's damage errors as DerivedStoreDamagedError naming the file (the SQLite error stays as
    the context); every other error passes as it is."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise _named(connection, exc)  # noqa: B904


class _CatalogCursor(sqlite3.Cursor):
    """A cursor whose damage errors name the catalog file (a corrupt page can surface at any fetch)."""

    def execute(self, sql: str, parameters: Any = (), /) -> _CatalogCursor:
        with _damage_named(self.connection):
            return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> _CatalogCursor:
        with _damage_named(self.connection):
            return super().executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        with _damage_named(self.connection):
            return super().executescript(sql_script)

    def fetchone(self) -> Any:
        with _damage_named(self.connection):
            return super().fetchone()

    def fetchall(self) -> list[Any]:
        with _damage_named(self.connection):
            return super().fetchall()

    def __next__(self) -> Any:  # per row: a plain try costs nothing, a context manager would
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc)  # noqa: B904 (the SQLite error stays as the context)


class _CatalogConnection(sqlite3.Connection):
    """A connection that hands out damage-naming cursors, also to its ``execute`` shortcuts."""

    path: Path

    def cursor(self, factory: Any = None) -> _CatalogCursor:  # type: ignore[override]
        return super().cursor(_CatalogCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> _CatalogCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> _CatalogCursor:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        return self.cursor().executescript(sql_script)


def _writable(path: Path) -> bool:
    """Whether SQLite may write the catalog and create its write-ahead log beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _connect(target: str, path: Path, *, uri: bool = False) -> _CatalogConnection:
    db = sqlite3.connect(target, timeout=60.0, isolation_level=None, uri=uri, factory=_CatalogConnection)
    db.path = path
    return db


def _connect_read_only(path: Path) -> _CatalogConnection:
    """Open a catalog this process may not write (a read-only store): ``mode=ro``; when its folder is
    read-only too and no write-ahead log is pending, as immutable (SQLite then needs no ``-shm`` file)."""
    target = f"file:{quote(str(path.resolve()))}?mode=ro"
    db = _connect(target, path, uri=True)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError as exc:  # no -shm beside a WAL database, and none can be made
        db.close()
        if path.with_name(path.name + "-wal").exists():
            raise LCAError(
                f"{path}: the catalog is read-only and holds an unfinished write-ahead log; "
                "open the store once with write access (any `lca` command) to fold it in"
            ) from exc
    except BaseException:
        db.close()
        raise
    db = _connect(target + "&immutable=1", path, uri=True)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        db.close()
        raise
    return db


class Catalog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.speakers = False  # whether the chunks say who spoke (lca.index.catalog_schema)
        self.read_only = path.exists() and not _writable(path)
        if self.read_only:  # a read-only store is still searchable: SQLite is never asked to write
            self.db = _connect_read_only(path)
            try:
                if self.db.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone() is None:
                    raise DerivedStoreDamagedError(path, "no catalog tables")
                check_readable(self.db, path)
                self.speakers = has_speaker_columns(self.db)  # False: a read-only catalog left at version 2
            except BaseException:
                self.db.close()
                raise
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = _connect(str(path), path)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            existing = self.db.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone()
            if existing:  # an older schema is migrated in place, or refused (lca.index.catalog_schema)
                bring_up_to_date(self.db, path)
            self.db.executescript(SCHEMA)
            if self.get_meta("schema_version") is None:
                self.set_meta("schema_version", str(SCHEMA_VERSION))
            self.speakers = True
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    # ---- transactions -----------------------------------------------------------
    def begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.db.execute("COMMIT")

    def rollback(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    # ---- meta, counters, watermarks ----------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def delete_meta(self, key: str) -> None:
        self.db.execute("DELETE FROM meta WHERE key=?", (key,))

    def bump_generation(self) -> str:
        generation = uuid.uuid4().hex
        self.set_meta("chunks_generation", generation)
        return generation

    def add_counter(self, name: str, value: int) -> None:
        self.db.execute(
            "INSERT INTO counters(name, value) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET value=value+excluded.value",
            (name, value),
        )

    def counters(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT name, value FROM counters").fetchall())

    def watermark(self, source: str) -> str | None:
        row = self.db.execute("SELECT position FROM watermarks WHERE source=?", (source,)).fetchone()
        return row[0] if row else None

    def set_watermark(self, source: str, position: str) -> None:
        self.db.execute(
            "INSERT INTO watermarks(source, position) VALUES(?, ?) "
            "ON CONFLICT(source) DO UPDATE SET position=excluded.position",
            (source, position),
        )

    def delete_watermark(self, source: str) -> None:
        self.db.execute("DELETE FROM watermarks WHERE source=?", (source,))

    def watermarks(self, prefix: str = "") -> dict[str, str]:
        return dict(
            self.db.execute("SELECT source, position FROM watermarks WHERE source LIKE ?", (prefix + "%",)).fetchall()
        )

    # ---- texts and chunks ----------------------------------------------------------
    def _rows_in(self, query: str, values: Iterable[Any]) -> Iterator[tuple]:
        """The rows of ``query`` (its one ``IN ({})`` filled) over ``values``, 900 at a time: SQLite's bound on
        the parameters of one statement."""
        ids = list(values)
        for i in range(0, len(ids), 900):
            part = ids[i : i + 900]
            yield from self.db.execute(query.format(",".join("?" * len(part))), part)

    def known_chunk_ids(self, chunk_ids: Iterable[str]) -> set[str]:
        return {r[0] for r in self._rows_in("SELECT chunk_id FROM chunks WHERE chunk_id IN ({})", chunk_ids)}

    def known_text_hashes(self, hashes: Iterable[str]) -> set[str]:
        return {r[0] for r in self._rows_in("SELECT text_hash FROM texts WHERE text_hash IN ({})", hashes)}

    def embedder_code(self, embedder_id: str) -> int:
        """A small integer standing for an embedder id, so every vector records its model cheaply."""
        row = self.db.execute("SELECT code FROM embedders WHERE embedder_id=?", (embedder_id,)).fetchone()
        if row:
            return row[0]
        code = self.db.execute("INSERT INTO embedders(embedder_id) VALUES(?)", (embedder_id,)).lastrowid
        assert code is not None  # an INSERT always sets it
        return code

    def vectors_by_embedder(self) -> dict[str, int]:
        return dict(
            self.db.execute(
                "SELECT e.embedder_id, count(*) FROM texts t JOIN embedders e "
                "ON t.embedder=e.code GROUP BY e.embedder_id"
            ).fetchall()
        )

    def insert_text(self, text_hash: str, vector_id: int, text: str, embedder_code: int) -> None:
        existing = self.db.execute("SELECT text_hash FROM texts WHERE vector_id=?", (vector_id,)).fetchone()
        if existing and existing[0] != text_hash:
            raise RuntimeError(f"vector id collision between texts {existing[0]} and {text_hash}")
        self.db.execute(
            "INSERT OR IGNORE INTO texts(text_hash, vector_id, embedder, text) VALUES(?, ?, ?, ?)",
            (text_hash, vector_id, embedder_code, text),
        )

    def insert_chunk(self, chunk: Chunk) -> None:
        p = chunk.pointer
        self.db.execute(
            "INSERT OR IGNORE INTO chunks(chunk_id, text_hash, source_type, session_id, entry_id, memory_id, path, "
            "char_start, char_end, part, parts, timestamp, channel, subagent_id, peer_agent) "
            "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                chunk.chunk_id,
                chunk.text_hash,
                p.source_type.value,
                p.session_id,
                p.entry_id,
                p.memory_id,
                p.path,
                p.char_start,
                p.char_end,
                chunk.part,
                chunk.parts,
                chunk.timestamp,
                chunk.channel,
                p.subagent_id,
                p.peer_agent,
            ),
        )

    def set_speakers(self, speakers: Iterable[tuple[str, str, str | None, str | None]]) -> None:
        """Who spoke each (session id, entry id) turn, as (session, entry, subagent id, peer agent) in derived form:
        filled in on chunks indexed before the catalog recorded it (``SPEAKERS_PENDING``)."""
        self.db.executemany(
            "UPDATE chunks SET subagent_id=?, peer_agent=? WHERE source_type='transcript' AND session_id=? "
            "AND entry_id=?",
            [(subagent, peer, session, entry) for session, entry, subagent, peer in speakers],
        )

    def insert_sentence_key(self, chunk_id: str, text_hash: str) -> None:
        """One sentence of a chunk as an extra dense key for that chunk (its text is in ``texts``)."""
        self.db.execute("INSERT OR IGNORE INTO sentence_keys(chunk_id, text_hash) VALUES(?, ?)", (chunk_id, text_hash))

    def set_window_key(self, chunk_id: str, text_hash: str | None) -> None:
        """A chunk's window key (its text with its session neighbours', in ``texts``), or none (``None``)."""
        if text_hash is None:
            self.db.execute("DELETE FROM window_keys WHERE chunk_id=?", (chunk_id,))
        else:
            self.db.execute(
                "INSERT OR REPLACE INTO window_keys(chunk_id, text_hash) VALUES(?, ?)", (chunk_id, text_hash)
            )

    def window_keys_of(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """chunk id -> the text hash of its window key, for those of ``chunk_ids`` that have one."""
        return dict(self._rows_in("SELECT chunk_id, text_hash FROM window_keys WHERE chunk_id IN ({})", chunk_ids))

    def window_key_links(self) -> list[tuple[int, int]]:
        """(vector id, row) of every chunk's window key (none in a read-only store older than the table)."""
        if not self.has_window_keys():
            return []
        return self.db.execute(
            "SELECT t.vector_id, c.row FROM window_keys w JOIN chunks c ON w.chunk_id=c.chunk_id "
            "JOIN texts t ON w.text_hash=t.text_hash"
        ).fetchall()

    def has_chunks(self) -> bool:
        return self.db.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is not None

    def has_window_keys(self) -> bool:
        """Whether some chunk has a window key (none in a read-only store older than the table)."""
        try:
            return bool(self.db.execute("SELECT 1 FROM window_keys LIMIT 1").fetchone())
        except sqlite3.OperationalError:
            return False

    def session_texts(self, session_id: str) -> list[tuple[str, str]]:
        """(chunk id, text) of a session's chunks in row order: the order the ranking's neighbours follow."""
        return self.db.execute(
            "SELECT c.chunk_id, t.text FROM chunks c JOIN texts t ON c.text_hash=t.text_hash "
            "WHERE c.session_id=? ORDER BY c.row",
            (session_id,),
        ).fetchall()

    def delete_chunks_of_memory(self, memory_id: str) -> int:
        for table in ("sentence_keys", "window_keys"):
            self.db.execute(
                f"DELETE FROM {table} WHERE chunk_id IN (SELECT chunk_id FROM chunks WHERE memory_id=?)", (memory_id,)
            )
        return self.db.execute("DELETE FROM chunks WHERE memory_id=?", (memory_id,)).rowcount

    def orphan_texts(self) -> list[tuple[str, int]]:
        return self.db.execute(
            "SELECT text_hash, vector_id FROM texts WHERE text_hash NOT IN "
            "(SELECT text_hash FROM chunks) AND text_hash NOT IN "
            "(SELECT text_hash FROM sentence_keys) AND text_hash NOT IN "
            "(SELECT text_hash FROM window_keys)"
        ).fetchall()

    def delete_texts(self, hashes: Sequence[str]) -> None:
        self.db.executemany("DELETE FROM texts WHERE text_hash=?", [(h,) for h in hashes])

    def vector_ids(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT vector_id FROM texts")]

    def texts_for_vector_ids(self, ids: Sequence[int]) -> list[tuple[str, int, str]]:
        query = "SELECT text_hash, vector_id, text FROM texts WHERE vector_id IN ({})"
        return list(self._rows_in(query, (int(x) for x in ids)))

    def chunk_keys(self) -> list[tuple[int, int, str]]:
        """(vector id, row, chunk id) for every chunk's own text and each of its sentence keys: the small
        part of the catalog ranking needs."""
        return self.db.execute(
            "SELECT t.vector_id, c.row, c.chunk_id FROM chunks c JOIN texts t "
            "ON c.text_hash=t.text_hash UNION ALL "
            "SELECT t.vector_id, c.row, c.chunk_id FROM sentence_keys k "
            "JOIN chunks c ON k.chunk_id=c.chunk_id JOIN texts t ON k.text_hash=t.text_hash"
        ).fetchall()

    def chunk_structure(self) -> list[tuple[int, str, str | None, str | None, str | None, str, int]]:
        """(row, chunk id, session id, entry id, timestamp, text, own vector id) of every chunk in row order:
        what the ranking's signals read (session, order, speaker prefix, time, form of the text)."""
        return self.db.execute(
            "SELECT c.row, c.chunk_id, c.session_id, c.entry_id, c.timestamp, t.text, t.vector_id "
            "FROM chunks c JOIN texts t ON c.text_hash=t.text_hash ORDER BY c.row"
        ).fetchall()

    def chunk_text_vectors(self, chunk_ids: Iterable[str] | None = None) -> dict[str, int]:
        """chunk id -> the vector id of the chunk's own text (not its sentence keys), of every chunk or these."""
        query = "SELECT c.chunk_id, t.vector_id FROM chunks c JOIN texts t ON c.text_hash=t.text_hash"
        if chunk_ids is None:
            return dict(self.db.execute(query))
        return dict(self._rows_in(query + " WHERE c.chunk_id IN ({})", chunk_ids))

    def chunks_by_rows(self, rows: Sequence[int]) -> dict[int, Chunk]:
        if not len(rows):
            return {}
        marks, columns = ",".join("?" * len(rows)), chunk_columns(self.speakers)
        found = self.db.execute(  # fetched in one call: a recall's pool of rows on the latency path
            f"SELECT {columns} FROM chunks c JOIN texts t ON c.text_hash=t.text_hash WHERE row IN ({marks})",
            [int(x) for x in rows],
        ).fetchall()
        return dict(_row_to_chunk(r) for r in found)

    def lexical_corpus(self, after: int = -1) -> tuple[list[int], list[str]]:
        """(rows, texts) of the chunks past row ``after`` in row order: the lexical index's documents (a row is
        never reused: ``AUTOINCREMENT``)."""
        found = self.db.execute(
            "SELECT c.row, t.text FROM chunks c JOIN texts t ON c.text_hash=t.text_hash WHERE c.row > ? ORDER BY c.row",
            (after,),
        ).fetchall()
        return [row for row, _ in found], [text for _, text in found]

    def chunk_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def chunk_rows(self) -> list[int]:
        return [row for (row,) in self.db.execute("SELECT row FROM chunks ORDER BY row")]

    # ---- failures -----------------------------------------------------------------
    def record_failure(self, chunk: Chunk, error: str) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO embedding_failures(chunk_id, text_hash, text, pointer, part, parts, timestamp, channel, "
            "attempts, error, first_at, last_at) VALUES(?,?,?,?,?,?,?,?,1,?,?,?) ON CONFLICT(chunk_id) DO UPDATE SET "
            "attempts=attempts+1, error=excluded.error, last_at=excluded.last_at",
            (
                chunk.chunk_id,
                chunk.text_hash,
                chunk.text,
                json.dumps(chunk.pointer.to_dict()),
                chunk.part,
                chunk.parts,
                chunk.timestamp,
                chunk.channel,
                error,
                now,
                now,
            ),
        )

    def clear_failure(self, chunk_id: str) -> None:
        self.db.execute("DELETE FROM embedding_failures WHERE chunk_id=?", (chunk_id,))

    def failed_chunks(self) -> list[Chunk]:
        out = []
        for cid, th, text, pointer, part, parts, ts, channel in self.db.execute(
            "SELECT chunk_id, text_hash, text, pointer, part, parts, timestamp, channel FROM embedding_failures"
        ):
            out.append(Chunk(cid, text, th, SourcePointer.from_dict(json.loads(pointer)), part, parts, ts, channel))
        return out

    def failure_summary(self) -> list[dict]:
        return [
            dict(zip(("chunk_id", "attempts", "error", "pointer"), r))
            for r in self.db.execute(
                "SELECT chunk_id, attempts, error, pointer FROM embedding_failures ORDER BY first_at"
            )
        ]

    # ---- statistics ----------------------------------------------------------------
    def stats(self) -> dict:
        q = self.db.execute
        by_source = dict(q("SELECT source_type, count(*) FROM chunks GROUP BY source_type").fetchall())
        entries_by_source = dict(
            q(
                "SELECT source_type, count(DISTINCT coalesce(session_id,'') || '#' || "
                "coalesce(entry_id, memory_id)) FROM chunks GROUP BY source_type"
            ).fetchall()
        )
        chunks = q("SELECT count(*) FROM chunks").fetchone()[0]
        distinct = q("SELECT count(DISTINCT text_hash) FROM chunks").fetchone()[0]
        split = q("SELECT count(*) FROM chunks WHERE parts > 1").fetchone()[0]
        split_entries = q(
            "SELECT count(DISTINCT coalesce(entry_id, memory_id)) FROM chunks WHERE parts > 1"
        ).fetchone()[0]
        texts = q("SELECT count(*) FROM texts").fetchone()[0]
        text_bytes = q("SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM texts").fetchone()[0]
        failures = q("SELECT count(*) FROM embedding_failures").fetchone()[0]
        keys = q("SELECT count(*) FROM sentence_keys").fetchone()[0]
        window_keys = q("SELECT count(*) FROM window_keys").fetchone()[0] if self.has_window_keys() else 0
        return {
            "chunks": chunks,
            "chunks_by_source": by_source,
            "items_by_source": entries_by_source,
            "distinct_texts": distinct,
            "texts": texts,
            "text_bytes": text_bytes,
            "split_chunks": split,
            "split_items": split_entries,
            "failed_embeddings": failures,
            "sentence_keys": keys,
            "window_keys": window_keys,
        }

    def checkpoint_wal(self) -> tuple[int, int, int] | None:
        """Move the write-ahead log into the database file and truncate it, so the files' sizes on disk are the
        catalog's own: SQLite's ``(busy, log frames, checkpointed frames)``. The content is unchanged."""
        row = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return tuple(row) if row else None

    def table_sizes(self) -> dict[str, dict[str, int]]:
        """Bytes on disk and payload bytes of each table and index, largest first. Needs SQLite's ``dbstat``
        virtual table (a compile-time option); without it the ``sqlite3.Error`` is raised to the caller."""
        return {
            name: {"bytes": int(size), "payload": int(payload)}
            for name, size, payload in self.db.execute(
                "SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC"
            )
        }

    def stored_values(self, *, texts: bool = True) -> Iterator[tuple[str, str]]:
        """("table.column", value) of each distinct text the catalog stores, but its own hashes and numbers: what
        health scans for credentials (``texts=False``: not the chunk texts, which their writer scanned)."""
        for column in STORED_TEXT[0 if texts else 1 :]:
            if column.partition(".")[2] in SPEAKER_COLUMNS and not self.speakers:
                continue
            table = column.partition(".")[0]
            for (value,) in self.db.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL"):
                yield column, str(value)

    def indexed_entry_ids(self) -> set[tuple[str, str]]:
        rows = self.db.execute("SELECT DISTINCT session_id, entry_id FROM chunks WHERE source_type='transcript'")
        out = set(rows.fetchall())
        for (pointer,) in self.db.execute("SELECT pointer FROM embedding_failures"):
            p = json.loads(pointer)
            if p["source_type"] == "transcript":
                out.add((p["session_id"], p["entry_id"]))
        return out
