"""The substrate's report on itself: what it holds, what failed, and whether its views agree."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from lca.errors import RecordFormatError
from lca.identity import IdentityStore
from lca.index.store import IndexStore
from lca.ingest import TRANSCRIPT_MARK
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.memory import MemoryStore
from lca.ports import Embedder
from lca.provenance import code_version
from lca.transcript import TranscriptStore
from lca.types import HealthCheck, HealthReport, HealthStatus

OK, WARN, FAIL = HealthStatus.OK, HealthStatus.WARN, HealthStatus.FAIL


def store_health(
    *,
    layout: StoreLayout,
    transcript: TranscriptStore,
    memory: MemoryStore,
    index: IndexStore,
    embedder: Embedder,
    ledger: Ledger,
    count_tokens: Callable[[str], int],
    critical_budget: int,
) -> HealthReport:
    """Every check over one store, from the stores themselves (the facade, lca.substrate, hands them over)."""
    checks: list[HealthCheck] = []

    # --- transcript: entries by kind, quarantine -----------------------------------
    by_kind: Counter[str] = Counter()
    entries_total = 0
    malformed = 0
    pending_entries = 0
    expected: set[tuple[str, str]] = set()
    for session_id in transcript.session_ids():
        mark = int(index.catalog_.watermark(TRANSCRIPT_MARK + session_id) or 0)
        seen = transcript.read(session_id, end=mark) if mark else None
        rest = transcript.read(session_id, start=mark)
        entries = (seen.entries if seen else ()) + rest.entries
        malformed += len(rest.malformed) + (len(seen.malformed) if seen else 0)
        entries_total += len(entries)
        by_kind.update(entry.kind.value for entry in entries)
        # entries below the watermark must be in the catalog (or held back as failures)
        if seen:
            expected.update((e.session_id, e.id) for e in seen.entries if e.content.strip())
        pending_entries += len(rest.entries)
    quarantine = transcript.quarantine_records()
    q_bytes = sum(r.size for r in quarantine)
    torn = [r for r in quarantine if r.line is None]
    checks.append(
        HealthCheck(
            "transcript",
            FAIL if malformed else OK,
            f"{entries_total} entries in {len(transcript.session_ids())} sessions"
            + (f"; {malformed} malformed line(s) inside session files (quarantined copies kept)" if malformed else ""),
            {
                "entries": entries_total,
                "sessions": len(transcript.session_ids()),
                "by_kind": dict(by_kind),
                "malformed_lines": malformed,
            },
        )
    )
    checks.append(
        HealthCheck(
            "quarantine",
            WARN if quarantine else OK,
            f"{len(quarantine)} quarantined record(s), {q_bytes} bytes ({len(torn)} torn tail(s))"
            if quarantine
            else "nothing quarantined",
            {
                "records": len(quarantine),
                "bytes": q_bytes,
                "torn_tails": len(torn),
                "items": [r.to_dict() for r in quarantine[:50]],
            },
        )
    )

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

    # --- embedder identity ----------------------------------------------------------
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

    # --- index statistics -----------------------------------------------------------
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
    ratio = 1.0 - stats["distinct_texts"] / stats["chunks"] if stats["chunks"] else 0.0
    checks.append(
        HealthCheck(
            "duplicates",
            OK,
            f"duplicate ratio {ratio:.4f}: {stats['chunks']} chunks over {stats['distinct_texts']} "
            "distinct texts (one vector per distinct text)",
            {"duplicate_ratio": ratio},
        )
    )

    # --- consistency: index vs catalog vs transcript -------------------------------------
    consistency = index.consistency()
    indexed = index.catalog_.indexed_entry_ids()
    missing = expected - indexed
    extra = {pair for pair in indexed if pair not in expected}
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
    status = FAIL if problems else (WARN if pending_entries else OK)
    detail = (
        "; ".join(problems)
        if problems
        else (
            f"{pending_entries} transcript entr(y/ies) await ingest"
            if pending_entries
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
                "entries_pending": pending_entries,
            },
        )
    )

    # --- consolidation: how often the verifier stopped a write, and why ------------------------
    checks.append(consolidation_check(ledger))

    # --- version ---------------------------------------------------------------------
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
        "entries": entries_total,
        "entries_by_kind": dict(by_kind),
        "chunks": stats["chunks"],
        "chunks_by_source": stats["chunks_by_source"],
        "items_by_source": stats["items_by_source"],
        "memory_files": len(loaded.files),
        "failed_embeddings": failed,
        "split_chunks": stats["split_chunks"],
        "duplicate_ratio": ratio,
        "quarantined_bytes": q_bytes,
    }
    return HealthReport(str(layout.root), tuple(checks), counts)


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
