"""What a bundle must satisfy before its bytes are trusted, on export and on import (``lca.bundle``).

A bundle is input from anyone: every path its manifest names is untrusted until checked (relative, normalized,
listed once, inside its part, so inside the target once copied); every file is a regular file reached without a
symbolic link, since a link would carry an outside file into the copy (or, on export, out of the machine);
nothing lies in the bundle that the manifest does not list; and a signature by a key the user holds
(``lca.signing``), when asked for, vouches for the manifest, which a hash alone cannot: whoever edits a file
can recompute its hash and the bundle id. The same rules guard the folders a migration writes, which must lie
outside the store they move and never be a folder of someone else's that a failure would then remove.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from lca import signing
from lca.derived import derived_file_name
from lca.errors import LCAError
from lca.fileio import atomic_write_bytes
from lca.layout import StoreLayout

MANIFEST = "manifest.json"
SIGNATURE = "signature.json"
PARTS = ("identity", "memory", "body")
PURPOSE = "bundle"  # what a bundle's signature signs (its bundle id), kept apart from a study lock's
CHUNK = 1 << 20
_NO_LINK = "a symbolic link (a bundle carries its own files, never what a link points to)"


class BundleError(LCAError):
    """A bundle that cannot be written, read or trusted; the message names the file."""


# ---- paths and files --------------------------------------------------------------------------------------
def checked_path(value: object, where: Path) -> str:
    """``value`` when it is a relative, normalized POSIX path with no ``..`` (the only form a manifest holds);
    refused naming the manifest otherwise."""
    if not isinstance(value, str) or not value:
        raise BundleError(f"{where}: a file path must be a non-empty string, not {type(value).__name__}")
    shown = value.encode("unicode_escape").decode()[:200]
    if "\x00" in value or PurePosixPath(value).is_absolute():
        raise BundleError(f"{where}: file {shown!r} is not a relative path inside the bundle")
    if any(name in ("", ".", "..") for name in value.split("/")):
        raise BundleError(f"{where}: file {shown!r} is not a normalized path inside the bundle (no '..', '.', '//')")
    return value


def shipped_path(relative: str) -> str:
    """A store path as a bundle names it: each name through ``lca.derived.derived_id``, so a credential in a
    session id (which names its session file) or in a file name reaches neither the manifest nor the bundle's
    file names. A path without one is unchanged; ``restored_path`` undoes the renaming of a session file."""
    return "/".join(derived_file_name(name) for name in relative.split("/"))


def restored_path(relative: str, source: Path) -> str:
    """Where a shipped file goes in the new store: a session file ``shipped_path`` renamed takes back its real
    name, the one the session id its lines carry gives it, when that name ships as the name it came under (so a
    bundle cannot steer a file anywhere but to its own session). Any other file keeps the name it shipped under:
    a credential in a memory file's name is not carried over."""
    folder, _, name = relative.partition("/")
    if folder != "sessions" or "/" in name:
        return relative
    for session_id in _session_ids_in(source):
        real = StoreLayout(".").session_file(session_id).name
        if real != name and derived_file_name(real) == name:
            return f"sessions/{real}"
    return relative


def _session_ids_in(path: Path, *, lines: int = 64) -> Iterator[str]:
    """The session ids the first lines of a session file carry (a line that does not parse is passed over)."""
    with open(path, "rb") as handle:
        for _, raw in zip(range(lines), handle, strict=False):
            try:
                value = json.loads(raw).get("session_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(value, str) and value:
                yield value


def check_listing(where: Path, entries: Iterable[tuple[str, str]], part_of: Callable[[str], str | None]) -> None:
    """Every ``(part, path)`` of a manifest: a checked path, in the part its path belongs to, listed once, and
    no listed file a folder of another (two copies could not both be written)."""
    seen: set[str] = set()
    for part, path in entries:
        checked_path(path, where)
        if part not in PARTS or part_of(path) != part:
            raise BundleError(f"{where}: file {path!r} is listed in part {part!r}, not its own")
        if path in seen:
            raise BundleError(f"{where}: file {path!r} is listed twice")
        seen.add(path)
    for path in seen:
        parent = next((str(p) for p in PurePosixPath(path).parents if str(p) in seen), None)
        if parent is not None:
            raise BundleError(f"{where}: {parent!r} is listed as a file and as the folder of {path!r}")


def walk_files(root: Path, *, shipped: Callable[[str], bool] = lambda relative: True) -> Iterator[tuple[str, Path]]:
    """The regular files under ``root`` (relative POSIX path, path), sorted; a symbolic link (to a file or a
    folder) or a special file (fifo, socket, device) in a ``shipped`` path is refused, naming it, and a folder
    that cannot be read is an error, not silently left out."""

    def fail(exc: OSError) -> None:
        raise exc

    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        here = Path(dirpath)
        dirnames.sort()
        for name in list(dirnames):
            relative = (here / name).relative_to(root).as_posix()
            if not shipped(relative):
                dirnames.remove(name)
            elif (here / name).is_symlink():
                raise BundleError(f"{here / name}: {_NO_LINK}")
        for name in sorted(filenames):
            path = here / name
            relative = path.relative_to(root).as_posix()
            if shipped(relative):
                _regular(path, os.lstat(path).st_mode)
                yield relative, path


def _regular(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise BundleError(f"{path}: {_NO_LINK}")
    if not stat.S_ISREG(mode):
        raise BundleError(f"{path}: not a regular file (a fifo, socket or device is never copied)")


def reach(root: Path, relative: str) -> Path:
    """``root / relative`` once every step to it is a real folder and the file a regular one (no link)."""
    path = root
    for name in relative.split("/"):
        path = path / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise BundleError(f"{root / relative}: missing from the bundle") from None
        except NotADirectoryError:
            raise BundleError(f"{root / relative}: missing from the bundle ({path.parent} is a file)") from None
        if stat.S_ISLNK(mode):
            raise BundleError(f"{path}: {_NO_LINK}")
    _regular(path, mode)
    return path


def _open_regular(path: Path) -> int:
    """A descriptor on ``path``, never through a final symbolic link, never blocking on a fifo."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if os.path.islink(path):
            raise BundleError(f"{path}: {_NO_LINK}") from None
        raise exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        _regular(path, mode)
    return fd


def hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with os.fdopen(_open_regular(path), "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def copy_hashing(source: Path, target: Path) -> tuple[str, int]:
    """Copy a regular file (never through a link) into a new file (never over one), fsynced; its sha256 and
    size as read."""
    digest, size = hashlib.sha256(), 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(_open_regular(source), "rb") as src:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(target, flags, 0o644), "wb") as dst:
            while block := src.read(CHUNK):
                digest.update(block)
                size += len(block)
                dst.write(block)
            dst.flush()
            os.fsync(dst.fileno())
    return digest.hexdigest(), size


def check_bundle_folder(bundle: Path) -> None:
    """A bundle is a real folder holding its manifest, an optional signature and the three parts as real
    folders; anything else at its top is an extra file, refused rather than ignored."""
    if not bundle.exists():
        raise BundleError(f"{bundle}: no such bundle folder")
    if not bundle.is_dir():
        raise BundleError(f"{bundle}: a file, not a folder; a bundle is a folder holding {MANIFEST}")
    for child in sorted(bundle.iterdir()):
        mode = os.lstat(child).st_mode
        if child.name in PARTS:
            if not stat.S_ISDIR(mode):
                raise BundleError(f"{child}: {_NO_LINK if stat.S_ISLNK(mode) else 'a file, not a folder'}")
        elif child.name in (MANIFEST, SIGNATURE):
            _regular(child, mode)
        else:
            raise BundleError(f"{child}: not part of a bundle (an extra file is refused, not imported)")


def read_manifest_bytes(bundle: Path) -> bytes:
    path = bundle / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise BundleError(f"{path}: missing; a folder without a manifest is not a (finished) bundle")
    with os.fdopen(_open_regular(path), "rb") as handle:
        return handle.read()


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it, links resolved (neither needs to exist)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def check_new_store(target: Path, *, bundle: Path | None = None, role: str = "a bundle is imported into") -> None:
    """``target`` can become a new store: no store, no file, no link, nothing in it, not inside the bundle."""
    if target.is_symlink():
        raise BundleError(f"{target}: a symbolic link; {role} a real, new folder")
    if target.exists() and not target.is_dir():
        raise BundleError(f"{target}: a file, not a folder; {role} a new folder")
    if target.exists() and any(target.iterdir()):
        raise BundleError(f"{target}: exists and is not empty; {role} a new store")
    if bundle is not None and inside(target, bundle):
        raise BundleError(f"{target}: inside the bundle {bundle}; a store is imported beside a bundle, not into it")


# ---- signatures ---------------------------------------------------------------------------------------------
def sign_bundle(out: Path, bundle_id: str, private_key: Any) -> signing.SignatureState:
    """Write the bundle's signature (``signature.json``): the private key vouches for its bundle id, which is
    the hash of the manifest, which holds every file's hash."""
    record = signing.sign(private_key, PURPOSE, bundle_id)
    atomic_write_bytes(out / SIGNATURE, record.to_json())
    return signing.SignatureState("signed", record.key_id)


def bundle_signature(bundle: Path | str, bundle_id: str, key: Path | str | None = None) -> signing.SignatureState:
    """Whether the bundle is signed, and by which key; with ``key`` (a public key file), refused unless it is
    signed by that key. A signature that is present and does not hold is refused either way."""
    where = Path(bundle) / SIGNATURE
    try:
        return signing.check(signing.read_signature(where), PURPOSE, bundle_id, public_key=key, where=where)
    except signing.SigningError as exc:
        raise BundleError(str(exc)) from None


# ---- a migration's folders ----------------------------------------------------------------------------------
def check_migration_folders(source: Path, target: Path, bundle_dir: Path) -> None:
    """Refuse, before anything is quiesced, folders a migration would damage: a target or checkpoint that is
    the store itself or lies inside it (the new authority inside the old store, or an export into itself), a
    store inside either, a checkpoint inside the target or the reverse, and a target that is not a new folder
    (a rollback removes the target, so it must be the migration's own)."""
    for name, path in (("target", target), ("checkpoint bundle", bundle_dir)):
        if inside(path, source):
            where = "is the store itself" if path.resolve() == source.resolve() else f"lies inside the store {source}"
            raise BundleError(f"{path}: the migration's {name} {where}; it must be a new folder outside it")
        if inside(source, path):
            raise BundleError(f"{path}: the store {source} lies inside the migration's {name}")
    if inside(bundle_dir, target) or inside(target, bundle_dir):
        raise BundleError(f"{bundle_dir}: the checkpoint bundle and the target {target} must not hold each other")
    check_new_store(target, role="a migration moves the agent into")


def clear_stale_checkpoint(bundle_dir: Path, agent_id: str, epoch: int) -> None:
    """Make way for a migration's checkpoint. A checkpoint of this agent at this epoch, which a failed or
    killed migration left behind, is removed so that the retry can write it again, as is an export cut off
    before its manifest; any other folder with content is refused, never removed."""
    if bundle_dir.is_symlink() or (bundle_dir.exists() and not bundle_dir.is_dir()):
        raise BundleError(f"{bundle_dir}: not a folder; the checkpoint bundle is written into a new folder")
    names = set(os.listdir(bundle_dir)) if bundle_dir.exists() else set()
    if not names:
        return
    if MANIFEST in names:
        try:
            data = json.loads(read_manifest_bytes(bundle_dir))
            ours = (
                data.get("agent_id") == agent_id
                and data.get("source_epoch") == epoch
                and "migration" in (data.get("extra") or {})
            )
        except (BundleError, ValueError, AttributeError):
            ours = False
    else:
        ours = all(n in (*PARTS, SIGNATURE) or n.startswith(f".{MANIFEST}.tmp-") for n in names)
    if not ours:
        raise BundleError(
            f"{bundle_dir}: exists and is not empty (not a checkpoint this store's migration left); "
            "remove it or pass --bundle DIR"
        )
    shutil.rmtree(bundle_dir)
