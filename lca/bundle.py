"""Substrate bundles: the continuity-bearing state of one agent, exported, verified, imported and migrated.

A bundle is a folder with three parts and a manifest:

- ``identity/``: the identity, user and instruction files, their archive, and procedural proposals (private);
- ``memory/``: the transcript, quarantined lines, memory files and their archive, the learned-state event logs,
  consolidation reports and the store's logs (private);
- ``body/``: the versioned configuration (``recall.yaml``, ``retrieval.yaml``), with the code version and the
  embedder in the manifest (shareable);
- ``manifest.json``: every file's part, path, size and sha256, the versions, and the lineage (agent id, the
  bundle the store itself came from, the source's epoch). Its ``bundle_id`` is the sha256 of the rest of it.

Derived stores (``index/``) are not shipped: an import rebuilds them from the transcript and memory files, so
the rebuilt recall is the source's. Authority is not shipped either (``lca.authority``): an import is a
read-only replica or a new agent with recorded descent; only ``migrate`` hands the agent's authority on, and it
fences the source off first. Every file is verified before anything is activated; a tampered, truncated,
missing or extra file, a path that is not relative and normalized, and a symbolic link are refused, naming it
(``lca.bundle_trust``). A hash shows integrity only: ``signature.json``, an Ed25519 signature of the bundle id
by a key the user holds (``lca.signing``), shows who vouched for the bundle; unsigned bundles are shown so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.authority import AuthorityRecord, advance, ensure_authority, new_agent_id, read_authority, write_authority
from lca.bundle_trust import (
    MANIFEST,
    PARTS,
    BundleError,
    bundle_signature,
    check_bundle_folder,
    check_listing,
    check_migration_folders,
    check_new_store,
    clear_stale_checkpoint,
    copy_hashing,
    hash_file,
    inside,
    reach,
    read_manifest_bytes,
    restored_path,
    shipped_path,
    sign_bundle,
    walk_files,
)
from lca.custody import ENCRYPTED_PARTS, Custody
from lca.fileio import atomic_write_bytes, exclusive_lock, fsync_dir
from lca.index.embedder_choice import DEFAULT_EMBEDDER, recorded_embedder, target_embedder
from lca.layout import StoreLayout
from lca.provenance import code_version
from lca.providers import (
    CapabilityChange,
    ProviderContract,
    ProviderSet,
    capability_changes,
    read_providers,
    write_providers,
)
from lca.secrets import find_secrets
from lca.self_description import check_self_description
from lca.signing import load_private_key
from lca.transcript import TranscriptStore
from lca.types import EntryKind, TranscriptEntry

FORMAT = 1
IMPORT_MODES = ("replica", "new-agent")
IDENTITY_DIRS = ("identity", "proposals", "archive/identity")
BODY_FILES = ("recall.yaml", "retrieval.yaml", "providers.json", "retention.yaml")  # lca.providers, lca.retention
NOT_SHIPPED = ("index", "write.lock", "authority.json")  # derived, a lock, and authority (never copied)


@dataclass(frozen=True)
class BundleFile:
    part: str
    path: str  # relative to the store root, POSIX
    sha256: str
    bytes: int


@dataclass(frozen=True)
class Manifest:
    bundle_id: str
    agent_id: str
    created_at: str
    code_version: str
    source_epoch: int
    parent_bundle: str | None
    descent: tuple[str, ...]
    embedder_id: str | None
    files: tuple[BundleFile, ...]
    format: int = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)
    embedder_source: str | None = None  # the embedder's name (``lca.index.embedder_choice``); absent in older bundles

    @property
    def embedder(self) -> str | None:
        """The embedder the bundled store was built with, by name; None when it had no index (a bundle from before
        manifests named it, with an id: the default)."""
        return self.embedder_source or (DEFAULT_EMBEDDER if self.embedder_id else None)

    def body(self) -> dict[str, Any]:
        """Everything but the id, in a canonical form (the id is its sha256)."""
        return {
            "format": self.format,
            "agent_id": self.agent_id,
            "created_at": self.created_at,
            "code_version": self.code_version,
            "source_epoch": self.source_epoch,
            "parent_bundle": self.parent_bundle,
            "descent": list(self.descent),
            "embedder_id": self.embedder_id,
            "extra": self.extra,
            "files": [vars(f) for f in self.files],
            **({"embedder_source": self.embedder_source} if self.embedder_source else {}),  # older ids still hold
        }

    def to_json(self) -> bytes:
        return (json.dumps({"bundle_id": self.bundle_id, **self.body()}, indent=2, sort_keys=True) + "\n").encode()

    def counts(self) -> dict[str, int]:
        return {part: sum(1 for f in self.files if f.part == part) for part in PARTS}


def _canonical_id(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def part_of(relative: str) -> str | None:
    """The part a store-relative path belongs to; None when it is not shipped."""
    top = relative.split("/", 1)[0]
    if top in NOT_SHIPPED or relative in NOT_SHIPPED:
        return None
    if relative in BODY_FILES:
        return "body"
    if any(relative == d or relative.startswith(d + "/") for d in IDENTITY_DIRS):
        return "identity"
    return "memory"  # the transcript, memory files, event logs, reports, logs, and anything unknown (private)


def _embedder_id(layout: StoreLayout) -> str | None:
    """The embedder the source's index was built with, when it has one (read-only; nothing is opened for write)."""
    if not layout.catalog.exists():
        return None

    try:
        with sqlite3.connect(f"file:{layout.catalog}?mode=ro", uri=True) as db:
            row = db.execute("SELECT embedder_id FROM embedders ORDER BY rowid DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def export_bundle(
    store: Path | str,
    out: Path | str,
    *,
    lock_timeout: float = 600.0,
    extra: dict[str, Any] | None = None,
    sign: Path | str | None = None,
    encrypt_to: Path | str | None = None,
) -> Manifest:
    """Write the store's bundle to ``out`` (a new folder outside the store), holding the store's writer lock so
    that nothing is written meanwhile (quiesce). ``sign``: a private key file (``lca.signing``) whose signature
    of the bundle id goes beside the manifest. The manifest is written last: a folder without one is not a
    bundle. A symbolic link or special file among the shipped files is refused, never followed. ``encrypt_to``: a
    custody public key (``lca.custody``): the private parts are encrypted to it, the body stays plain."""

    layout, out = StoreLayout(store), Path(out)
    if layout.root.exists() and not layout.root.is_dir():
        raise BundleError(f"{layout.root}: a file, not a folder; a store is a folder")
    if not layout.holds_store():
        raise BundleError(f"{layout.root}: holds no store to export")
    if inside(out, layout.root):
        raise BundleError(f"{out}: inside the store {layout.root}; a bundle is written outside the store it exports")
    key = load_private_key(sign) if sign is not None else None  # a bad key is refused before anything is written
    custody = Custody.for_recipient(encrypt_to) if encrypt_to is not None else None
    with exclusive_lock(layout.write_lock, timeout=lock_timeout, what=f"store {layout.root}"):
        return _export_locked(layout, out, extra, key, custody)


def _export_locked(
    layout: StoreLayout, out: Path, extra: dict[str, Any] | None, key: Any = None, custody: Custody | None = None
) -> Manifest:
    if out.exists() and not out.is_dir():
        raise BundleError(f"{out}: a file, not a folder; a bundle is written into a new folder")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: exists and is not empty; a bundle is written into a new folder")
    authority = ensure_authority(layout.root)
    files = []
    for relative, path in list(walk_files(layout.root, shipped=lambda r: part_of(r) is not None)):
        part = part_of(relative)  # the walk refused every link and special file before the first copy
        assert part is not None
        named = shipped_path(relative)
        if part == "body" and find_secrets(path.read_text(encoding="utf-8", errors="replace")):
            raise BundleError(f"{path}: holds a credential; the body is shareable, so a host secret stays on its host")
        if custody is not None and part in ENCRYPTED_PARTS:
            digest, size = custody.encrypt_file(path, out / part / named, f"{part}/{named}")
        else:
            digest, size = copy_hashing(path, out / part / named)
        files.append(BundleFile(part, named, digest, size))
    if custody is not None:
        extra = {**(extra or {}), "custody": custody.record}
    parent = next((d[len("bundle:") :] for d in reversed(authority.descent) if d.startswith("bundle:")), None)
    draft = Manifest(
        "",
        authority.agent_id,
        _now(),
        code_version(),
        authority.epoch,
        parent,
        authority.descent,
        _embedder_id(layout),
        tuple(files),
        extra=dict(extra or {}),
        embedder_source=recorded_embedder(layout).get("embedder_source"),
    )
    manifest = Manifest(**{**vars(draft), "bundle_id": _canonical_id(draft.body())})
    if key is not None:
        sign_bundle(out, manifest.bundle_id, key)
    atomic_write_bytes(out / MANIFEST, manifest.to_json())
    return manifest


def read_manifest(bundle: Path | str) -> Manifest:
    path = Path(bundle) / MANIFEST
    try:
        data = json.loads(read_manifest_bytes(Path(bundle)))
    except ValueError as exc:
        raise BundleError(f"{path}: not valid JSON: {exc}") from None
    try:
        files = tuple(BundleFile(**f) for f in data["files"])
        if any(not isinstance(f.sha256, str) or type(f.bytes) is not int for f in files):
            raise TypeError("a file's sha256 must be a string and its bytes an integer")
        if not isinstance(data.get("embedder_source") or "", str):
            raise TypeError("embedder_source must be a string")
        if not all(isinstance(data[k], str) for k in ("bundle_id", "agent_id", "created_at", "code_version")):
            raise TypeError("bundle_id, agent_id, created_at and code_version must be strings")
        manifest = Manifest(
            data["bundle_id"],
            data["agent_id"],
            data["created_at"],
            data["code_version"],
            int(data["source_epoch"]),
            data.get("parent_bundle"),
            tuple(data.get("descent") or ()),
            data.get("embedder_id"),
            files,
            int(data.get("format", FORMAT)),
            dict(data.get("extra") or {}),
            data.get("embedder_source"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{path}: malformed manifest: {type(exc).__name__}: {exc}") from None
    if manifest.format != FORMAT:
        raise BundleError(f"{path}: bundle format {manifest.format}; this code reads format {FORMAT}")
    return manifest


def verify_bundle(bundle: Path | str, *, key: Path | str | None = None) -> Manifest:
    """The manifest, after every check passes: its id is the hash of its content; a signature beside it holds
    (and, with ``key``, a public key file, is required and by that key); every listed path is relative,
    normalized and in its part, and its file present, regular (no link), with its size and sha256; and nothing
    unlisted lies in the bundle. Raises naming the first file that fails."""
    bundle = Path(bundle)
    check_bundle_folder(bundle)
    manifest = read_manifest(bundle)
    if _canonical_id(manifest.body()) != manifest.bundle_id:
        raise BundleError(f"{bundle / MANIFEST}: the manifest was altered (its content no longer hashes to its id)")
    bundle_signature(bundle, manifest.bundle_id, key)
    check_listing(bundle / MANIFEST, ((f.part, f.path) for f in manifest.files), part_of)
    listed = set()
    for entry in manifest.files:
        path = reach(bundle / entry.part, entry.path)
        listed.add(f"{entry.part}/{entry.path}")
        digest, size = hash_file(path)
        if size != entry.bytes:
            raise BundleError(f"{path}: {size} bytes, the manifest says {entry.bytes} (truncated or extended)")
        if digest != entry.sha256:
            raise BundleError(f"{path}: sha256 {digest[:12]} differs from the manifest's {entry.sha256[:12]} (altered)")
    for part in PARTS:
        for relative, path in walk_files(bundle / part) if (bundle / part).exists() else ():
            if f"{part}/{relative}" not in listed:
                raise BundleError(f"{path}: not in the manifest (an extra file is refused, not imported)")
    return manifest


def import_embedder(
    bundle: Path | str, manifest: Manifest, configured: str | None, *, reindex: bool = False
) -> str | None:
    """The embedder a copy of the bundle is rebuilt with: the one its store was built with, or ``configured`` (the
    target's), which must be the same unless ``reindex``: refused in one line naming the bundle and both."""
    return target_embedder(
        manifest.embedder,
        manifest.embedder_id,
        configured,
        reindex=reindex,
        what=f"bundle {bundle} ({manifest.bundle_id[:16]})",
        switch="import it with --reindex",
    )


def import_bundle(
    bundle: Path | str,
    target: Path | str,
    *,
    mode: str = "replica",
    rebuild: Callable[[Path], Any] | None = None,
    authority: AuthorityRecord | None = None,
    key: Path | str | None = None,
    decrypt: Path | str | None = None,
    embedder: str | None = None,
    reindex: bool = False,
) -> Manifest:
    """Verify the bundle (with ``key``, a public key file: only when signed by it), then activate it at
    ``target`` (a new folder outside the bundle): the files are copied into a staging folder beside it, checked
    again, and renamed into place in one step. ``mode`` is what the copy is: ``replica`` (read-only; the source
    keeps authority) or ``new-agent`` (a new agent id, its descent recorded); the authority record says whether
    the bundle was signed. ``rebuild(target)`` rebuilds the derived stores (``Substrate.reindex`` with the
    caller's embedder). ``authority`` is for ``migrate`` only: the record the target takes over. ``decrypt``: the
    custody private key of a bundle whose private parts are encrypted (``lca.custody``), required for one.
    ``embedder``: the embedder the target is configured with; one other than the bundle's is refused before
    anything is written, unless ``reindex`` (``import_embedder``: the one ``rebuild`` should open the target with)."""
    if mode not in IMPORT_MODES and authority is None:
        raise BundleError(
            f"unknown import mode {mode!r}; known: {', '.join(IMPORT_MODES)} (authority moves by migrate)"
        )
    bundle, target = Path(bundle), Path(target)
    manifest = verify_bundle(bundle, key=key)
    import_embedder(bundle, manifest, embedder, reindex=reindex)
    signed = bundle_signature(bundle, manifest.bundle_id, key).short()
    custody = None
    if "custody" in manifest.extra:
        if decrypt is None:
            raise BundleError(
                f"{bundle}: its private parts are encrypted to custody key {manifest.extra['custody'].get('recipient')}; "
                "give that key's private half (--decrypt KEY)"
            )
        custody = Custody.open(manifest.extra["custody"], decrypt, where=str(bundle / MANIFEST))
    check_new_store(target, bundle=bundle)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.importing-", dir=target.parent))
    try:
        placed: set[str] = set()
        for entry in manifest.files:
            source = reach(bundle / entry.part, entry.path)
            destination = restored_path(entry.path, source)
            if destination in placed:
                raise BundleError(f"{source}: a second file for {destination!r} (one session, one file)")
            placed.add(destination)
            if custody is not None and entry.part in ENCRYPTED_PARTS:  # authenticated chunk by chunk
                custody.decrypt_file(source, staging / destination, f"{entry.part}/{entry.path}")
                continue
            digest, size = copy_hashing(source, staging / destination)
            if (digest, size) != (entry.sha256, entry.bytes):  # changed between the check and the copy
                raise BundleError(f"{bundle / entry.part / entry.path}: changed while it was imported")
        descent = (*manifest.descent, f"agent:{manifest.agent_id}", f"bundle:{manifest.bundle_id}")
        if authority is not None:
            record = authority
        elif mode == "replica":
            record = AuthorityRecord(
                manifest.agent_id,
                manifest.source_epoch,
                "replica",
                _now(),
                f"replica of bundle {manifest.bundle_id} ({signed})",
            )
        else:
            record = AuthorityRecord(
                new_agent_id(), 1, "active", _now(), f"new agent from bundle {manifest.bundle_id} ({signed})", descent
            )
        write_authority(staging, record)
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if rebuild is not None:
        rebuild(target)
    return manifest


# ---- migration: quiesce -> checkpoint -> validate -> bind -> rehydrate -> resume ------------------------------
MIGRATION_STEPS = ("quiesce", "checkpoint", "validate", "bind", "rehydrate", "resume")


@dataclass(frozen=True)
class MigrationResult:
    ok: bool
    bundle_id: str | None
    source_epoch: int
    target_epoch: int | None
    steps: tuple[dict[str, Any], ...]
    error: str | None = None
    rolled_back: bool = False
    self_description: dict[str, Any] | None = None  # the check after resume (``lca.self_description``), if asked
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds of each step's work, in step order
    downtime_s: float | None = None  # quiesce (the source stops writing) to resume (the target serves); None if failed


MIGRATION_SESSION = "lca-migrations"  # the session a store's migration events are recorded in


def record_migration_event(store: Path, step: str, detail: dict[str, Any]) -> None:
    """One migration step as a system event in the store's transcript (fenced like every append)."""
    from lca.index.chunker import OPERATIONAL

    record = read_authority(store)
    entry = TranscriptEntry(
        id=f"migration:{detail.get('migration')}:{step}",
        session_id=MIGRATION_SESSION,
        agent_id=record.agent_id if record else "unknown",
        kind=EntryKind.SYSTEM_EVENT,
        timestamp=str(detail["at"]),
        content=json.dumps({"migration_step": step, **detail}, sort_keys=True),
        author="lca",
        meta={"migration_step": step, OPERATIONAL: True},  # history of the store, not of the conversation
    )
    TranscriptStore(store).append([entry])


def record_self_description(
    target: Path | str,
    statement: str | None,
    binding: dict[str, Any],
    *,
    migration: str,
    error: str | None = None,
) -> dict[str, Any]:
    """Check the resumed agent's ``statement`` against the identity installed in ``target``
    (``lca.self_description``) and record it as a ``self_description`` system event; the binding is kept as the
    environment, metadata beside the check, not identity. ``migration``: the id of the migration it follows;
    ``error``: the agent could not be asked."""

    if statement is None:
        detail: dict[str, Any] = {"error": error or "no statement", "environment": dict(binding)}
    else:
        detail = check_self_description(target, statement, binding).to_dict()
    record_migration_event(Path(target), "self_description", {"at": _now(), "migration": migration, **detail})
    return detail


def rebind_providers(source: Path, target: Path, binding: dict[str, Any]) -> list[CapabilityChange]:
    """The target runs with the providers its host declares (``binding["providers"]``, contracts as
    ``lca.providers.ProviderContract`` dicts) and the authorizations the agent carries; what the move reduced or
    gained is returned for the ``resume`` step to record. Without a declaration the shipped contracts stand."""
    declared = binding.get("providers")
    if declared is None:
        return []
    if not isinstance(declared, list):
        raise BundleError("binding: 'providers' must be a list of provider contracts")
    before = read_providers(source)
    contracts = tuple(ProviderContract.from_dict(c, where=f"binding, providers[{i}]") for i, c in enumerate(declared))
    after = ProviderSet(contracts, before.authorized)
    write_providers(target, after)
    return capability_changes(before, after)


def migrate(
    source: Path | str,
    target: Path | str,
    *,
    bundle_dir: Path | str,
    rebuild: Callable[[Path], Any] | None = None,
    binding: dict[str, Any] | None = None,
    describe: Callable[[Path], str] | None = None,
    lock_timeout: float = 600.0,
) -> MigrationResult:
    """Move the agent's authority from ``source`` to ``target``, each step a system event in the transcript
    (``lca-migrations``). Quiesce: the source's writer lock is held from here to bind, so nothing is written
    meanwhile. Checkpoint: its bundle is written; validate: verified. Bind: the source moves to ``transferred``
    at the next epoch (from here its writers are refused). Rehydrate: the target is activated at that epoch and
    its derived stores rebuilt (``rebuild``). Resume: the target records the new binding. A failure before bind
    leaves the source authoritative; a failed rehydration rolls back: the target is removed and the source takes
    authority again at a later epoch. ``binding`` describes the new environment (model, harness, host): metadata
    of the migration, not identity; its ``providers``, when given, are the target host's provider contracts
    (``rebind_providers``: capabilities reduced or gained are recorded in the ``resume`` step). ``describe(target)``, when given, is the resumed agent's answer to
    ``lca.self_description.QUESTION``; it is checked against the installed identity and recorded as a
    ``self_description`` event (a failed or inconsistent description is reported, it does not undo the move).
    The target's transcript holds every step (quiesce and checkpoint travel in the bundle; validate, bind,
    rehydrate and resume are appended after activation); the source's holds the steps up to validate. The result
    times the move: each step's work in wall seconds (``seconds``; quiesce includes the wait for the writer lock)
    and the downtime, from quiesce to the recorded resume (``downtime_s``), the window no copy serves in."""
    source, target, bundle_dir = Path(source), Path(target), Path(bundle_dir)
    steps: list[dict[str, Any]] = []
    binding = dict(binding or {})
    layout = StoreLayout(source)
    check_migration_folders(source, target, bundle_dir)  # refused before anything is written
    before = ensure_authority(source)
    if not before.writable:
        raise BundleError(f"{layout.authority}: this store is a {before.state} copy; it has no authority to hand on")
    clear_stale_checkpoint(bundle_dir, before.agent_id, before.epoch)  # a retry writes the checkpoint again
    migration = hashlib.sha256(f"{source}|{target}|{_now()}|{os.urandom(8).hex()}".encode()).hexdigest()[:12]
    seconds: dict[str, float] = {}
    clock = [time.perf_counter()]  # quiesce starts here: from now on the source takes no new writes

    def step(name: str, store: Path, **detail: Any) -> dict[str, Any]:
        entry = {"step": name, "at": _now(), "migration": migration, "store": str(store), **detail}
        record_migration_event(store, name, entry)
        steps.append(entry)
        return entry

    def lap(name: str) -> None:
        """The wall time of ``name``'s work, from the end of the previous step's."""
        now = time.perf_counter()
        seconds[name] = seconds.get(name, 0.0) + now - clock[-1]
        clock.append(now)

    try:
        with exclusive_lock(layout.write_lock, timeout=lock_timeout, what=f"store {source}"):
            step("quiesce", source, epoch=before.epoch, binding=binding)
            lap("quiesce")
            step("checkpoint", source, bundle_dir=str(bundle_dir))
            manifest = _export_locked(layout, bundle_dir, {"migration": {"id": migration, "binding": binding}})
            lap("checkpoint")
            verify_bundle(bundle_dir)
            validated = step("validate", source, bundle_id=manifest.bundle_id, files=manifest.counts())
            lap("validate")
            bound = advance(source, state="transferred", reason=f"migrated to {target}", successor=str(target))
            lap("bind")
    except Exception as exc:  # nothing was bound: the source stays authoritative
        shutil.rmtree(bundle_dir, ignore_errors=True)
        return MigrationResult(False, None, before.epoch, None, tuple(steps), f"{type(exc).__name__}: {exc}")
    record = AuthorityRecord(
        before.agent_id,
        bound.epoch,
        "active",
        _now(),
        f"migrated from {source} (bundle {manifest.bundle_id})",
        (*before.descent, f"bundle:{manifest.bundle_id}"),
    )
    try:
        import_bundle(bundle_dir, target, authority=record, rebuild=rebuild)
        lap("rehydrate")
        record_migration_event(target, "validate", {**validated, "store": str(target)})
        step("bind", target, epoch=bound.epoch, source_epoch=before.epoch, bundle_id=manifest.bundle_id)
        lap("bind")  # the target's record of the bind is part of binding it
        step("rehydrate", target, rebuilt=rebuild is not None)
        changes = rebind_providers(source, target, binding)
        step("resume", target, binding=binding, capabilities=[c.to_dict() for c in changes])
        lap("resume")
    except Exception as exc:  # roll back: the source takes authority again at a later epoch; the target (new,
        shutil.rmtree(target, ignore_errors=True)  # checked before quiesce) and the checkpoint go, so a retry can run
        shutil.rmtree(bundle_dir, ignore_errors=True)
        error = f"{type(exc).__name__}: {exc}"
        back = advance(source, state="active", reason=f"rollback of the migration to {target}: {error}")
        step("rollback", source, epoch=back.epoch, error=error)
        return MigrationResult(False, manifest.bundle_id, before.epoch, None, tuple(steps), error, rolled_back=True)
    described = None
    if describe is not None:
        statement: str | None = None
        failure: str | None = None
        try:
            statement = describe(target)
        except Exception as exc:  # the agent could not be asked: reported, the migration stands
            failure = f"{type(exc).__name__}: {exc}"
        described = record_self_description(target, statement, binding, migration=migration, error=failure)
        steps.append({"step": "self_description", **described})
    ordered = {name: round(seconds[name], 6) for name in MIGRATION_STEPS}
    downtime = round(clock[-1] - clock[0], 6)  # to the resume step: the self-description comes after service resumed
    return MigrationResult(
        True, manifest.bundle_id, before.epoch, bound.epoch, tuple(steps), None, False, described, ordered, downtime
    )
