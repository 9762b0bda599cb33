"""The substrate's report on itself: what it holds, what failed, and whether its views agree.

Health only reads (it opens a read-only store too) and never stops at the first damaged part: a
derived file that cannot be read is one failed check naming it, and the other checks still run.
Quarantined bytes keep the report on warning until someone reviews them and records that with
:func:`acknowledge_quarantine` (``lca health --acknowledge``); the bytes themselves are kept.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lca.errors import DerivedStoreDamagedError, LCAError, RecordFormatError
from lca.fileio import append_bytes
from lca.identity import IdentityStore
from lca.index.chunker import UNINDEXED_KINDS
from lca.index.store import IndexStore, interrupted_save_files
from lca.ingest import TRANSCRIPT_MARK, watermark_problem
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.ports import Embedder
from lca.provenance import code_version
from lca.transcript import QuarantineRecord, TranscriptStore
from lca.types import HealthCheck, HealthReport, HealthStatus, canonical_json

OK, WARN, FAIL = HealthStatus.OK, HealthStatus.WARN, HealthStatus.FAIL
ACKNOWLEDGED_FILE = "acknowledged.jsonl"  # in the quarantine folder: what a person reviewed, and when
TORN_REASON = "torn final line"  # how lca.transcript begins the reason of a quarantined torn tail
# Share of chunks repeating another chunk's text above which health warns (a conversation imported twice is 0.5;
# real stores sit near 0.01), checked once a store holds enough chunks for a share to mean anything.
DUPLICATE_RATIO_WARN, DUPLICATE_MIN_CHUNKS = 0.25, 20

Key = tuple[str, int, str]  # (file, offset or line, sha256): one quarantined record or unreadable log line


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
    new_malformed = [r for r in view.malformed if _record_key(r) not in acknowledged]
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
            },
        )
    )
    quarantine_check, q_bytes = _quarantine_check(layout, acknowledged)
    checks.append(quarantine_check)

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

    # --- consolidation: how often the verifier stopped a write, and why ------------------------
    checks.append(consolidation_check(ledger))

    # --- version ---------------------------------------------------------------------
    if index is not None and not damage:
        last = index.catalog_.get_meta("last_writer_version")
        running = code_version()
        checks.append(
            HealthCheck(
                "code_version",
                WARN if last and last != running else OK,
                f"last written by {last or 'nothing yet'}; running {running}",
                {"last_writer": last, "running": running},
            )
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
    return HealthReport(str(layout.root), tuple(checks), counts)


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


def _read_transcript(transcript: TranscriptStore, marks: dict[str, str]) -> _TranscriptView:
    view = _TranscriptView()
    for session_id in transcript.session_ids():
        view.sessions += 1
        path = transcript.session_path(session_id)
        mark = int(marks.get(TRANSCRIPT_MARK + session_id) or 0)
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
            view.present.update((e.session_id, e.id) for e in part.entries)
        if seen:  # below the watermark: in the catalog, or held back as an embedding failure (handoffs never are)
            view.below_watermark.update(
                (e.session_id, e.id) for e in seen.entries if e.content.strip() and e.kind not in UNINDEXED_KINDS
            )
        if not edited:
            view.pending += len(rest.entries)
        tail = _unfinished_tail(path)
        if tail:
            view.torn_tails[path.name] = tail
    return view


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


# ---- quarantine: the log, and what a person has acknowledged ------------------------------------
def _record_key(record: QuarantineRecord) -> Key:
    return (record.session_file, record.offset, record.sha256)


def read_quarantine_log(layout: StoreLayout) -> tuple[list[QuarantineRecord], list[tuple[Key, str]]]:
    """The quarantine log's records, and each line that is not one: (its key, why), so a damaged
    log is reported line by line instead of stopping the report."""
    path = layout.quarantine_log
    if not path.exists():
        return [], []
    records: list[QuarantineRecord] = []
    unreadable: list[tuple[Key, str]] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = QuarantineRecord(**json.loads(raw.decode("utf-8")))
            if not (
                isinstance(record.size, int)
                and isinstance(record.offset, int)
                and isinstance(record.line, int | None)
                and all(isinstance(v, str) for v in (record.session_file, record.reason, record.sha256))
            ):
                raise TypeError("a field has the wrong type")
        except (UnicodeDecodeError, ValueError, TypeError) as exc:
            key = (path.name, number, hashlib.sha256(raw).hexdigest())
            unreadable.append((key, f"{path}, line {number}: not a quarantine record ({type(exc).__name__}: {exc})"))
            continue
        records.append(record)
    return records, unreadable


def read_acknowledged(layout: StoreLayout) -> set[Key]:
    """Keys of quarantined records and log lines someone has reviewed (unreadable lines here count as none)."""
    path = layout.quarantine / ACKNOWLEDGED_FILE
    if not path.exists():
        return set()
    keys: set[Key] = set()
    for raw in path.read_bytes().splitlines():
        try:
            item = json.loads(raw)
            keys.add((str(item["file"]), int(item["offset"]), str(item["sha256"])))
        except (ValueError, TypeError, KeyError):
            continue
    return keys


def acknowledge_quarantine(layout: StoreLayout, transcript: TranscriptStore, *, by: str | None = None) -> int:
    """Record every quarantined record and unreadable quarantine-log line present now as reviewed, so health
    stops warning about them (later ones still warn). Nothing is deleted: the quarantined bytes stay.
    The caller holds the writer lock. Returns how many were newly acknowledged."""
    malformed: list[QuarantineRecord] = []
    for session_id in transcript.session_ids():  # quarantines any malformed line no reader has met yet
        malformed.extend(transcript.read(session_id).malformed)
    records, unreadable = read_quarantine_log(layout)
    done = read_acknowledged(layout)
    keys: dict[Key, None] = {}
    for key in [_record_key(r) for r in (*records, *malformed)] + [key for key, _ in unreadable]:
        if key not in done:
            keys[key] = None
    if keys:
        at = time.time()
        lines = "".join(
            canonical_json({"file": f, "offset": o, "sha256": h, "at": at, "by": by}) + "\n" for f, o, h in keys
        )
        append_bytes(layout.quarantine / ACKNOWLEDGED_FILE, lines.encode("utf-8"))
    return len(keys)


def _quarantine_check(layout: StoreLayout, acknowledged: set[Key]) -> tuple[HealthCheck, int]:
    records, unreadable = read_quarantine_log(layout)
    pending = [r for r in records if _record_key(r) not in acknowledged]
    broken = [why for key, why in unreadable if key not in acknowledged]
    q_bytes = sum(r.size for r in records)
    torn = [r for r in records if r.reason.startswith(TORN_REASON)]
    if broken:
        status = FAIL
    else:
        status = WARN if pending else OK
    parts = []
    if records:
        parts.append(
            f"{len(records)} quarantined record(s), {q_bytes} bytes ({len(torn)} torn tail(s)); "
            + (
                f"{len(pending)} not yet acknowledged: review them in {layout.quarantine} and run "
                "`lca health --acknowledge`"
                if pending
                else "all acknowledged"
            )
        )
    if broken:
        parts.append(
            f"the quarantine log has {len(broken)} unreadable line(s) (the quarantined bytes stay in "
            f"{layout.quarantine}): {broken[0]}; review and run `lca health --acknowledge`"
        )
    elif unreadable:
        parts.append(f"the quarantine log's {len(unreadable)} unreadable line(s) are acknowledged")
    return (
        HealthCheck(
            "quarantine",
            status,
            "; ".join(parts) or "nothing quarantined",
            {
                "records": len(records),
                "bytes": q_bytes,
                "torn_tails": len(torn),
                "unacknowledged": len(pending),
                "unreadable_log_lines": [why for _, why in unreadable],
                "items": [r.to_dict() for r in records[:50]],
            },
        ),
        q_bytes,
    )


def consolidation_check(ledger: Ledger, *, recent: int = 10) -> HealthCheck:
    """Rejection and downgrade rates per cycle (the last ``recent``) and overall, from the ledger.
    A refused or failing cycle, or a memory written but not retrievable, is a failure."""
    try:
        state = ledger.state()
    except RecordFormatError as exc:
        return HealthCheck("consolidation", FAIL, f"the learned-state ledger is unreadable: {exc}", {})
    cycles = state.cycles
    if not cycles:
        return HealthCheck("consolidation", OK, "no consolidation cycle has run", {"cycles": 0})
    done = [c for c in cycles if c.get("status") == "completed"]
    totals: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    timeline = []
    for c in done:
        counts = c.get("counts") or {}
        verdicts = counts.get("verdicts") or {}
        totals["candidates"] += counts.get("candidates", 0)
        for kind, n in verdicts.items():
            totals[kind] += n
        totals["failures"] += counts.get("failures", 0)
        totals["read_back_failures"] += counts.get("read_back_failures", 0)
        for reason in c.get("rejected_reasons") or ():
            reasons[_reason_class(reason)] += 1
        timeline.append(
            {
                "cycle": c["cycle"],
                "at": c["at"],
                "trigger": c.get("trigger"),
                "candidates": counts.get("candidates", 0),
                "rejection_rate": counts.get("rejection_rate"),
                "downgrade_rate": counts.get("downgrade_rate"),
                "failures": counts.get("failures", 0),
            }
        )
    n = totals["candidates"]
    stopped = totals["reject"] + totals["remove"]
    rejection = stopped / n if n else None
    downgrade = totals["downgrade"] / n if n else None
    refused = [c for c in cycles if c.get("status") == "refused"]
    last = cycles[-1]
    status = OK
    problems = []
    if last.get("status") == "refused":
        status = FAIL
        problems.append(f"the last cycle was refused: {last.get('reason')}")
    if done and (done[-1].get("counts") or {}).get("read_back_failures"):
        status = FAIL
        problems.append("the last cycle wrote memories that recall could not return")
    if status is OK and done and (done[-1].get("counts") or {}).get("failures"):
        status = WARN
        problems.append(
            f"the last cycle recorded {done[-1]['counts']['failures']} failure(s): "
            + ", ".join(done[-1].get("failure_kinds") or ())
        )
    rate = lambda x: "n/a" if x is None else f"{x:.0%}"  # noqa: E731
    rate_recovery, recovered, promoted = state.recovery_rate()
    detail = (
        f"{len(done)} cycle(s), {n} candidate(s): the verifier stopped {stopped} ({rate(rejection)}), "
        f"downgraded {totals['downgrade']} ({rate(downgrade)}); {totals['failed']} failed review"
        + (f"; {len(refused)} cycle(s) refused" if refused else "")
        + ("; " + "; ".join(problems) if problems else "")
    )
    return HealthCheck(
        "consolidation",
        status,
        detail,
        {
            "cycles": len(done),
            "refused_cycles": len(refused),
            "candidates": n,
            "rejection_rate": rejection,
            "downgrade_rate": downgrade,
            "verdicts": {k: v for k, v in totals.items() if k not in ("candidates", "failures", "read_back_failures")},
            "rejection_reasons": dict(reasons),
            "failures": totals["failures"],
            "read_back_failures": totals["read_back_failures"],
            "recent": timeline[-recent:],
            "recovery_rate": rate_recovery,
            "recovered": recovered,
            "promoted": promoted,
            "pending_proposals": sorted(state.proposals),
        },
    )


def _reason_class(reason: str) -> str:
    """Group the cycle's rejection reasons into a few stable classes for the rate table."""
    lowered = reason.lower()
    if "contradicts" in lowered:
        return "contradiction"
    if "unsupported" in lowered or "not supported" in lowered:
        return "unsupported"
    return "reviewer rejected"
