"""The lexical index on disk (``index/lexical/``): each segment's arrays (``<name>.npz``) and the vocabulary it added
(``<name>.vocab.json``: its stems in id order and its new words; health's credential scan reads it), and
``manifest.json``, which names the segments of one state of the index, the documents dead in each and the catalog
generation that state reflects.

A save writes the segments not on disk yet, each by an atomic rename, then the manifest the same way: the manifest is
the commit point. A kill before it leaves the last state whole (the new files, named by no manifest, are left over);
a kill after it leaves the old segments' files over. Either way the next save removes them, and until then health
counts them as left by an interrupted save. A file the manifest names that cannot be read, or that disagrees with
what the manifest says of it, is a damaged derived store, named. A folder with no manifest (the first format, or a
first save a kill stopped), or with an older format's, holds no index this code reads: the store rebuilds it from
the catalog.
"""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lca.errors import DerivedStoreDamagedError
from lca.fileio import atomic_write_bytes
from lca.index.segments import Segment, SegmentSet
from lca.index.vectors import interrupted_saves

MANIFEST = "manifest.json"
FORMAT = 3  # 1: one bm25s index (rows.npy, generation.json, bm25/), rebuilt whole at each change; 2: wider arrays

# numpy parses a .npy header with ``ast.literal_eval``, which CPython 3.11 does not make safe across threads
# (two loads at once can raise "SystemError: AST constructor recursion depth mismatch"): one load at a time
NPY_READS = threading.Lock()


@dataclass(frozen=True)
class SavedLexical:
    """One committed state of the lexical index, as its manifest and segment files hold it."""

    segments: SegmentSet
    generation: str
    k1: float
    b: float
    stem_ids: dict[str, int]  # the tokenizer's vocabulary: each stem's id (its position over the segments)
    word_ids: dict[str, int]  # the words the segments' documents brought, with their stems' ids


def _files(name: str) -> tuple[str, str]:
    return f"{name}.npz", f"{name}.vocab.json"


def write_state(
    directory: Path, segments: SegmentSet, generation: str, k1: float, b: float, on_disk: frozenset[str]
) -> frozenset[str]:
    """Write the segments not in ``on_disk`` (or missing there), then the manifest, then remove what it does not
    name; the names now on disk."""
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for segment, alive in segments.pairs:
        arrays, vocabulary = (directory / f for f in _files(segment.name))
        if segment.name not in on_disk or not (arrays.exists() and vocabulary.exists()):
            atomic_write_bytes(arrays, segment.to_bytes())
            words = {"stems": list(segment.stems), "words": segment.words}
            atomic_write_bytes(vocabulary, json.dumps(words).encode())
        dead = np.flatnonzero(~alive).tolist() if alive is not None else []
        entries.append({"name": segment.name, "documents": len(segment), "stems": len(segment.stems), "dead": dead})
    manifest = {"format": FORMAT, "generation": generation, "k1": k1, "b": b, "segments": entries}
    atomic_write_bytes(directory / MANIFEST, json.dumps(manifest).encode())
    remove_leftovers(leftover_files(directory))
    return frozenset(segment.name for segment in segments.segments)


def read_state(directory: Path) -> SavedLexical | None:
    """The committed state, or None where no manifest is (nothing committed). A writer may replace the manifest
    and remove the files it no longer names while this reads: a file gone under a manifest that changed is read
    again from the new one."""
    attempts = 3
    for attempt in range(attempts):
        manifest = _read_manifest(directory)
        if manifest is None:
            return None
        try:
            return _read_segments(directory, manifest)
        except DerivedStoreDamagedError as exc:
            moved = isinstance(exc.__cause__, FileNotFoundError) and _read_manifest(directory) != manifest
            if not moved or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _read_manifest(directory: Path) -> dict | None:
    at = directory / MANIFEST
    try:
        manifest = json.loads(at.read_bytes())
        written = manifest.get("format") if isinstance(manifest, dict) else None
        if isinstance(written, int) and 1 < written < FORMAT:
            return None  # an older format: no index this code reads, rebuilt from the catalog
        if written != FORMAT:
            raise ValueError(f"format {written!r}, not {FORMAT}")
        return manifest
    except FileNotFoundError:
        return None
    except Exception as exc:  # json, a wrong shape: a torn or foreign manifest
        raise DerivedStoreDamagedError(at, f"{type(exc).__name__}: {exc}") from exc


def _read_segments(directory: Path, manifest: dict) -> SavedLexical:
    at = directory / MANIFEST
    try:
        segments: list[Segment] = []
        alive: list[np.ndarray | None] = []
        stems: dict[str, int] = {}
        words_seen: dict[str, int] = {}
        last_row = -1
        for entry in manifest["segments"]:
            name = str(entry["name"])
            if "/" in name or name.startswith("."):
                raise ValueError(f"a segment name {name!r} that names no file of this folder")
            arrays, vocabulary = (directory / f for f in _files(name))
            at = vocabulary
            words = json.loads(vocabulary.read_bytes())
            at = arrays
            with NPY_READS:
                segment = Segment.from_bytes(name, arrays.read_bytes(), len(stems), words["stems"], words["words"])
            segment.check()
            if len(segment) != int(entry["documents"]) or len(segment.stems) != int(entry["stems"]):
                raise ValueError(
                    f"{len(segment)} documents and {len(segment.stems)} stems, the manifest says "
                    f"{entry['documents']} and {entry['stems']}"
                )
            if len(segment) and int(segment.rows[0]) <= last_row:
                raise ValueError(f"row {int(segment.rows[0])} is not past the segment before (up to {last_row})")
            last_row = int(segment.rows[-1]) if len(segment) else last_row
            for stem in segment.stems:
                if not isinstance(stem, str):
                    raise ValueError(f"a stem {stem!r} that is not a string")
                stems.setdefault(stem, len(stems))
            if len(stems) != segment.first_stem + len(segment.stems):
                raise ValueError("a stem repeats one an earlier segment added")
            if any(not isinstance(v, int) or not 0 <= v < len(stems) for v in segment.words.values()):
                raise ValueError("a word names a stem past the vocabulary")
            words_seen.update(segment.words)
            dead = np.asarray(entry["dead"], dtype=np.int64)
            at = directory / MANIFEST
            if len(dead) and (int(dead.min()) < 0 or int(dead.max()) >= len(segment)):
                raise ValueError(f"a dead document past the {len(segment)} of segment {name}")
            mask = None
            if len(dead):
                mask = np.ones(len(segment), dtype=bool)
                mask[dead] = False
            segments.append(segment)
            alive.append(mask)
        return SavedLexical(
            SegmentSet(tuple(segments), tuple(alive)),
            str(manifest["generation"]),
            float(manifest["k1"]),
            float(manifest["b"]),
            stems,
            words_seen,
        )
    except Exception as exc:  # every reader here (json, zip, numpy) has its own error types
        raise DerivedStoreDamagedError(at, f"{type(exc).__name__}: {exc}") from exc


def leftover_files(directory: Path) -> list[Path]:
    """What a save a kill stopped left: files in the folder no manifest names (new segments whose manifest was not
    written, old ones a committed manifest no longer names), temporaries of dead processes, and the folders an older
    format's save swapped through (``.tmp``, ``.old`` beside it). In the folder, nothing where no manifest can be
    read (an older format's files are its index; a damaged manifest is named elsewhere)."""
    out = {p for p in (directory.with_name(directory.name + ".tmp"), directory.with_name(directory.name + ".old"))}
    out = {p for p in out if p.exists()}
    try:
        manifest = _read_manifest(directory) if directory.is_dir() else None
    except DerivedStoreDamagedError:
        manifest = None
    if manifest is None:
        return sorted(out)
    named = {MANIFEST, *(f for e in manifest.get("segments", ()) for f in _files(str(e.get("name"))))}
    for path in directory.iterdir():
        if path.name in named:
            continue
        if path.name.startswith(".") and ".tmp-" in path.name:  # an atomic write's temporary: if its writer died
            out.update(interrupted_saves(directory / path.name[1:].rpartition(".tmp-")[0]))
        else:
            out.add(path)
    return sorted(out)


def remove_leftovers(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
