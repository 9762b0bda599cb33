"""The substrate's report on itself: what it holds, what failed, and whether its views agree.

Health only reads (it opens a read-only store too) and never stops at the first damaged part: a
derived file that cannot be read is one failed check naming it, and the other checks still run.
Quarantined bytes keep the report on warning until someone reviews them and records that with
:func:`acknowledge_quarantine` (``lca health --acknowledge``); the bytes themselves are kept. The checks over the
logs and the code versions that wrote the store live in lca.health_checks; this module composes the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lca.derived import derived_id, derived_message, derived_tree
from lca.errors import DerivedStoreDamagedError, LCAError, RecordFormatError
from lca.forget import forgotten_check
from lca.health_checks import (
    ACKNOWLEDGED_FILE,
    TORN_REASON,
    Key,
    acknowledge_quarantine,
    authority_check,
    code_version_check,
    compaction_check,
    consolidation_check,
    derived_credentials,
    quarantine_check,
    read_acknowledged,
    read_quarantine_log,
    record_key,
)
from lca.health_store import chain_check, index_state_check, link_check, recall_log_check
from lca.identity import IdentityStore
from lca.index import redaction
from lca.index.chunker import indexed
from lca.index.store import IndexStore, interrupted_save_files
from lca.ingest import TRANSCRIPT_MARK, transcript_mark, watermark_problem, writer_versions
from lca.intents import intents_check
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.ports import Embedder
from lca.provenance import code_version
from lca.recall_log import RecallLog
from lca.retention import retention_check
from lca.secrets import detector_fingerprint
from lca.transcript import QuarantineRecord, TranscriptStore
from lca.types import HealthCheck, HealthReport, HealthStatus, TranscriptEntry

OK, WARN, FAIL = HealthStatus.OK, HealthStatus.WARN, HealthStatus.FAIL
# Share of chunks repeating another chunk's text above which health warns (a conversation imported twice is 0.5;
# real stores sit near 0.01), checked once a store holds enough chunks for a share to mean anything.
DUPLICATE_RATIO_WARN, DUPLICATE_MIN_CHUNKS = 0.25, 20
__all__ = [  # the checks lca.health_checks holds, imported from here as before the split
    "ACKNOWLEDGED_FILE",
    "TORN_REASON",
    "Key",
    "acknowledge_quarantine",
    "consolidation_check",
    "read_acknowledged",
    "read_quarantine_log",
    "store_health",
]


def store_health(
    *,
    layout: StoreLayout,
    transcript: TranscriptStore,
    memory: MemoryStore,
    index: IndexStore | None,
    embedder: Embedder,
    ledger: Ledger,
    count_tokens: Callable[[str], int],
    critical_budget: int,
    index_error: LCAError | None = None,
    settings_errors: Sequence[LCAError] = (),
    events: Any = None,
    recall_log: RecallLog | None = None,
) -> HealthReport:
    """Every check over one store, from the stores themselves (the facade, lca.substrate, hands them over).
    ``index`` is None when it could not be opened (``index_error`` says why): its checks become one failure."""
    checks: list[HealthCheck] = []
    damage: list[str] = [str(index_error)] if index_error is not None else []
    marks: dict[str, str] = {}
    if index is not None:
        try:
            marks = index.catalog_.watermarks(TRANSCRIPT_MARK)
        except DerivedStoreDamagedError as exc:
            damage.append(str(exc))
            index = None
    acknowledged = read_acknowledged(layout)

    # --- transcript: entries by kind, torn tails, malformed lines, edits below the watermark ----
    view = _read_transcript(transcript, marks)
    new_malformed = [r for r in view.malformed if record_key(r) not in acknowledged]
    problems = []
    if view.torn_tails:
        problems.append(
            f"{len(view.torn_tails)} session file(s) end in an unfinished line "
            f"({sum(view.torn_tails.values())} bytes never acknowledged to a writer: "
            + ", ".join(sorted(view.torn_tails))
            + "); the next write or `lca ingest` quarantines it"
        )
    if new_malformed:
        problems.append(
            f"{len(new_malformed)} malformed line(s) inside session files (quarantined copies kept): review them "
            "and run `lca health --acknowledge`"
        )
    problems.extend(view.edited)
    problems.extend(view.conflicts)
    acknowledged_malformed = len(view.malformed) - len(new_malformed)
    checks.append(
        HealthCheck(
            "transcript",
            FAIL if problems else OK,
            f"{view.entries} entries in {view.sessions} sessions"
            + "".join(f"; {p}" for p in problems)
            + (f"; {acknowledged_malformed} malformed line(s) acknowledged" if acknowledged_malformed else ""),
            {
                "entries": view.entries,
                "sessions": view.sessions,
                "by_kind": dict(view.by_kind),
                "malformed_lines": len(view.malformed),
                "unacknowledged_malformed_lines": len(new_malformed),
                "torn_tails": dict(view.torn_tails),
                "edited_below_watermark": list(view.edited),
                "conflicting_ids": list(view.conflicts),
            },
        )
    )
    checks.append(chain_check(layout, [transcript.session_path(s) for s in transcript.session_ids()]))
    checks.append(link_check(layout))
    checks.append(recall_log_check(recall_log or RecallLog(layout.recall_log)))
    quarantined, q_bytes = quarantine_check(layout, acknowledged)
    checks.append(quarantined)

    # --- memory files -------------------------------------------------------------
    loaded = memory.load()
    failures = [str(f) for f in loaded.failures]
    checks.append(
        HealthCheck(
            "memory_files",
            FAIL if failures else (WARN if loaded.drifted else OK),
            f"{len(loaded.files)} loaded, {len(failures)} failed to load, {len(loaded.drifted)} edited outside the "
            "write API",
            {"loaded": len(loaded.files), "failed": failures, "drifted": list(loaded.drifted)},
        )
    )

    # --- Layer 0: identity files changed only through the approval gate -----------------------
    around = IdentityStore(layout.root).edited_around_the_gate()
    checks.append(
        HealthCheck(
            "identity_files",
            WARN if around else OK,
            f"{len(around)} identity file(s) differ from their last approved write: {', '.join(around)}"
            if around
            else "identity files match their last approved writes",
            {"edited_around_the_gate": around},
        )
    )

    # --- the always-loaded critical set ----------------------------------------------------
    critical = [f for f in loaded.files if f.record.critical and f.record.superseded_by is None]
    critical_tokens = sum(count_tokens(f.body) for f in critical)
    budget = critical_budget
    checks.append(
        HealthCheck(
            "critical_set",
            WARN if critical_tokens > budget else OK,
            f"{len(critical)} critical memories, about {critical_tokens} tokens of a {budget}-token budget"
            + ("; the lowest-weighted overflow and are not always loaded" if critical_tokens > budget else ""),
            {"memories": len(critical), "tokens": critical_tokens, "budget": budget},
        )
    )

    # --- settings files: reported here, refused by the commands that use them ------------------
    checks.append(
        HealthCheck(
            "settings",
            FAIL if settings_errors else OK,
            "; ".join(str(e) for e in settings_errors) + " (the commands that use it refuse to run)"
            if settings_errors
            else "the store's settings files load (or none are set)",
            {"errors": [str(e) for e in settings_errors]},
        )
    )

    # --- the derived index: embedder, embeddings, duplicates, consistency ---------------------
    index_checks: list[HealthCheck] = []
    stats: dict = {}
    if index is not None:
        try:
            index_checks, stats = _index_checks(index, embedder, view)
        except DerivedStoreDamagedError as exc:
            damage.append(str(exc))
    if damage:
        checks.append(
            HealthCheck(
                "derived_store",
                FAIL,
                damage[0] + (f" (and {len(damage) - 1} more problem(s))" if len(damage) > 1 else ""),
                {"problems": damage},
            )
        )
    else:
        checks.extend(index_checks)
    try:  # a reindex or an ingest a kill stopped part way (lca.index.completeness)
        held = (index.catalog_, index.vectors.ids) if index is not None else (None, None)
        checks.append(index_state_check(layout, *held))
    except DerivedStoreDamagedError:
        pass  # named by the derived_store check above
    leftovers = interrupted_save_files(layout)
    checks.append(
        HealthCheck(
            "interrupted_saves",
            WARN if leftovers else OK,
            f"{len(leftovers)} file(s) left by interrupted index saves ({', '.join(p.name for p in leftovers)}); "
            "the next `lca ingest` removes them"
            if leftovers
            else "no files left by interrupted index saves",
            {"files": [str(p) for p in leftovers]},
        )
    )

    # --- consolidation: how often the verifier stopped a write, and why; whether it ran before compaction ---
    checks.append(consolidation_check(ledger))
    try:
        cycles = ledger.state().cycles
    except RecordFormatError:
        cycles = None  # the consolidation check names the unreadable ledger
    checks.append(compaction_check(layout, cycles, transcript))
    checks.append(authority_check(layout))
    checks.append(intents_check(layout.root))
    checks.append(retention_check(layout.root, transcript))

    # --- version: who wrote last, and every version that wrote since the index was built ---------------
    if index is not None and not damage:
        catalog = index.catalog_
        checks.append(
            code_version_check(catalog.get_meta("last_writer_version"), writer_versions(catalog), code_version())
        )

    counts = {
        "entries": view.entries,
        "entries_by_kind": dict(view.by_kind),
        "chunks": stats.get("chunks"),
        "chunks_by_source": stats.get("chunks_by_source"),
        "items_by_source": stats.get("items_by_source"),
        "memory_files": len(loaded.files),
        "failed_embeddings": stats.get("failed_embeddings"),
        "split_chunks": stats.get("split_chunks"),
        "duplicate_ratio": stats.get("duplicate_ratio"),
        "quarantined_bytes": q_bytes,
    }
    if events is not None:
        checks.append(_events_check(events))
        counts["replacement_events"] = checks[-1].data.get("events", 0)
    # what the report says is shown and kept: every detail and datum through the redaction pass (a session file's
    # name, a quarantined line's reason, a memory file's error may quote a credential)
    shown = (HealthCheck(c.name, c.status, derived_message(c.detail), derived_tree(dict(c.data))) for c in checks)
    return HealthReport(str(layout.root), tuple(shown), counts)


def _events_check(events: Any) -> HealthCheck:
    """The replacement events (``lca.events.EventBook``): how many by origin, and the inferred lines refused at load
    (a turn the transcript does not hold, or an unreadable line): derived, so ``lca reindex`` rebuilds them."""
    try:
        found = events.events()
        refused = events.refused()
    except LCAError as exc:  # an unreadable ledger event: named, not raised
        return HealthCheck("replacement_events", HealthStatus.FAIL, str(exc))
    by_origin: dict[str, int] = {}
    for event in found:
        by_origin[event.origin] = by_origin.get(event.origin, 0) + 1
    data = {"events": len(found), "by_origin": by_origin, "refused": len(refused), "refused_lines": refused[:20]}
    if refused:
        detail = (
            f"{len(refused)} inferred event line(s) refused at load (first: {refused[0]}); `lca reindex` rebuilds them"
        )
        return HealthCheck("replacement_events", HealthStatus.WARN, detail, data)
    return HealthCheck("replacement_events", HealthStatus.OK, f"{len(found)} event(s): {by_origin or 'none'}", data)


@dataclass
class _TranscriptView:
    """What health read of the session files, against the index's watermarks."""

    sessions: int = 0
    entries: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    malformed: list[QuarantineRecord] = field(default_factory=list)
    below_watermark: set[tuple[str, str]] = field(default_factory=set)  # entries the catalog must hold
    present: set[tuple[str, str]] = field(default_factory=set)  # every entry, wherever it is
    pending: int = 0  # entries past the watermark: the next ingest indexes them
    torn_tails: dict[str, int] = field(default_factory=dict)  # session file -> unfinished bytes at its end
    edited: list[str] = field(default_factory=list)  # session files changed below their watermark
    conflicts: list[str] = field(default_factory=list)  # an entry id on two lines with different content


def _read_transcript(transcript: TranscriptStore, marks: dict[str, str]) -> _TranscriptView:
    view = _TranscriptView()
    for session_id in transcript.session_ids():
        view.sessions += 1
        path = transcript.session_path(session_id)
        mark = int(marks.get(transcript_mark(session_id)) or 0)
        edited = watermark_problem(path, mark)
        if edited:  # read it whole: reading on from the watermark would take half a line for a torn one
            view.edited.append(edited)
            mark = 0
        seen = transcript.read(session_id, end=mark) if mark else None
        rest = transcript.read(session_id, start=mark)
        for part in (seen, rest):
            if part is None:
                continue
            view.malformed.extend(part.malformed)
            view.entries += len(part.entries)
            view.by_kind.update(entry.kind.value for entry in part.entries)
            view.present.update((derived_id(e.session_id), derived_id(e.id)) for e in part.entries)  # as indexed
        if seen:  # below the watermark: in the catalog, or held back as an embedding failure (handoffs never are)
            view.below_watermark.update(
                (derived_id(e.session_id), derived_id(e.id)) for e in seen.entries if indexed(e)
            )
        view.conflicts.extend(_conflicting_ids(path, [e for part in (seen, rest) if part for e in part.entries]))
        if not edited:
            view.pending += len(rest.entries)
        tail = _unfinished_tail(path)
        if tail:
            view.torn_tails[path.name] = tail
    return view


def _conflicting_ids(path: Path, entries: list[TranscriptEntry]) -> list[str]:
    """Each entry id a session file holds on two lines with different content: no writer appends that (an id is
    recorded once), so a hand added it, and search would return two texts for one pointer."""
    first: dict[str, TranscriptEntry] = {}
    out = []
    for entry in entries:
        known = first.setdefault(entry.id, entry)
        if known is not entry and known != entry:
            out.append(
                f"{path}: entry id {entry.id!r} is recorded twice with different content (acknowledged history is "
                "never rewritten: a line was added by hand)"
            )
    return out


def _unfinished_tail(path: Path, block: int = 65536) -> int:
    """Bytes after the last newline of a file: a torn append no writer has quarantined yet."""
    with open(path, "rb") as handle:
        end = handle.seek(0, 2)
        pos = end
        while pos > 0:
            start = max(0, pos - block)
            handle.seek(start)
            found = handle.read(pos - start).rfind(b"\n")
            if found >= 0:
                return end - (start + found + 1)
            pos = start
        return end


def _index_checks(index: IndexStore, embedder: Embedder, view: _TranscriptView) -> tuple[list[HealthCheck], dict]:
    """The checks that read the derived index; a damaged file raises DerivedStoreDamagedError."""
    checks = []
    mismatch = index.embedder_mismatch()
    checks.append(
        HealthCheck(
            "embedder",
            FAIL if mismatch else OK,
            mismatch
            or (
                f"store and runtime agree: {embedder.embedder_id}"
                if index.stored_embedder_id()
                else f"no vectors yet; the running embedder is {embedder.embedder_id}"
            ),
            {"stored": index.stored_embedder_id(), "running": embedder.embedder_id},
        )
    )
    stats = index.catalog_.stats()
    counters = index.catalog_.counters()
    failed = stats["failed_embeddings"]
    checks.append(
        HealthCheck(
            "embeddings",
            FAIL if failed else OK,
            f"{failed} chunk(s) held back after failed embedding; {stats['split_items']} item(s) split into "
            f"{stats['split_chunks']} chunks to fit the embedder's input limit",
            {
                "failed_now": failed,
                "failures_ever": counters.get("embedding_failures", 0),
                "embedded_texts_ever": counters.get("embedded_texts", 0),
                "split_chunks": stats["split_chunks"],
                "split_items": stats["split_items"],
                "failures": index.catalog_.failure_summary()[:20],
            },
        )
    )
    chunks, distinct = stats["chunks"], stats["distinct_texts"]
    stats["duplicate_ratio"] = ratio = 1.0 - distinct / chunks if chunks else 0.0
    many = ratio > DUPLICATE_RATIO_WARN and chunks >= DUPLICATE_MIN_CHUNKS
    detail = f"duplicate ratio {ratio:.4f}: {chunks} chunks over {distinct} distinct texts (one vector per text)"
    if many:
        detail += f"; above {DUPLICATE_RATIO_WARN}: was the same conversation ingested twice (that gives 0.5)?"
    data = {"duplicate_ratio": ratio, "chunks": chunks, "distinct_texts": distinct}
    checks.append(HealthCheck("duplicates", WARN if many else OK, detail, {**data, "warn_above": DUPLICATE_RATIO_WARN}))

    # redaction: whether search may show stored texts as they are (correct either way; a read redacts otherwise),
    # and whether any derived store holds a credential (texts this detector vouched for are not scanned again)
    held = redaction.state(index.catalog_)
    found = derived_credentials(index.layout, index.catalog_.stored_values(texts=held != "vouched"))
    detail = {
        "vouched": "every stored text was scanned by this detector when written: hits are shown as stored",
        "empty": "no text stored yet",
    }.get(
        held,
        f"{held}: not every stored text was scanned by this detector when written, so each hit is redacted "
        "again when read (correct, about 60 microseconds a hit); `lca reindex` rescans and records it",
    )
    if found:
        detail = (
            f"a credential in {len(found)} derived store(s) ({', '.join(found)}): `lca reindex` rebuilds the index "
            "from the transcript; a log or report holding one is to be deleted (the transcript keeps every value)"
        )
    data = {"state": held, "detector": detector_fingerprint(), "credentials": found}
    checks.append(HealthCheck("redaction", FAIL if found else OK, detail, data))
    checks.append(forgotten_check(index.layout, (v for _, v in index.catalog_.stored_values(texts=True))))

    # consistency: index vs catalog vs transcript
    consistency = index.consistency()
    indexed = index.catalog_.indexed_entry_ids()
    missing = view.below_watermark - indexed
    extra = indexed - view.present  # an entry indexed past its watermark (a kill before it moved) is present
    problems = []
    if consistency.missing_vectors:
        problems.append(f"{consistency.missing_vectors} catalog text(s) without a vector")
    if consistency.orphan_vectors:
        problems.append(f"{consistency.orphan_vectors} vector(s) no chunk uses")
    if consistency.lexical_stale or consistency.lexical_documents != consistency.catalog_chunks:
        problems.append(
            f"lexical index holds {consistency.lexical_documents} documents for "
            f"{consistency.catalog_chunks} chunks" + (" (stale)" if consistency.lexical_stale else "")
        )
    if missing:
        problems.append(f"{len(missing)} transcript entr(y/ies) below the watermark missing from the catalog")
    if extra:
        problems.append(f"{len(extra)} catalog entr(y/ies) not in the transcript")
    if view.edited:
        problems.append(f"{len(view.edited)} session file(s) changed below their watermark: run `lca reindex`")
    pending = view.pending
    status = FAIL if problems else (WARN if pending else OK)
    detail = (
        "; ".join(problems)
        if problems
        else (
            f"{pending} transcript entr(y/ies) await ingest"
            if pending
            else "faiss, bm25 and the catalog agree with each other and with the transcript"
        )
    )
    checks.append(
        HealthCheck(
            "consistency",
            status,
            detail,
            {
                "catalog_vectors": consistency.catalog_vectors,
                "faiss_vectors": consistency.faiss_vectors,
                "missing_vectors": consistency.missing_vectors,
                "orphan_vectors": consistency.orphan_vectors,
                "lexical_documents": consistency.lexical_documents,
                "catalog_chunks": consistency.catalog_chunks,
                "entries_missing_from_catalog": sorted(map(list, missing))[:20],
                "catalog_entries_not_in_transcript": sorted(map(list, extra))[:20],
                "entries_pending": pending,
            },
        )
    )
    return checks, stats
