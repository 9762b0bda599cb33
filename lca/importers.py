"""Importers that bring benchmark histories in through the same authoritative path as live ones.

Each importer reads an official file (plain JSON, ``.gz`` or ``.xz``), yields
sessions of :class:`TranscriptEntry` in chronological order, and keeps an
:class:`ImportReport` of what it repaired or could not parse, so nothing is
silently lost.

Malformed input is never stored as garbage and never a traceback. A benchmark file (LoCoMo,
LongMemEval) whose structure or values are wrong is refused whole with one
:class:`~lca.errors.RecordFormatError` naming the file, the record and the field; a transcript
line that is wrong is rejected alone (the caller quarantines it) and the other lines import.
Every entry meets the transcript's write rules (``lca.transcript.check_new_entry``) and is at
most ``max_entry_bytes`` (default ``DEFAULT_MAX_ENTRY_BYTES``, 1 MiB) on the wire.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from lca.errors import RecordFormatError
from lca.transcript import check_new_entry, entry_from_wire
from lca.transcript_foreign import wire_records
from lca.types import DEFAULT_MAX_ENTRY_BYTES, EntryKind, TranscriptEntry, as_utc, sha256_hex, wire_value_problem

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
    """One session to append. ``origins`` says where each entry came from in the source (entry id ->
    ``"line 12"`` or ``"record 0 (...), conversation.session_1[3]"``), so a refusal can name it."""

    session_id: str
    entries: tuple[TranscriptEntry, ...]
    origins: Mapping[str, str] = field(default_factory=dict)


def file_sha256(path: Path) -> str:

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_official_json(path: Path | str) -> Any:
    """Read an official benchmark file, plain or compressed, with a clear error naming it (and, for
    bytes that are not UTF-8, the line and the field that holds them)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    openers: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".xz": lzma.open}
    opener = openers.get(path.suffix, open)
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise RecordFormatError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    except UnicodeDecodeError:
        raise _invalid_utf8(path, opener) from None
    except RecursionError:
        raise RecordFormatError("not readable: nested too deeply to decode", path=str(path)) from None
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise RecordFormatError(f"could not be read: {exc}", path=str(path)) from None


def _invalid_utf8(path: Path, opener: Callable[..., IO[Any]]) -> RecordFormatError:
    """Where the first byte that is not UTF-8 sits: its line, and the field whose string holds it."""
    with opener(path, "rb") as handle:
        data = handle.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        message = f"not valid UTF-8: byte {data[exc.start]:#04x} at offset {exc.start}"
        field_path = None
        try:  # undecodable bytes become lone surrogates, which the value check finds by their field
            problem = wire_value_problem(json.loads(data.decode("utf-8", "surrogateescape")), "", finite=False)
            field_path = problem[0].lstrip(".") if problem else None
        except (ValueError, RecursionError):
            pass
        return RecordFormatError(message, path=str(path), line=line, field=field_path or None)
    return RecordFormatError("not valid UTF-8", path=str(path))


def _checked(
    entry: TranscriptEntry,
    *,
    path: Path,
    record: str,
    item: str,
    fields: Mapping[str, str],
    max_bytes: int | None,
) -> TranscriptEntry:
    """``entry`` if it meets the transcript's write rules; otherwise the refusal names the source field
    (``fields`` maps an entry field to it, ``meta.X`` is the item's own ``X``)."""
    try:
        check_new_entry(entry, max_bytes=max_bytes)
    except RecordFormatError as exc:
        name = exc.field or ""
        head = name.split(".")[0].split("[")[0]
        if name in fields:
            source_field = fields[name]
        elif head in fields:
            source_field = fields[head] + name[len(head) :]
        elif name.startswith("meta."):
            source_field = f"{item}.{name[len('meta.') :]}"
        else:
            source_field = f"{item} (entry field {name})" if name else item
        raise RecordFormatError(exc.reason, path=str(path), record=record, field=source_field) from None
    return entry


class _SessionTurns:
    """One benchmark session's turns as an importer reads them: each numbered in its session, chained to the turn
    before it, checked against the transcript's write rules (a refusal names the source field) and remembered by
    where it came from."""

    def __init__(self, session_id: str, *, path: Path, record: str, max_bytes: int | None) -> None:
        self.session_id = session_id
        self.path, self.record, self.max_bytes = path, record, max_bytes
        self.entries: list[TranscriptEntry] = []
        self.origins: dict[str, str] = {}

    def add(self, position: int, item: str, fields: Mapping[str, str], **entry: Any) -> None:
        """The turn at ``position`` of its session, read from ``item`` (``fields``: as ``_checked``)."""
        parent = self.entries[-1].id if self.entries else None
        turn = TranscriptEntry(
            id=f"{self.session_id}:{position + 1}", session_id=self.session_id, parent_id=parent, **entry
        )
        checked = _checked(turn, path=self.path, record=self.record, item=item, fields=fields, max_bytes=self.max_bytes)
        self.entries.append(checked)
        self.origins[turn.id] = f"{self.record}, {item}"

    def close(self, sessions: list[ImportedSession], report: ImportReport) -> None:
        """The session joins the import's sessions and its counts."""
        sessions.append(ImportedSession(self.session_id, tuple(self.entries), self.origins))
        report.sessions += 1
        report.entries += len(self.entries)


def _is_id(value: Any) -> bool:
    """An id in a benchmark file: a string or an integer (never a bool, a float or a structure)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _session_number(key: str) -> int | None:
    match = re.fullmatch(r"session_(\d+)", key)
    return int(match.group(1)) if match else None


def import_locomo(
    path: Path | str,
    *,
    sample_ids: Sequence[str] | None = None,
    max_entry_bytes: int | None = DEFAULT_MAX_ENTRY_BYTES,
) -> tuple[list[ImportedSession], ImportReport]:
    """LoCoMo conversations: one session per ``session_N``, both speakers as user turns.

    Neither LoCoMo speaker is the agent, so both are recorded as ``user_turn`` with
    ``author`` set to the speaker; the ``dia_id`` and image fields stay in ``meta``.

    Refused whole, naming the record and the field: a record that is not an object or whose
    ``conversation`` is not an object, a ``sample_id`` that is not a string or integer, a session
    that is not a list, a turn that is not an object, a ``text`` or ``speaker`` that is not a string
    (an object's repr would be stored as garbage, and skipping the turn could drop the evidence a
    question asks about), a session date that is not a string, and a turn that breaks the write rules
    or is over ``max_entry_bytes``. A turn with no ``text`` at all has nothing to store: it is
    skipped and listed in ``report.unparsed``.
    """
    path = Path(path)
    data = load_official_json(path)
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    if not isinstance(data, list):
        raise RecordFormatError(f"expected a JSON list of conversations, got {type(data).__name__}", path=str(path))
    wanted = set(sample_ids) if sample_ids else None
    sessions: list[ImportedSession] = []
    seen_samples = set()
    for index, record in enumerate(data):
        where = f"record {index}"

        def refuse(message: str, fld: str | None, where: str = where) -> RecordFormatError:
            return RecordFormatError(message, path=str(path), record=where, field=fld)

        if not isinstance(record, dict):
            raise refuse(f"expected a conversation object, got {type(record).__name__}", None)
        if "conversation" not in record:
            raise refuse("missing", "conversation")
        raw_sample = record.get("sample_id", f"conv-{index}")
        if not _is_id(raw_sample):
            raise refuse(f"must be a string or an integer, got {type(raw_sample).__name__}", "sample_id")
        sample_id = str(raw_sample)
        where = f"record {index} (sample_id {sample_id!r})"
        seen_samples.add(sample_id)
        if wanted is not None and sample_id not in wanted:
            continue
        conv = record["conversation"]
        if not isinstance(conv, dict):
            raise refuse(f"must be an object of sessions, got {type(conv).__name__}", "conversation", where)
        numbers = sorted(n for key in conv if (n := _session_number(key)) is not None)
        extra_dates = [
            k for k in conv if k.endswith("_date_time") and _session_number(k[: -len("_date_time")]) not in numbers
        ]
        if extra_dates:
            report.repaired["locomo_date_keys_without_session"] += len(extra_dates)
        for number in numbers:
            turns = conv[f"session_{number}"]
            if not isinstance(turns, list):
                raise refuse(
                    f"must be a list of turns, got {type(turns).__name__}", f"conversation.session_{number}", where
                )
            raw_date = conv.get(f"session_{number}_date_time")
            if raw_date is not None and not isinstance(raw_date, str):
                raise refuse(
                    f"must be a string, got {type(raw_date).__name__}",
                    f"conversation.session_{number}_date_time",
                    where,
                )
            moment = parse_locomo_date(raw_date)
            if moment is not None:
                timestamp = _iso(moment)
            else:
                timestamp = str(raw_date)
                report.repaired["locomo_unparsed_session_date"] += 1
            session = _SessionTurns(
                f"locomo:{sample_id}:session_{number}", path=path, record=where, max_bytes=max_entry_bytes
            )
            for position, turn in enumerate(turns):
                item = f"conversation.session_{number}[{position}]"
                if not isinstance(turn, dict):
                    raise refuse(f"expected a turn object, got {type(turn).__name__}", item, where)
                if "text" not in turn:
                    report.unparsed.append(f"{path}: {sample_id} session_{number} turn {position}: no text")
                    continue
                for name in ("text", "speaker"):
                    value = turn.get(name)
                    if not isinstance(value, str) and (name == "text" or value is not None):
                        raise refuse(f"must be a string, got {type(value).__name__}", f"{item}.{name}", where)
                meta = {k: v for k, v in turn.items() if k not in ("speaker", "text")}
                meta["session_date_time"] = raw_date
                fields = {
                    "content": f"{item}.text",
                    "author": f"{item}.speaker",
                    "meta.session_date_time": f"conversation.session_{number}_date_time",
                    "ts": f"conversation.session_{number}_date_time",
                    "session_id": "sample_id",
                    "agent_id": "sample_id",
                    "id": "sample_id",
                }
                session.add(
                    position,
                    item,
                    fields,
                    agent_id=f"locomo:{sample_id}",
                    kind=EntryKind.USER_TURN,
                    timestamp=timestamp,
                    content=turn["text"],
                    channel="locomo",
                    author=turn.get("speaker"),
                    meta=meta,
                )
            session.close(sessions, report)
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


def history_end(sessions: Sequence[ImportedSession]) -> datetime | None:
    """The latest readable entry time of an imported history: when a question put after it (LoCoMo's carry
    no date of their own) is asked, so a relative time in it reads against the history, not today."""
    moments = []
    for session in sessions:
        for entry in session.entries:
            try:
                moments.append(datetime.fromisoformat(entry.timestamp))
            except ValueError:
                continue
    return max(moments, key=as_utc) if moments else None  # naive and aware times compare as UTC


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
    max_entry_bytes: int | None = DEFAULT_MAX_ENTRY_BYTES,
) -> tuple[list[ImportedSession], ImportReport]:
    """LongMemEval haystacks, sessions in chronological order.

    By default each question's haystack is its own timeline (``lme:<question>:<session>``):
    the same session id carries different dates in different questions. With
    ``share_sessions`` each distinct session is imported once under ``lme:<session>``
    with its first-seen date, and disagreements are counted. A session id repeated within one
    haystack is imported again as ``lme:<question>:<session>~2`` (and so on), counted in the report. Turn ids keep the
    official form ``<session>_<i+1>`` in ``meta['turn_id']``.

    Refused whole, naming the record and the field: a record that is not an object or lacks a
    field, ids that are not strings or integers, haystack fields that are not lists (or differ in
    length), a date that is not a string, a session that is not a list, a turn that is not an object,
    a ``content`` that is not a string (converting it would store garbage; skipping it could drop the
    answer's evidence), and a turn that breaks the write rules or is over ``max_entry_bytes``. A turn
    whose role is neither user nor assistant is skipped and listed in ``report.unparsed``.
    """
    path = Path(path)
    data = load_official_json(path)
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    if not isinstance(data, list):
        raise RecordFormatError(f"expected a JSON list of questions, got {type(data).__name__}", path=str(path))
    wanted = set(question_ids) if question_ids else None
    seen_questions: set[str] = set()
    shared: dict[str, tuple[str, str]] = {}
    sessions: list[ImportedSession] = []
    taken = 0
    for index, record in enumerate(data):
        where = f"record {index}"

        def refuse(message: str, fld: str | None, where: str = where) -> RecordFormatError:
            return RecordFormatError(message, path=str(path), record=where, field=fld)

        if not isinstance(record, dict):
            raise refuse(f"expected a question object, got {type(record).__name__}", None)
        for name in ("question_id", "haystack_session_ids", "haystack_dates", "haystack_sessions"):
            if name not in record:
                raise refuse("missing", name)
        if not _is_id(record["question_id"]):
            raise refuse(f"must be a string or an integer, got {type(record['question_id']).__name__}", "question_id")
        qid = str(record["question_id"])
        where = f"record {index} (question {qid!r})"
        seen_questions.add(qid)
        if wanted is not None and qid not in wanted:
            continue
        if limit is not None and taken >= limit:
            break
        taken += 1
        sids, dates, hay = record["haystack_session_ids"], record["haystack_dates"], record["haystack_sessions"]
        for name, value in (("haystack_session_ids", sids), ("haystack_dates", dates), ("haystack_sessions", hay)):
            if not isinstance(value, list):
                raise refuse(f"must be a list, got {type(value).__name__}", name, where)
        if not (len(sids) == len(dates) == len(hay)):
            raise refuse("haystack ids, dates and sessions differ in length", "haystack_sessions", where)
        for i, (sid_value, date_value, turns_value) in enumerate(zip(sids, dates, hay)):
            if not _is_id(sid_value):
                kind_name = type(sid_value).__name__
                raise refuse(f"must be a string or an integer, got {kind_name}", f"haystack_session_ids[{i}]", where)
            if not isinstance(date_value, str):
                raise refuse(f"must be a string, got {type(date_value).__name__}", f"haystack_dates[{i}]", where)
            if not isinstance(turns_value, list):
                raise refuse(
                    f"must be a list of turns, got {type(turns_value).__name__}", f"haystack_sessions[{i}]", where
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
            session = _SessionTurns(session_id, path=path, record=where, max_bytes=max_entry_bytes)
            for position, turn in enumerate(turns):
                item = f"haystack_sessions[{i}][{position}]"
                if not isinstance(turn, dict):
                    raise refuse(f"expected a turn object, got {type(turn).__name__}", item, where)
                role = turn.get("role")
                if role not in ("user", "assistant"):
                    report.unparsed.append(f"{path}: question {qid} session {sid} turn {position}: bad role")
                    continue
                if not isinstance(turn.get("content"), str):
                    raise refuse(
                        f"must be a string, got {type(turn.get('content')).__name__}", f"{item}.content", where
                    )
                meta: dict[str, Any] = {
                    "turn_id": f"{sid}_{position + 1}",
                    "haystack_session_id": sid,
                    "session_date": raw_date,
                }
                if "has_answer" in turn:
                    meta["has_answer"] = bool(turn["has_answer"])
                fields = {
                    "content": f"{item}.content",
                    "meta.session_date": f"haystack_dates[{i}]",
                    "ts": f"haystack_dates[{i}]",
                    "session_id": f"haystack_session_ids[{i}]",
                    "id": f"haystack_session_ids[{i}]",
                    "meta.turn_id": f"haystack_session_ids[{i}]",
                    "meta.haystack_session_id": f"haystack_session_ids[{i}]",
                }
                session.add(
                    position,
                    item,
                    fields,
                    agent_id="longmemeval",
                    kind=EntryKind.USER_TURN if role == "user" else EntryKind.ASSISTANT_TURN,
                    timestamp=timestamp,
                    content=turn["content"],
                    channel="longmemeval",
                    author=role,
                    meta=meta,
                )
            session.close(sessions, report)
    if wanted is not None and not wanted <= seen_questions:
        missing = ", ".join(sorted(wanted - seen_questions)[:5])
        raise RecordFormatError(f"no question with id {missing}", path=str(path), field="question_id")
    return sessions, report


def import_transcript_jsonl(
    path: Path | str,
    *,
    max_entry_bytes: int | None = DEFAULT_MAX_ENTRY_BYTES,
) -> tuple[list[ImportedSession], ImportReport, list[tuple[int, str, bytes]]]:
    """A transcript in our own wire format from another harness.

    Returns the sessions, the report, and the rejected lines (line number, reason,
    raw bytes) so the caller can quarantine them. A line is rejected, alone, when it is not
    UTF-8 JSON, breaks the wire schema or the write rules (a bool ``v``, a lone surrogate, ``NaN``,
    ``meta`` nested too deeply, a session id too long for a file name), or is longer than
    ``max_entry_bytes`` (checked before it is decoded, so an oversized line costs no parsing).
    Control and bidi characters are valid text: such an entry imports verbatim.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise RecordFormatError("is a directory, not a transcript file", path=str(path))
    report = ImportReport(source=str(path), source_sha256=file_sha256(path))
    rejected: list[tuple[int, str, bytes]] = []
    grouped: dict[str, list[TranscriptEntry]] = {}
    origins: dict[str, dict[str, str]] = {}
    for number, obj, error, raw in wire_records(path, max_line_bytes=max_entry_bytes):
        if error is not None:
            rejected.append((number, str(error), raw))
            continue
        try:
            entry = entry_from_wire(obj, path=str(path), line=number)
            check_new_entry(entry, path=str(path), line=number, max_bytes=max_entry_bytes)
        except RecordFormatError as exc:
            rejected.append((number, str(exc), raw))
            continue
        grouped.setdefault(entry.session_id, []).append(entry)
        origins.setdefault(entry.session_id, {})[entry.id] = f"line {number}"
    sessions = [ImportedSession(sid, tuple(es), origins[sid]) for sid, es in grouped.items()]
    report.sessions = len(sessions)
    report.entries = sum(len(s.entries) for s in sessions)
    report.unparsed.extend(reason for _, reason, _ in rejected)
    return sessions, report, rejected
