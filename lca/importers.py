"""Importers that bring benchmark histories in through the same authoritative path as live ones.

Each importer reads an official file (plain JSON, ``.gz`` or ``.xz``), yields
sessions of :class:`TranscriptEntry` in chronological order, and keeps an
:class:`ImportReport` of what it repaired or could not parse, so nothing is
silently lost.
"""

from __future__ import annotations

import gzip
import json
import lzma
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from lca.errors import RecordFormatError
from lca.transcript import entry_from_wire, wire_records
from lca.types import EntryKind, TranscriptEntry, sha256_hex

LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
LONGMEMEVAL_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


@dataclass
class ImportReport:
    """Counts of what an import read, repaired and could not parse."""

    source: str
    source_sha256: str
    sessions: int = 0
    entries: int = 0
    repaired: Counter = field(default_factory=Counter)
    unparsed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_sha256": self.source_sha256,
            "sessions": self.sessions,
            "entries": self.entries,
            "repaired": dict(self.repaired),
            "unparsed": list(self.unparsed),
        }


@dataclass(frozen=True)
class ImportedSession:
    session_id: str
    entries: tuple[TranscriptEntry, ...]


def file_sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_official_json(path: Path | str) -> Any:
    """Read an official benchmark file, plain or compressed, with a clear error naming it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    openers: dict[str, Callable[..., IO[str]]] = {".gz": gzip.open, ".xz": lzma.open}
    opener = openers.get(path.suffix, open)
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise RecordFormatError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise RecordFormatError(f"could not be read: {exc}", path=str(path)) from None


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _session_number(key: str) -> int | None:
    match = re.fullmatch(r"session_(\d+)", key)
    return int(match.group(1)) if match else None


def import_locomo(
    path: Path | str, *, sample_ids: Sequence[str] | None = None
) -> tuple[list[ImportedSession], ImportReport]:
    """LoCoMo conversations: one session per ``session_N``, both speakers as user turns.

    Neither LoCoMo speaker is the agent, so both are recorded as ``user_turn`` with
    ``author`` set to the speaker; the ``dia_id`` and image fields stay in ``meta``.
    """
    path = Path(path)
    data = load_official_json(path)
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    if not isinstance(data, list):
        raise RecordFormatError("expected a JSON list of conversations", path=str(path))
    wanted = set(sample_ids) if sample_ids else None
    sessions: list[ImportedSession] = []
    seen_samples = set()
    for index, record in enumerate(data):
        where = f"record {index}"
        if not isinstance(record, dict) or "conversation" not in record:
            raise RecordFormatError(f"{where} has no 'conversation'", path=str(path), field="conversation")
        sample_id = str(record.get("sample_id", f"conv-{index}"))
        seen_samples.add(sample_id)
        if wanted is not None and sample_id not in wanted:
            continue
        conv = record["conversation"]
        numbers = sorted(n for key in conv if (n := _session_number(key)) is not None)
        extra_dates = [
            k for k in conv if k.endswith("_date_time") and _session_number(k[: -len("_date_time")]) not in numbers
        ]
        if extra_dates:
            report.repaired["locomo_date_keys_without_session"] += len(extra_dates)
        for number in numbers:
            turns = conv[f"session_{number}"]
            raw_date = conv.get(f"session_{number}_date_time")
            moment = parse_locomo_date(raw_date)
            if moment is not None:
                timestamp = _iso(moment)
            else:
                timestamp = str(raw_date)
                report.repaired["locomo_unparsed_session_date"] += 1
            session_id = f"locomo:{sample_id}:session_{number}"
            entries: list[TranscriptEntry] = []
            parent = None
            for position, turn in enumerate(turns):
                if not isinstance(turn, dict) or "text" not in turn:
                    report.unparsed.append(f"{path}: {sample_id} session_{number} turn {position}: no text")
                    continue
                meta = {k: v for k, v in turn.items() if k not in ("speaker", "text")}
                meta["session_date_time"] = raw_date
                entry = TranscriptEntry(
                    id=f"{session_id}:{position + 1}",
                    session_id=session_id,
                    agent_id=f"locomo:{sample_id}",
                    kind=EntryKind.USER_TURN,
                    timestamp=timestamp,
                    content=str(turn["text"]),
                    channel="locomo",
                    parent_id=parent,
                    author=str(turn.get("speaker")) if turn.get("speaker") is not None else None,
                    meta=meta,
                )
                parent = entry.id
                entries.append(entry)
            sessions.append(ImportedSession(session_id, tuple(entries)))
            report.sessions += 1
            report.entries += len(entries)
    if wanted is not None and not wanted <= seen_samples:
        missing = ", ".join(sorted(wanted - seen_samples))
        raise RecordFormatError(
            f"no conversation with sample_id {missing}; the file has {', '.join(sorted(seen_samples))}",
            path=str(path),
            field="sample_id",
        )
    return sessions, report


def parse_longmemeval_date(raw: Any) -> datetime | None:
    """``"2023/05/30 (Tue) 23:40"`` -> a naive datetime, or None."""
    try:
        return datetime.strptime(str(raw).strip(), LONGMEMEVAL_DATE_FORMAT)
    except ValueError:
        return None


def parse_locomo_date(raw: Any) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> a naive datetime, or None."""
    try:
        return datetime.strptime(str(raw).strip(), LOCOMO_DATE_FORMAT)
    except ValueError:
        return None


def import_longmemeval(
    path: Path | str,
    *,
    question_ids: Sequence[str] | None = None,
    share_sessions: bool = False,
    limit: int | None = None,
) -> tuple[list[ImportedSession], ImportReport]:
    """LongMemEval haystacks, sessions in chronological order.

    By default each question's haystack is its own timeline (``lme:<question>:<session>``):
    the same session id carries different dates in different questions. With
    ``share_sessions`` each distinct session is imported once under ``lme:<session>``
    with its first-seen date, and disagreements are counted. A session id repeated within one
    haystack is imported again as ``lme:<question>:<session>~2`` (and so on), counted in the report. Turn ids keep the
    official form ``<session>_<i+1>`` in ``meta['turn_id']``.
    """
    path = Path(path)
    data = load_official_json(path)
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    if not isinstance(data, list):
        raise RecordFormatError("expected a JSON list of questions", path=str(path))
    wanted = set(question_ids) if question_ids else None
    seen_questions: set[str] = set()
    shared: dict[str, tuple[str, str]] = {}
    sessions: list[ImportedSession] = []
    taken = 0
    for index, record in enumerate(data):
        for name in ("question_id", "haystack_session_ids", "haystack_dates", "haystack_sessions"):
            if name not in record:
                raise RecordFormatError(f"record {index} is missing it", path=str(path), field=name)
        qid = str(record["question_id"])
        seen_questions.add(qid)
        if wanted is not None and qid not in wanted:
            continue
        if limit is not None and taken >= limit:
            break
        taken += 1
        sids, dates, hay = record["haystack_session_ids"], record["haystack_dates"], record["haystack_sessions"]
        if not (len(sids) == len(dates) == len(hay)):
            raise RecordFormatError(
                f"question {qid}: haystack ids, dates and sessions differ in length",
                path=str(path),
                field="haystack_sessions",
            )
        repeats: dict[str, int] = {}
        order = sorted(range(len(sids)), key=lambda i: (parse_longmemeval_date(dates[i]) or datetime.max, i))
        if order != list(range(len(sids))):
            report.repaired["longmemeval_haystack_reordered_by_date"] += 1
        for i in order:
            sid, raw_date, turns = str(sids[i]), dates[i], hay[i]
            if share_sessions:
                session_id = f"lme:{sid}"
                signature = sha256_hex(json.dumps(turns, sort_keys=True))
                if session_id in shared:
                    if shared[session_id][1] != str(raw_date):
                        report.repaired["longmemeval_shared_session_date_conflicts"] += 1
                    if shared[session_id][0] != signature:
                        report.unparsed.append(f"{path}: session {sid} differs between questions; first kept")
                    continue
                shared[session_id] = (signature, str(raw_date))
            else:
                # a haystack may hold one session id twice with different turns: the later copy is its own
                # session (``~2``, ...), never merged into the first or dropped as a duplicate
                repeats[sid] = repeats.get(sid, 0) + 1
                session_id = f"lme:{qid}:{sid}" + (f"~{repeats[sid]}" if repeats[sid] > 1 else "")
                if repeats[sid] > 1:
                    report.repaired["longmemeval_repeated_session_id_renamed"] += 1
            moment = parse_longmemeval_date(raw_date)
            if moment is None:
                report.repaired["longmemeval_unparsed_session_date"] += 1
                timestamp = str(raw_date)
            else:
                timestamp = _iso(moment)
            entries: list[TranscriptEntry] = []
            parent = None
            for position, turn in enumerate(turns):
                role = turn.get("role") if isinstance(turn, dict) else None
                if role not in ("user", "assistant") or not isinstance(turn.get("content"), str):
                    report.unparsed.append(f"{path}: question {qid} session {sid} turn {position}: bad role or content")
                    continue
                meta: dict[str, Any] = {
                    "turn_id": f"{sid}_{position + 1}",
                    "haystack_session_id": sid,
                    "session_date": raw_date,
                }
                if "has_answer" in turn:
                    meta["has_answer"] = bool(turn["has_answer"])
                entry = TranscriptEntry(
                    id=f"{session_id}:{position + 1}",
                    session_id=session_id,
                    agent_id="longmemeval",
                    kind=EntryKind.USER_TURN if role == "user" else EntryKind.ASSISTANT_TURN,
                    timestamp=timestamp,
                    content=turn["content"],
                    channel="longmemeval",
                    parent_id=parent,
                    author=role,
                    meta=meta,
                )
                parent = entry.id
                entries.append(entry)
            sessions.append(ImportedSession(session_id, tuple(entries)))
            report.sessions += 1
            report.entries += len(entries)
    if wanted is not None and not wanted <= seen_questions:
        missing = ", ".join(sorted(wanted - seen_questions)[:5])
        raise RecordFormatError(f"no question with id {missing}", path=str(path), field="question_id")
    return sessions, report


def import_transcript_jsonl(
    path: Path | str,
) -> tuple[list[ImportedSession], ImportReport, list[tuple[int, str, bytes]]]:
    """A transcript in our own wire format from another harness.

    Returns the sessions, the report, and the rejected lines (line number, reason,
    raw bytes) so the caller can quarantine them.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    rejected: list[tuple[int, str, bytes]] = []
    grouped: dict[str, list[TranscriptEntry]] = {}
    for number, obj, error, raw in wire_records(path):
        if error is not None:
            rejected.append((number, f"{path}, line {number}: {error}", raw))
            continue
        try:
            entry = entry_from_wire(obj, path=str(path), line=number)
        except RecordFormatError as exc:
            rejected.append((number, str(exc), raw))
            continue
        grouped.setdefault(entry.session_id, []).append(entry)
    sessions = [ImportedSession(sid, tuple(es)) for sid, es in grouped.items()]
    report.sessions = len(sessions)
    report.entries = sum(len(s.entries) for s in sessions)
    report.unparsed.extend(reason for _, reason, _ in rejected)
    return sessions, report, rejected
