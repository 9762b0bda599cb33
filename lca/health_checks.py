"""Health checks over the store's logs and the code that wrote it, apart from lca.health's report that runs them.

The quarantine log and what a person acknowledged of it; the consolidation rates from the ledger; every code version
that wrote the index since it was built (a stale build that wrote once stays visible after the current one writes
again); and whether the live window pruned turns before a consolidation cycle read them (the prune log against the
ledger's cycle spans). Each reads files only; lca.health composes them into the one report.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from lca.authority import fencing_refusals, read_authority
from lca.derived import derived_id, derived_tree
from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes
from lca.layout import StoreLayout
from lca.ledger import Ledger
from lca.provenance import version_order
from lca.secrets import find_secrets
from lca.transcript import QuarantineRecord, TranscriptStore
from lca.types import HealthCheck, HealthStatus, canonical_json

OK, WARN, FAIL = HealthStatus.OK, HealthStatus.WARN, HealthStatus.FAIL
ACKNOWLEDGED_FILE = "acknowledged.jsonl"  # in the quarantine folder: what a person reviewed, and when
TORN_REASON = "torn final line"  # how lca.transcript begins the reason of a quarantined torn tail

Key = tuple[str, int, str]  # (file, offset or line, sha256): one quarantined record or unreadable log line


# ---- quarantine: the log, and what a person has acknowledged ------------------------------------
def record_key(record: QuarantineRecord) -> Key:
    """A record as acknowledgements name it: its session file by its derived name (``lca.derived``)."""
    return (derived_id(record.session_file), record.offset, record.sha256)


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
    for key in [record_key(r) for r in (*records, *malformed)] + [key for key, _ in unreadable]:
        if key not in done:
            keys[key] = None
    if keys:
        at = time.time()
        lines = "".join(
            canonical_json(derived_tree({"file": f, "offset": o, "sha256": h, "at": at, "by": by})) + "\n"
            for f, o, h in keys
        )
        append_bytes(layout.quarantine / ACKNOWLEDGED_FILE, lines.encode("utf-8"))
    return len(keys)


def quarantine_check(layout: StoreLayout, acknowledged: set[Key]) -> tuple[HealthCheck, int]:
    records, unreadable = read_quarantine_log(layout)
    pending = [r for r in records if record_key(r) not in acknowledged]
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


# ---- the code that wrote the index ------------------------------------------------------------------
def code_version_check(last: str | None, writers: Mapping[str, Mapping[str, Any]], running: str) -> HealthCheck:
    """The code that wrote the index against the running code. WARN when the last writer is not the running
    code, and when any writer since the index was last built (``writers``, lca.ingest's record) is stale: it wrote
    after a build known to be later than it had already written (an old process still running beside an upgrade).
    An upgrade (old writes, then only new ones) is not stale, and builds no order is known for (two dirty trees of
    one revision) are not judged. The record lives in the derived catalog, so `lca reindex` (a rebuild by the
    running code from the transcript) clears it."""
    stale = {
        v: w
        for v, w in writers.items()
        if any(
            version_order(v, later) == -1 and float(w.get("last", 0)) > float(x.get("first", 0))
            for later, x in writers.items()
            if later != v
        )
    }
    detail = f"last written by {last or 'nothing yet'}; running {running}"
    if stale:
        detail += (
            "; since the index was built it was also written by "
            + ", ".join(f"{v} ({w.get('ingests', '?')} ingest(s))" for v, w in sorted(stale.items()))
            + " after a later build had written it: stop the stale writer, then run `lca reindex` to rebuild the "
            "index with the running code"
        )
    return HealthCheck(
        "code_version",
        WARN if (last and last != running) or stale else OK,
        detail,
        {
            "last_writer": last,
            "running": running,
            "writers": {v: dict(w) for v, w in writers.items()},
            "stale": sorted(stale),
        },
    )


# ---- compaction: were pruned turns consolidated before they left the live window -----------------------
def read_prune_log(layout: StoreLayout) -> tuple[list[dict[str, Any]], list[str]]:
    """The prune log's records (lca.context writes one per turn that left a live window) and why each line that
    is not one was skipped."""
    path = layout.prune_log
    if not path.exists():
        return [], []
    records, unreadable = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw.decode("utf-8"))
            records.append(
                {"session_id": str(item["session_id"]), "entry_id": str(item["entry_id"]), "at": float(item["at"])}
            )
        except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            unreadable.append(f"{path}, line {number}: not a prune record ({type(exc).__name__}: {exc})")
    return records, unreadable


def compaction_check(
    layout: StoreLayout, cycles: Iterable[Mapping[str, Any]] | None, transcript: TranscriptStore
) -> HealthCheck:
    """Whether the turns the live window pruned were read by a consolidation cycle before they left it (the
    manager's pre_compaction trigger runs one just before it prunes). A turn's cycle is the first completed one whose
    span (``marks``: byte offsets per session) holds it; a prune is late when that cycle was recorded after it, or,
    in a store that consolidates at all, when no cycle has read the turn yet. WARN while the log holds a late prune: it is the evidence that turns left
    before consolidation, and in-time prunes after it cannot tell a fixed trigger from a late one (a late host's cycle
    also reads the turns its next prune takes), so it stays until the prune log is moved aside."""
    if cycles is None:
        return HealthCheck(
            "compaction", OK, "not checked: the learned-state ledger is unreadable (see consolidation)", {}
        )
    prunes, unreadable = read_prune_log(layout)
    cycles = list(cycles)
    # a store that never consolidates (consolidation off) has no cycle to run before a prune: nothing to judge
    consolidates = any(c.get("status") == "completed" for c in cycles)
    sessions = {p["session_id"] for p in prunes}
    first_read: dict[tuple[str, str], Mapping[str, Any]] = {}
    for cycle in cycles:
        if cycle.get("status") != "completed":
            continue
        for session, mark in (cycle.get("marks") or {}).items():
            if session not in sessions:
                continue
            try:
                span = transcript.read(session, start=int(mark["start_offset"]), end=int(mark["end_offset"]))
            except (LCAError, KeyError, TypeError, ValueError):
                continue
            for entry in span.entries:
                first_read.setdefault((session, entry.id), cycle)
    late: list[dict[str, Any]] = []  # read by a cycle only after the prune
    unread: list[dict[str, Any]] = []  # no cycle has read it
    for p in prunes:
        reader = first_read.get((p["session_id"], p["entry_id"]))
        if reader is None:
            unread.append(p)
        elif float(reader["at"]) > p["at"]:
            late.append({**p, "cycle": reader.get("cycle"), "trigger": reader.get("trigger"), "cycle_at": reader["at"]})
    if not prunes:
        detail = "no turn has left a live window"
    else:
        detail = f"{len(prunes)} turn(s) pruned from live windows; {len(prunes) - len(late) - len(unread)} read by a consolidation cycle before they left"
        if late:
            triggers = Counter(str(t) for _, t in {(p["cycle"], p["trigger"]) for p in late})
            by = ", ".join(f"{n} {t} cycle(s)" for t, n in sorted(triggers.items()))
            detail += f"; {len(late)} read only after their prune, by {by}"
        if unread and not consolidates:
            detail += "; the store has not consolidated (consolidation off): no cycle was due before a prune"
            unread = []
        if unread:
            detail += f"; {len(unread)} not read by any cycle yet"
        if late or unread:
            detail += (
                ": turns left the window before consolidation read them; run the pre_compaction cycle before the "
                "window prunes (LiveContextManager's consolidate hook)"
            )
    if unreadable:
        detail += f"; the prune log has {len(unreadable)} unreadable line(s): {unreadable[0]}"
    return HealthCheck(
        "compaction",
        WARN if late or unread else OK,
        detail,
        {
            "pruned": len(prunes),
            "read_after_prune": len(late),
            "not_read": len(unread),
            "late": late[-20:],
            "unread": unread[-20:],
            "unreadable_log_lines": unreadable,
        },
    )


def authority_check(layout: StoreLayout) -> HealthCheck:
    """Whether this store may write the agent's history (lca.authority), and whether writers were refused: a
    transferred or replica copy is a warning (its writes will fail), a refused append is too (a stale writer is
    still running somewhere), an unreadable record fails."""
    try:
        record = read_authority(layout.root)
        refusals = fencing_refusals(layout.root)
    except RecordFormatError as exc:
        return HealthCheck("authority", FAIL, str(exc), {})
    if record is None:
        return HealthCheck("authority", OK, "no authority record yet (the first append makes one)", {})
    data = {**record.to_dict(), "refusals": len(refusals)}
    detail = f"agent {record.agent_id}, epoch {record.epoch}, {record.state}"
    problems = []
    if not record.writable:
        problems.append(f"a {record.state} copy: its appends are refused ({record.reason})")
    if refusals:
        last = refusals[-1]
        problems.append(
            f"{len(refusals)} append(s) refused by fencing, the last at {last.get('at')} from pid {last.get('pid')} "
            f"({last.get('problem')})"
        )
    status = WARN if problems else OK
    return HealthCheck("authority", status, detail + "".join(f"; {p}" for p in problems), data)


# ---- credentials in the derived stores ------------------------------------------------------------
DERIVED_RECORDS = ("logs", "events", "consolidation", "quarantine", "proposals", "index")
"""Folders of records derived from the transcript (JSON and JSON lines, the BM25 vocabulary among them); the
transcript, memory and identity files are what the user wrote, and ``.bin`` quarantined copies are raw input."""


def derived_credentials(layout: StoreLayout, values: Iterable[tuple[str, str]] = ()) -> dict[str, dict[str, int]]:
    """Where a derived store holds a credential, {where: {kind: count}} (never the value): each ``(where, text)`` of
    ``values`` (the catalog's columns) and every string and mapping key of each JSON record under
    ``DERIVED_RECORDS`` (a line that is not JSON is scanned whole)."""
    found: dict[str, Counter[str]] = {}

    def scan(where: str, text: str) -> None:
        for finding in find_secrets(text):
            found.setdefault(where, Counter())[finding.kind] += 1

    for where, text in values:
        scan(where, text)
    for folder in DERIVED_RECORDS:
        root = layout.root / folder
        for path in sorted(root.rglob("*.json*")) if root.is_dir() and not root.is_symlink() else ():
            if path.suffix not in (".json", ".jsonl") or path.is_symlink() or not path.is_file():
                continue
            where = path.relative_to(layout.root).as_posix()
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle if path.suffix == ".jsonl" else [handle.read()]:
                    try:
                        strings = list(_strings(json.loads(line)))
                    except (ValueError, RecursionError):
                        strings = [line]
                    for text in strings:
                        scan(where, text)
    return {where: dict(kinds) for where, kinds in sorted(found.items())}


def _strings(value: Any) -> Iterable[str]:
    """Every string and mapping key in a JSON value, without recursion (a record may nest deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from (k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
