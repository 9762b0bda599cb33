"""Ed25519 signatures over what the framework hands on: a bundle's manifest, a study's lock. A hash shows that
bytes are unchanged only to someone who trusts the hash; anyone who edits a file can recompute it. A signature
shows who vouched for them: only the holder of the private key can make one that a public key accepts.

A key pair is two files: the private key (PEM, PKCS8, unencrypted, mode 0600: it stays with its holder) and the
public key beside it (``PATH.pub``, PEM), which a recipient holds to check. OpenSSH Ed25519 keys
(``ssh-keygen -t ed25519``) are read as well. A signature is a small JSON record: what it signs (``signed``:
a bundle id, a lock's hash) for which ``purpose`` (so a lock's signature cannot pass for a bundle's), the key's
id, the public key and the signature. The public key in the record only names the signer and lets a reader
catch a damaged record; trust comes from checking against a public key the reader already holds.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
    load_ssh_private_key,
    load_ssh_public_key,
)

from lca.errors import LCAError

ALGORITHM = "ed25519"
FORMAT = 1
PUBLIC_SUFFIX = ".pub"
SignatureStateName = Literal["unsigned", "signed", "verified"]


class SigningError(LCAError):
    """A key or signature that cannot be read, or a signature that does not hold; the message names the file."""


def _crypto() -> Any:
    """The ``cryptography`` primitives, imported when a key is used (most commands never need them)."""

    return ed25519


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path
    key_id: str


@dataclass(frozen=True)
class Signature:
    """One signature record (the JSON beside what it signs)."""

    purpose: str
    signed: str
    key_id: str
    public_key: str  # base64 of the 32 raw bytes
    signature: str  # base64 of the 64 bytes
    algorithm: str = ALGORITHM
    format: int = FORMAT

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()


@dataclass(frozen=True)
class SignatureState:
    """What a reader can say of a signature: ``unsigned`` (none), ``signed`` (one that holds for the key it
    names, not checked against a key the reader holds) or ``verified`` (checked against the reader's key)."""

    state: SignatureStateName
    key_id: str | None = None

    def describe(self) -> str:
        if self.state == "unsigned":
            return "unsigned"
        if self.state == "signed":
            return f"signed by key {self.key_id} (not checked against a key you hold; pass --key)"
        return f"signed by key {self.key_id}, verified with your key"

    def short(self) -> str:
        """The state in a few words, for a record that outlives the command (an authority record's reason)."""
        return {"unsigned": "unsigned", "signed": f"signed by key {self.key_id}"}.get(
            self.state, f"signed by key {self.key_id}, verified"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "key_id": self.key_id}


def key_id_of(public: Any) -> str:
    """A short, stable name for a public key: the first 16 hex digits of the sha256 of its raw bytes."""
    return hashlib.sha256(_raw_public(public)).hexdigest()[:16]


def _raw_public(public: Any) -> bytes:

    return bytes(public.public_bytes(Encoding.Raw, PublicFormat.Raw))


def generate_key(path: Path | str) -> KeyPair:
    """Write a new private key to ``path`` (mode 0600; an existing file is never overwritten) and its public key
    to ``path.pub``."""
    key = _crypto().Ed25519PrivateKey.generate()
    private_path, public_path = write_key_pair(path, key)
    return KeyPair(private_path, public_path, key_id_of(key.public_key()))


def write_key_pair(path: Path | str, key: Any) -> tuple[Path, Path]:
    """Write ``key`` (a ``cryptography`` private key) to ``path`` (PEM PKCS8, mode 0600) and its public key to
    ``path.pub`` (PEM); neither file may exist already, and the folder must."""

    private_path = Path(path)
    public_path = private_path.with_name(private_path.name + PUBLIC_SUFFIX)
    for existing in (private_path, public_path):
        if existing.exists() or existing.is_symlink():
            raise SigningError(f"{existing}: exists; a key is never overwritten (choose another path)")
    if not private_path.parent.is_dir():
        raise SigningError(f"{private_path.parent}: no such folder for the key")
    private_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public_pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    _write_new(private_path, private_pem, 0o600)
    _write_new(public_path, public_pem, 0o644)
    return private_path, public_path


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_key_file(path: Path | str, what: str) -> bytes:
    path = Path(path)
    if not path.is_file():
        raise SigningError(f"{path}: no such {what} file")
    data = path.read_bytes()
    if len(data) > 64 * 1024:
        raise SigningError(f"{path}: {len(data)} bytes; not a {what}")
    return data


def load_private_key(path: Path | str) -> Any:
    """The Ed25519 private key in ``path`` (PEM PKCS8 or OpenSSH), refused in one line naming the file."""

    data = read_key_file(path, "private key")
    loader = load_ssh_private_key if data.lstrip().startswith(b"-----BEGIN OPENSSH") else load_pem_private_key
    try:
        key = loader(data, password=None)
    except TypeError:
        raise SigningError(f"{path}: an encrypted private key; give an unencrypted one (kept private)") from None
    except (ValueError, binascii.Error):
        raise SigningError(f"{path}: not a private key (PEM or OpenSSH); see `lca keys generate`") from None
    except Exception as exc:  # the library's own unsupported-algorithm errors
        raise SigningError(f"{path}: unreadable private key ({type(exc).__name__})") from None
    if not isinstance(key, _crypto().Ed25519PrivateKey):
        raise SigningError(f"{path}: a {type(key).__name__}, not an Ed25519 private key")
    return key


def load_public_key(path: Path | str) -> Any:
    """The Ed25519 public key in ``path`` (PEM or an OpenSSH ``ssh-ed25519`` line)."""

    data = read_key_file(path, "public key")
    if b"PRIVATE KEY" in data:
        raise SigningError(f"{path}: a private key; checking takes the public one (PATH{PUBLIC_SUFFIX})")
    loader = load_ssh_public_key if data.lstrip().startswith(b"ssh-") else load_pem_public_key
    try:
        key = loader(data)
    except (ValueError, binascii.Error):
        raise SigningError(f"{path}: not a public key (PEM or OpenSSH)") from None
    except Exception as exc:
        raise SigningError(f"{path}: unreadable public key ({type(exc).__name__})") from None
    if not isinstance(key, _crypto().Ed25519PublicKey):
        raise SigningError(f"{path}: a {type(key).__name__}, not an Ed25519 public key")
    return key


def _message(purpose: str, signed: str) -> bytes:
    return f"lca-signature-v{FORMAT}\n{purpose}\n{signed}".encode()


def sign(private_key: Any, purpose: str, signed: str) -> Signature:
    """Sign ``signed`` (a hash or id, as text) for ``purpose`` with a key from ``load_private_key``."""
    public = private_key.public_key()
    return Signature(
        purpose=purpose,
        signed=signed,
        key_id=key_id_of(public),
        public_key=base64.b64encode(_raw_public(public)).decode(),
        signature=base64.b64encode(private_key.sign(_message(purpose, signed))).decode(),
    )


def read_signature(path: Path) -> Signature | None:
    """The signature record at ``path``; None when there is none. A record that is not one is refused."""
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise SigningError(f"{path}: not a regular file; a signature is a small JSON file")
    try:
        data = json.loads(path.read_bytes()[: 64 * 1024])
    except ValueError:
        raise SigningError(f"{path}: not valid JSON; not a signature") from None
    fields = set(Signature.__dataclass_fields__)
    if not isinstance(data, dict) or set(data) != fields:
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise SigningError(f"{path}: a signature holds exactly {', '.join(sorted(fields))}; got {got}")
    if data["algorithm"] != ALGORITHM or data["format"] != FORMAT:
        raise SigningError(f"{path}: algorithm and format must be {ALGORITHM!r} and {FORMAT}")
    bad = [k for k in sorted(fields - {"format"}) if not isinstance(data[k], str)]
    if bad:
        raise SigningError(f"{path}: field {bad[0]!r} must be a string")
    return Signature(**data)


def check(
    signature: Signature | None, purpose: str, signed: str, *, public_key: Path | str | None, where: Path
) -> SignatureState:
    """How far ``signature`` holds for ``signed``: refused (one line naming ``where``) when it is damaged, signs
    something else, or ``public_key`` is given and it is missing or by another key."""
    if signature is None:
        if public_key is not None:
            wanted = key_id_of(load_public_key(public_key))
            raise SigningError(
                f"{where}: missing; the {purpose} is unsigned and --key asks for a signature by key {wanted}"
            )
        return SignatureState("unsigned")
    if signature.purpose != purpose:
        raise SigningError(f"{where}: a signature for {signature.purpose!r}, not for {purpose!r}")
    if signature.signed != signed:
        raise SigningError(
            f"{where}: signs {signature.signed[:16]}, not this {purpose} ({signed[:16]}): altered after signing"
        )
    ed25519 = _crypto()
    try:
        embedded = ed25519.Ed25519PublicKey.from_public_bytes(base64.b64decode(signature.public_key, validate=True))
        raw_signature = base64.b64decode(signature.signature, validate=True)
    except (ValueError, binascii.Error):
        raise SigningError(f"{where}: the public key or signature is not valid base64 of an Ed25519 value") from None
    if key_id_of(embedded) != signature.key_id:
        raise SigningError(f"{where}: key_id {signature.key_id!r} is not the id of the public key it holds")
    if public_key is not None:
        held = load_public_key(public_key)
        if _raw_public(held) != _raw_public(embedded):
            raise SigningError(f"{where}: signed by key {signature.key_id}, not by the key in {public_key}")
    if not _holds(embedded, raw_signature, _message(purpose, signed)):
        raise SigningError(f"{where}: the signature does not hold (the signed content or the record was altered)")
    return SignatureState("verified" if public_key is not None else "signed", signature.key_id)


def _holds(public: Any, raw_signature: bytes, message: bytes) -> bool:

    try:
        public.verify(raw_signature, message)
    except InvalidSignature:
        return False
    return True
