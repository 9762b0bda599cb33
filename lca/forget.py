"""Forgetting: the one rewrite of history, and everything derived from what it removes.

The transcript is append-only except here. ``forget`` replaces each selected entry (by entry, session, time range
or matching text) with a **tombstone** in place: the same id, session, kind, time and speaker, empty content, and
``meta.forgotten`` saying who, when, why, and the sha256 and length of what was removed. Every line keeps its
own hash, so the file still reads as a transcript; the session file is rewritten whole and renamed into place.
Handoffs that rest on a forgotten turn (they cite it, or repeat it) are tombstoned with it.

What rested on the removed text is dropped or derived again: memory files citing it or holding it (with their
archived versions) are deleted; every JSON record under ``logs/`` (the recall log's compacted segments too),
``events/``, ``consolidation/`` and ``proposals/`` has each string that holds it replaced by ``[FORGOTTEN]``
(the record stays, so the ledger still replays); the insight engine's data resting on a removed memory file is
dropped or derived again (``lca.insight.forgotten``: its signature, centrality, taxonomy tags, the ledger's member
lists through one appended event, cycle reports naming it); quarantined raw lines holding it are deleted; and the
index is rebuilt from the rewritten transcript (``Substrate.reindex``), so the catalog, faiss, BM25 and the hash
chains hold only what remains. A bundle exported afterwards carries the tombstones only.

"Holds it" is decided by fingerprints, not by the text: each five-word window of the removed text (lower-cased
words) is hashed, and a string holding any of them holds it; a text of three or four words is one window, and
one of fewer words is matched only as a whole string. The fingerprints are kept in ``events/forgotten.jsonl`` so
that health can verify, after the fact and without the text, that no derived store holds it again (the
``forgotten`` check). A hash of a short or guessable text can be confirmed by guessing it; it cannot be read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lca.authority import read_authority
from lca.errors import LCAError
from lca.fileio import atomic_write_bytes, fsync_dir, refuse_link
from lca.insight.forgotten import FORGOTTEN, InsightForgetting, forget_records
from lca.insight.forgotten import plan as insight_plan
from lca.layout import StoreLayout
from lca.transcript import encode_entry
from lca.types import SESSION_KEY, EntryKind, HealthCheck, HealthStatus, TranscriptEntry, as_utc, canonical_json

WINDOW = 5
_WORD = re.compile(r"\w+", re.UNICODE)
DERIVED_FOLDERS = ("logs", "events", "consolidation", "proposals", "insight")
FINGERPRINTS = "forgotten.jsonl"  # under events/


class ForgetError(LCAError):
    """A forget request that cannot be carried out (nothing selected, a replica, a bad selector)."""


@dataclass(frozen=True)
class ForgetRequest:
    """What to forget: entries (``session#entry`` keys or bare entry ids), a session, a session key (one conversation
    across surfaces), a time range, text (case-insensitive, whitespace-normalized), a channel, an author and/or entry
    kinds. An entry is selected when it meets every selector given (channel, author and kinds narrow; they do not
    select on their own)."""

    entries: tuple[str, ...] = ()
    session: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    matching: str | None = None
    channel: str | None = None
    author: str | None = None
    kinds: tuple[str, ...] = ()
    session_key: str | None = None

    def __post_init__(self) -> None:
        if not (self.entries or self.session or self.session_key or self.since or self.until or self.matching):
            raise ForgetError(
                "a forget request names at least one selector (entry, session, session key, time range or text)"
            )
        if self.session_key is not None and SESSION_KEY.fullmatch(self.session_key) is None:
            raise ForgetError(f"--session-key {self.session_key!r}: must be 1 to 128 of A-Z a-z 0-9 . _ : -")
        if self.matching is not None and not _words(self.matching):
            raise ForgetError("--matching must hold at least one word")

    def selects(self, entry: TranscriptEntry) -> bool:
        if self.entries and not ({entry.id, f"{entry.session_id}#{entry.id}"} & set(self.entries)):
            return False
        if self.session is not None and entry.session_id != self.session:
            return False
        if self.session_key is not None and entry.session_key != self.session_key:
            return False
        if self.channel is not None and entry.channel != self.channel:
            return False
        if self.author is not None and entry.author != self.author:
            return False
        if self.kinds and entry.kind.value not in self.kinds:
            return False
        if self.since is not None or self.until is not None:
            try:
                at = as_utc(datetime.fromisoformat(entry.timestamp))
            except ValueError:
                return False
            if self.since is not None and at < as_utc(self.since):
                return False
            if self.until is not None and at >= as_utc(self.until):
                return False
        if self.matching is not None and " ".join(_words(self.matching)) not in " ".join(_words(entry.content)):
            return False
        return True


@dataclass(frozen=True)
class ForgetReport:
    tombstones: tuple[dict[str, Any], ...]
    memory_files_removed: tuple[str, ...] = ()
    derived_files_rewritten: tuple[str, ...] = ()
    quarantined_lines_removed: int = 0
    dry_run: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    insight: InsightForgetting | None = None  # the insight engine's files and ledger entries it changed (would change)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "forgotten": len(self.tombstones),
            "tombstones": list(self.tombstones),
            "memory_files_removed": list(self.memory_files_removed),
            "derived_files_rewritten": list(self.derived_files_rewritten),
            "quarantined_lines_removed": self.quarantined_lines_removed,
            "notes": list(self.notes),
            "insight": self.insight.to_dict() if self.insight is not None else None,
        }


# ---- fingerprints -----------------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _digest(words: Iterable[str]) -> str:
    return hashlib.sha256(" ".join(words).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprints(text: str) -> dict[str, list[str]]:
    """``windows``: the hashes of every five-word window (one window for three or four words); ``whole``: the
    hash of the whole word sequence, matched only as a whole string when the text is shorter than three words."""
    words = _words(text)
    if not words:
        return {"windows": [], "whole": []}
    if len(words) < 3:
        return {"windows": [], "whole": [_digest(words)]}
    size = min(WINDOW, len(words))
    return {"windows": sorted({_digest(words[i : i + size]) for i in range(len(words) - size + 1)}), "whole": []}


@dataclass
class Prints:
    """The fingerprints of everything forgotten, by window size, for matching a derived string."""

    windows: dict[int, set[str]] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)

    def add(self, text: str) -> None:
        words = _words(text)
        found = fingerprints(text)
        if found["windows"]:
            self.windows.setdefault(min(WINDOW, len(words)), set()).update(found["windows"])
        self.whole.update(found["whole"])

    def add_recorded(self, record: dict[str, Any]) -> None:
        size = int(record.get("window", WINDOW))
        self.windows.setdefault(size, set()).update(record.get("windows", ()))
        self.whole.update(record.get("whole", ()))

    def __bool__(self) -> bool:
        return bool(self.whole or any(self.windows.values()))

    def holds(self, text: str) -> bool:
        words = _words(text)
        if self.whole and _digest(words) in self.whole:
            return True
        for size, prints in self.windows.items():
            if prints and any(_digest(words[i : i + size]) in prints for i in range(len(words) - size + 1)):
                return True
        return False


def _scrub(value: Any, prints: Prints) -> tuple[Any, bool]:
    """``value`` with every string (and mapping key) that holds a forgotten text replaced by ``FORGOTTEN``."""
    if isinstance(value, str):
        return (FORGOTTEN, True) if prints.holds(value) else (value, False)
    if isinstance(value, list):
        pairs = [_scrub(v, prints) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            new_key, key_changed = _scrub(key, prints)
            new_item, item_changed = _scrub(item, prints)
            out[f"{new_key}-{len(out)}" if new_key in out else new_key] = new_item
            changed = changed or key_changed or item_changed
        return out, changed
    return value, False


def _scrub_lines(data: bytes, prints: Prints) -> tuple[bytes, bool]:
    """A JSONL file's bytes with each holding record scrubbed (unchanged lines kept byte for byte); a line that is
    not JSON and holds the text is dropped."""
    out, changed = [], False
    for line in data.splitlines(keepends=True):
        text = line.decode("utf-8", "replace")
        if not prints.holds(text):
            out.append(line)
            continue
        changed = True
        try:
            scrubbed, _ = _scrub(json.loads(text), prints)
        except ValueError:
            continue
        out.append((json.dumps(scrubbed) + "\n").encode())
    return b"".join(out), changed


# ---- the derived files ------------------------------------------------------------------------------------
def _derived_files(layout: StoreLayout) -> Iterator[Path]:
    for folder in DERIVED_FOLDERS:
        base = layout.root / folder
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file() and not path.is_symlink() and path.name != FINGERPRINTS:
                    yield path


def _read_derived(path: Path) -> bytes:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as handle:
            return handle.read()
    return path.read_bytes()


def _rewrite_derived(path: Path, prints: Prints) -> bool:
    try:
        data = _read_derived(path)
    except (OSError, EOFError):
        return False
    if not prints.holds(data.decode("utf-8", "replace")):
        return False
    if path.name.endswith((".jsonl", ".jsonl.gz")) or path.suffix == ".jsonl":
        new, _ = _scrub_lines(data, prints)
    else:
        try:
            scrubbed, _ = _scrub(json.loads(data), prints)
            new = (json.dumps(scrubbed, indent=2, sort_keys=True) + "\n").encode()
        except ValueError:
            new = FORGOTTEN.encode()
    atomic_write_bytes(path, gzip.compress(new) if path.suffix == ".gz" else new)
    return True


def derived_holders(layout: StoreLayout, prints: Prints, catalog_texts: Iterable[str] = ()) -> list[str]:
    """Where a derived store still holds a forgotten text (store-relative names): the JSON records, memory files
    and their archive, quarantined lines, and the texts the catalog holds."""
    found = [p.relative_to(layout.root).as_posix() for p in _derived_files(layout) if _holds_file(p, prints)]
    for folder in (layout.memory, layout.archive / "memory", layout.quarantine):
        if folder.is_dir():
            found += [
                p.relative_to(layout.root).as_posix()
                for p in sorted(folder.rglob("*"))
                if p.is_file() and not p.is_symlink() and _holds_file(p, prints)
            ]
    if any(prints.holds(text) for text in catalog_texts):
        found.append("index/catalog.sqlite")
    return found


def _holds_file(path: Path, prints: Prints) -> bool:
    try:
        return prints.holds(_read_derived(path).decode("utf-8", "replace"))
    except (OSError, EOFError):
        return False


# ---- forgetting -------------------------------------------------------------------------------------------
def tombstone(entry: TranscriptEntry, *, by: str, why: str, at: str) -> TranscriptEntry:
    removed = canonical_json({"content": entry.content, "meta": entry.meta})
    return TranscriptEntry(
        id=entry.id,
        session_id=entry.session_id,
        agent_id=entry.agent_id,
        kind=entry.kind,
        timestamp=entry.timestamp,
        content="",
        channel=entry.channel,
        parent_id=entry.parent_id,
        author=entry.author,
        subagent_id=entry.subagent_id,
        session_key=entry.session_key,  # the tombstone stays in its conversation: a later export or forget finds it
        meta={
            "forgotten": {
                "by": by,
                "at": at,
                "why": why,
                "removed_sha256": hashlib.sha256(removed.encode("utf-8", "surrogatepass")).hexdigest(),
                "removed_chars": len(entry.content),
            }
        },
    )


def is_tombstone(entry: TranscriptEntry) -> bool:
    return isinstance(entry.meta.get("forgotten"), dict) and entry.content == ""


@dataclass(frozen=True)
class Selection:
    """What a request forgets: the entries it selects (whose texts are forgotten, by ``prints``) and the handoffs
    resting on them (tombstoned too, but the other turns a handoff quoted are not forgotten with it)."""

    selected: tuple[TranscriptEntry, ...]
    resting: tuple[TranscriptEntry, ...]
    prints: Prints

    @property
    def entries(self) -> tuple[TranscriptEntry, ...]:
        return self.selected + self.resting


def select(substrate: Any, request: ForgetRequest) -> Selection:
    """The entries a request forgets, and the handoffs resting on them (citing or repeating one)."""
    from lca.handoff import handoff_pointers

    selected = tuple(e for e in substrate.transcript.iter_entries() if not is_tombstone(e) and request.selects(e))
    keys = {f"{e.session_id}#{e.id}" for e in selected}
    prints = Prints()
    for entry in selected:
        prints.add(entry.content)
    resting = []
    for entry in substrate.transcript.entries_of_kind(EntryKind.HANDOFF):
        if is_tombstone(entry) or f"{entry.session_id}#{entry.id}" in keys:
            continue
        try:
            cites = bool(set(handoff_pointers(entry)) & keys)
        except (ValueError, KeyError, TypeError, AttributeError):
            cites = False
        if cites or (prints and prints.holds(entry.content)):
            resting.append(entry)
    return Selection(selected, tuple(resting), prints)


def forget(
    substrate: Any, request: ForgetRequest, *, by: str, why: str, dry_run: bool = False, now: datetime | None = None
) -> ForgetReport:
    """Tombstone what ``request`` selects and drop or derive again everything that rested on it (module doc)."""
    if not by.strip() or not why.strip():
        raise ForgetError("forgetting names who asks (--by) and why (--why): the tombstone records both")
    layout: StoreLayout = substrate.layout
    record = read_authority(layout.root)
    if record is not None and record.state != "active":
        raise ForgetError(
            f"{layout.root}: a {record.state} store cannot forget (its authority is elsewhere): forget on the "
            "agent's own store, then export and import again"
        )
    selection = select(substrate, request)
    if not selection.selected:
        raise ForgetError("nothing matches the request (tombstones are not selected again)")
    at = (now or datetime.now().astimezone()).isoformat(timespec="seconds")
    keys = {f"{e.session_id}#{e.id}" for e in selection.entries}
    prints = selection.prints
    stones = [tombstone(e, by=by, why=why, at=at) for e in selection.entries]
    summary = tuple(
        {"session": s.session_id, "entry": s.id, "removed_sha256": s.meta["forgotten"]["removed_sha256"]}
        for s in stones
    )
    if dry_run:
        resting = tuple(_resting_memories(substrate, keys, prints))
        plan = insight_plan(layout.root, resting, prints.holds)
        return ForgetReport(summary, memory_files_removed=resting, dry_run=True, insight=plan)
    with substrate.writer_lock():
        for session_id in sorted({s.session_id for s in stones}):
            _rewrite_session(substrate.transcript.session_path(session_id), {s.id: s for s in stones}, prints)
        _record_fingerprints(layout, selection.selected, at)
        removed = _remove_memory(substrate, keys, prints)
        rewritten = [
            p.relative_to(layout.root).as_posix() for p in _derived_files(layout) if _rewrite_derived(p, prints)
        ]
        quarantined = _remove_quarantined(layout, prints)
        insight = forget_records(layout.root, removed, prints.holds, by=by, why=why)
    substrate.reindex()
    return ForgetReport(summary, tuple(removed), tuple(rewritten), quarantined, insight=insight)


def _rewrite_session(path: Path, stones: dict[str, TranscriptEntry], prints: Prints) -> None:
    """The session file with each forgotten entry's line replaced by its tombstone, and a malformed line holding
    a forgotten text left out (its quarantined copy goes too), renamed into place."""

    refuse_link(path, what="a linked session is never rewritten")
    out = []
    with open(path, "rb") as handle:
        for line in handle:
            try:
                obj = json.loads(line)
                entry_id = obj.get("id") if isinstance(obj, dict) and "hash" in obj else None
            except ValueError:
                entry_id = None
            if entry_id in stones:
                out.append(encode_entry(stones[entry_id]))
            elif entry_id is None and prints.holds(line.decode("utf-8", "replace")):
                continue
            else:
                out.append(line)
    tmp = path.with_name(f".{path.name}.forget-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(out))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _record_fingerprints(layout: StoreLayout, entries: Iterable[TranscriptEntry], at: str) -> None:
    layout.events.mkdir(parents=True, exist_ok=True)
    with open(layout.events / FINGERPRINTS, "a", encoding="utf-8") as handle:
        for entry in entries:
            found = fingerprints(entry.content)
            size = min(WINDOW, len(_words(entry.content)))
            handle.write(json.dumps({"at": at, "window": size, **found}) + "\n")


def _resting_memories(substrate: Any, keys: set[str], prints: Prints) -> Iterator[str]:
    """The memory files that cite a forgotten turn or hold its text, by id."""
    for memory_id, memory in substrate.memory_files().items():
        cited = {f"{s.session}#{e}" for s in memory.record.sources for e in (*s.entries, s.first, s.last) if e}
        if cited & keys or (memory.path.is_file() and _holds_file(memory.path, prints)):
            yield memory_id


def _remove_memory(substrate: Any, keys: set[str], prints: Prints) -> list[str]:
    """Memory files that cite a forgotten turn or hold its text, with their archived versions."""
    layout: StoreLayout = substrate.layout
    files = substrate.memory_files()
    removed = list(_resting_memories(substrate, keys, prints))
    for memory_id in removed:
        files[memory_id].path.unlink(missing_ok=True)
    for folder in (layout.memory, layout.archive / "memory"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if (
                path.is_file()
                and not path.is_symlink()
                and (any(part in removed for part in path.relative_to(folder).parts) or _holds_file(path, prints))
            ):
                path.unlink()
    return removed


def _remove_quarantined(layout: StoreLayout, prints: Prints) -> int:
    count = 0
    if layout.quarantine.is_dir():
        for path in sorted(layout.quarantine.glob("*.bin")):
            if not path.is_symlink() and _holds_file(path, prints):
                path.unlink()
                count += 1
    return count


# ---- health -----------------------------------------------------------------------------------------------
def recorded_prints(layout: StoreLayout) -> tuple[Prints, int]:
    """The fingerprints of every forgotten text, and how many texts were forgotten (one record each)."""
    prints, count = Prints(), 0
    path = layout.events / FINGERPRINTS
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                prints.add_recorded(json.loads(line))
            except (ValueError, TypeError, AttributeError):
                continue
            count += 1
    return prints, count


def forgotten_check(layout: StoreLayout, catalog_texts: Iterable[str] = ()) -> HealthCheck:
    """Whether any derived store holds a forgotten text again (by the recorded fingerprints); a store that
    forgot nothing pays nothing."""
    prints, forgotten = recorded_prints(layout)
    if not prints:
        return HealthCheck("forgotten", HealthStatus.OK, "nothing was forgotten", {"forgotten": forgotten})
    holders = derived_holders(layout, prints, catalog_texts)
    data = {"forgotten": forgotten, "holders": holders}
    if holders:
        return HealthCheck(
            "forgotten",
            HealthStatus.FAIL,
            f"a forgotten text is held again by {', '.join(holders[:5])}: run `lca forget` with the same request "
            "again, or `lca reindex`",
            data,
        )
    return HealthCheck(
        "forgotten", HealthStatus.OK, f"{forgotten} forgotten text(s); no derived store holds one again", data
    )
