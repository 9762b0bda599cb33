"""Locking a study document, checking the lock, and its deviations log.

A lock (``FILE.lock.json`` beside the document) records the sha256 of the document's bytes, when it was locked,
the code revision and the schema version. A run checks it (``require_locked``): an unlocked or edited study runs
only when marked exploratory. Re-locking an edited document needs a reason, which goes into the deviations log
(``FILE.deviations.jsonl``, append-only, one JSON object a line), so a changed plan is never silent. The report
prints the log; a line that cannot be read is an error naming the line, never skipped.

A hash shows the document unchanged only to whoever trusts the lock: anyone can edit both. Signed with a key its
author holds (``lca.signing``), the lock gets ``FILE.lock.sig.json``, an Ed25519 signature of the lock record, and
``lca prereg check --key PUBKEY`` refuses a lock that is unsigned or signed by another key.
"""

from __future__ import annotations

import getpass
import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from lca import signing
from lca.errors import LCAError, RecordFormatError
from lca.fileio import append_bytes, atomic_write_bytes, numbered_json_lines
from lca.provenance import code_version
from protocols.study.schema import SCHEMA_VERSION, load_study

LOCK_SUFFIX = ".lock.json"
SIGNATURE_SUFFIX = ".lock.sig.json"
SIGNATURE_PURPOSE = "study lock"  # kept apart from a bundle's signature: one cannot pass for the other
DEVIATIONS_SUFFIX = ".deviations.jsonl"
DEVIATION_KINDS = ("deviation", "relock", "exclusion", "data_missing")
LockState = Literal["locked", "unlocked", "edited"]


class StudyNotLockedError(LCAError):
    """A run was asked of an unlocked or edited study without marking it exploratory."""


@dataclass(frozen=True)
class LockRecord:
    study_id: str
    sha256: str
    locked_at: str
    code_revision: str
    schema_version: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LockStatus:
    """Where a study stands: ``locked`` (the lock's hash matches the file), ``unlocked`` (no lock) or
    ``edited`` (the file changed since it was locked); ``sha256`` is the file's hash now."""

    path: str
    state: LockState
    sha256: str
    lock: LockRecord | None
    detail: str

    @property
    def locked(self) -> bool:
        return self.state == "locked"

    def to_dict(self) -> dict:
        return {**asdict(self), "lock": self.lock.to_dict() if self.lock else None}


@dataclass(frozen=True)
class Deviation:
    at: str
    what: str
    why: str
    by: str
    kind: str

    def to_dict(self) -> dict:
        return asdict(self)


def lock_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + LOCK_SUFFIX)


def signature_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SIGNATURE_SUFFIX)


def deviations_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + DEVIATIONS_SUFFIX)


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def read_lock(path: str | Path) -> LockRecord | None:
    """The lock of the study at ``path`` (not the lock file's path), None when there is none."""
    file = lock_path(path)
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordFormatError(f"not valid JSON: {exc.msg}", path=str(file), line=exc.lineno) from None
    fields = tuple(LockRecord.__dataclass_fields__)
    if not isinstance(data, dict) or set(data) != set(fields):
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise RecordFormatError(f"a lock holds exactly {', '.join(fields)}; got {got}", path=str(file))
    return LockRecord(**data)


def lock_status(path: str | Path) -> LockStatus:
    path = Path(path)
    now = file_sha256(path)
    lock = read_lock(path)
    if lock is None:
        detail = f"not locked: no {lock_path(path).name}; lock it with `lca prereg lock {path}`"
        return LockStatus(str(path), "unlocked", now, None, detail)
    if lock.sha256 != now:
        detail = (
            f"edited since it was locked at {lock.locked_at} (locked sha256 {lock.sha256[:12]}, now {now[:12]}); "
            f"restore it, or re-lock with `lca prereg lock {path} --relock --reason TEXT` (recorded as a deviation)"
        )
        return LockStatus(str(path), "edited", now, lock, detail)
    detail = f"locked at {lock.locked_at}, sha256 {now[:12]}, code {lock.code_revision}"
    return LockStatus(str(path), "locked", now, lock, detail)


def require_locked(path: str | Path, exploratory: bool) -> LockStatus:
    """The study's lock status; an unlocked or edited study is refused unless the run is exploratory (whose
    outputs then say so)."""
    status = lock_status(path)
    if not status.locked and not exploratory:
        raise StudyNotLockedError(f"{path}: {status.detail}; or run it with --exploratory (every output says so)")
    return status


def lock_study(
    path: str | Path,
    *,
    relock: bool = False,
    reason: str | None = None,
    by: str | None = None,
    sign: str | Path | None = None,
) -> tuple[LockRecord, bool]:
    """Validate the document and write its lock; returns ``(record, changed)``. Locking an unchanged locked
    file changes nothing (but for a signature, when ``sign`` names a private key); an edited one is re-locked
    only with ``relock`` and a ``reason``, recorded as a ``relock`` deviation first. A new lock is signed with
    ``sign``, or has no signature: one over the lock it replaces would no longer hold."""
    path = Path(path)
    study = load_study(path)
    key = signing.load_private_key(sign) if sign is not None else None  # refused before anything is written
    status = lock_status(path)
    if status.state == "locked":
        assert status.lock is not None
        if key is not None:
            _write_signature(path, status.lock, key)
        return status.lock, False
    if status.state == "edited":
        if not relock:
            raise LCAError(f"{path}: {status.detail}")
        if not (reason or "").strip():
            raise LCAError(f"{path}: --relock needs --reason TEXT saying why the locked plan changed")
        old = status.lock.sha256 if status.lock else "?"
        record_deviation(path, f"re-locked: sha256 {old} -> {status.sha256}", reason or "", by=by, kind="relock")
    elif relock:
        raise LCAError(f"{path}: --relock re-locks an edited study; this one is not locked yet (drop --relock)")
    record = LockRecord(study.id, status.sha256, _now(), code_version(), SCHEMA_VERSION)
    signature_path(path).unlink(missing_ok=True)
    atomic_write_bytes(lock_path(path), (json.dumps(record.to_dict(), indent=2) + "\n").encode("utf-8"))
    if key is not None:
        _write_signature(path, record, key)
    return record, True


def _signed_text(record: LockRecord) -> str:
    """What a lock's signature signs: the sha256 of the record in canonical JSON (which holds the study's)."""
    return hashlib.sha256(json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _write_signature(path: Path, record: LockRecord, key) -> None:
    signature = signing.sign(key, SIGNATURE_PURPOSE, _signed_text(record))
    atomic_write_bytes(signature_path(path), signature.to_json())


def lock_signature(path: str | Path, key: str | Path | None = None) -> signing.SignatureState:
    """Whether the study's lock is signed, and by which key; with ``key`` (a public key file), refused in one
    line unless the lock exists and is signed by that key. A signature that does not hold is refused either way
    (the lock or its signature was altered)."""
    lock = read_lock(path)
    where = signature_path(path)
    if lock is None:
        if key is not None:
            raise LCAError(f"{path}: not locked, so there is no signed lock to check against {key}")
        return signing.SignatureState("unsigned")
    return signing.check(
        signing.read_signature(where), SIGNATURE_PURPOSE, _signed_text(lock), public_key=key, where=where
    )


def record_deviation(
    path: str | Path, what: str, why: str, by: str | None = None, kind: str = "deviation"
) -> Deviation:
    """Append one deviation from the locked plan to the study's log; ``by`` defaults to the user's login."""
    if kind not in DEVIATION_KINDS:
        raise LCAError(f"unknown deviation kind '{kind}'; kinds: {', '.join(DEVIATION_KINDS)}")
    for name, value in (("what", what), ("why", why)):
        if not (value or "").strip():
            raise LCAError(f"a deviation needs a non-empty '{name}'")
    if not Path(path).is_file():
        raise FileNotFoundError(f"no study document {path}")
    deviation = Deviation(_now(), what.strip(), why.strip(), (by or _login()).strip(), kind)
    append_bytes(deviations_path(path), (json.dumps(deviation.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"))
    return deviation


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def read_deviations(path: str | Path) -> list[Deviation]:
    """The study's deviations in order (none when there is no log); a line that is not a deviation is an error
    naming the log and the line."""
    file = deviations_path(path)
    if not file.exists():
        return []
    deviations = []
    fields = set(Deviation.__dataclass_fields__)
    for number, data in numbered_json_lines(file.read_text(encoding="utf-8"), str(file)):
        if not isinstance(data, dict) or set(data) != fields:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise RecordFormatError(
                f"a deviation holds exactly {', '.join(sorted(fields))}; got {got}", path=str(file), line=number
            )
        bad = [k for k in sorted(fields) if not isinstance(data[k], str)]
        if bad:
            raise RecordFormatError("must be a string", path=str(file), line=number, field=bad[0])
        if data["kind"] not in DEVIATION_KINDS:
            raise RecordFormatError(
                f"unknown kind '{data['kind']}'; kinds: {', '.join(DEVIATION_KINDS)}",
                path=str(file),
                line=number,
                field="kind",
            )
        deviations.append(Deviation(**data))
    return deviations
