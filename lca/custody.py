"""Private custody: a bundle's private parts encrypted to the key of whoever may open them.

A bundle has a shareable body (configuration, the code version, the embedder) and private parts: ``identity/``
(who the agent is, its user and instructions) and ``memory/`` (the verbatim transcript, memory files, event logs).
Host secrets (API keys, tokens) are a third thing and never travel in a bundle: each host holds its own. With
``lca bundle export --encrypt-to PUB``, the private parts are encrypted; the body stays plain.

- A custody key pair is X25519 (``generate_custody_key``: the private key PEM PKCS8 mode 0600, ``PATH.pub`` PEM).
- Each bundle gets a fresh 256-bit data key. Every private file is encrypted with AES-256-GCM in 1 MiB chunks,
  each chunk's nonce the file's random prefix and its counter, the last chunk marked in the associated data, so
  a chunk cannot be dropped, reordered, swapped between files or the file truncated without decryption failing.
- The data key is wrapped for the recipient (an ephemeral X25519 exchange, HKDF-SHA256, AES-256-GCM) and the
  wrapping is recorded in the manifest (``extra.custody``), so the bundle id, and a signature of it, cover it.
- The manifest lists each encrypted file's ciphertext hash and size: anyone can verify a bundle's integrity; only
  the private key's holder can import it (``--decrypt KEY``), and a wrong key is refused before anything is
  written.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from lca.errors import LCAError
from lca.signing import read_key_file, write_key_pair

SCHEME = "x25519-hkdf-sha256-aes256gcm-chunked-v1"
ENCRYPTED_PARTS = ("identity", "memory")
MAGIC = b"LCAENC1\n"
CHUNK = 1 << 20
_INFO = b"lca bundle custody v1"


class CustodyError(LCAError):
    """A custody key that cannot be read, a bundle that needs a key not given, or a file that does not decrypt."""


def _x25519() -> Any:

    return x25519


def _aead(key: bytes) -> Any:

    return AESGCM(key)


def _raw(public: Any) -> bytes:

    return bytes(public.public_bytes(Encoding.Raw, PublicFormat.Raw))


def recipient_id(public: Any) -> str:
    """A short, stable name for a custody public key."""
    return hashlib.sha256(_raw(public)).hexdigest()[:16]


def generate_custody_key(path: Path | str) -> tuple[Path, Path, str]:
    """Write a new X25519 private key to ``path`` (mode 0600, never over a file) and its public key to
    ``path.pub``; returns both paths and the recipient id."""
    key = _x25519().X25519PrivateKey.generate()
    private_path, public_path = write_key_pair(path, key)
    return private_path, public_path, recipient_id(key.public_key())


def load_custody_public(path: Path | str) -> Any:

    try:
        key = load_pem_public_key(read_key_file(path, "custody public key"))
    except (ValueError, LCAError) as exc:
        raise CustodyError(f"{path}: not a custody public key (PEM); see `lca keys generate --custody`") from exc
    if not isinstance(key, _x25519().X25519PublicKey):
        raise CustodyError(f"{path}: a {type(key).__name__}, not an X25519 custody public key")
    return key


KEY_ENV = "LCA_CUSTODY_KEY"  # a custody private key's PEM, or the path of its file


def load_custody_private(path: Path | str) -> Any:
    """The custody private key in ``path``, or given by the environment: ``path`` ``env:LCA_CUSTODY_KEY`` reads
    the variable, which holds the PEM itself or a key file's path (a key never travels in a bundle)."""

    if str(path) == f"env:{KEY_ENV}":
        value = os.environ.get(KEY_ENV, "")
        if not value.strip():
            raise CustodyError(f"${KEY_ENV} is not set: give the custody private key's PEM or its file's path")
        if not value.lstrip().startswith("-----BEGIN"):
            return load_custody_private(value)
        data, path = value.encode(), f"${KEY_ENV}"
    else:
        data = b""
    try:
        key = load_pem_private_key(data or read_key_file(path, "custody private key"), password=None)
    except (ValueError, TypeError, LCAError) as exc:
        raise CustodyError(f"{path}: not an unencrypted custody private key (PEM PKCS8)") from exc
    if not isinstance(key, _x25519().X25519PrivateKey):
        raise CustodyError(f"{path}: a {type(key).__name__}, not an X25519 custody private key")
    return key


def _kek(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:

    return bytes(HKDF(hashes.SHA256(), 32, salt=None, info=_INFO + ephemeral + recipient).derive(shared))


@dataclass(frozen=True)
class Custody:
    """One bundle's data key and its wrapping for the recipient (the wrapping goes into the manifest)."""

    data_key: bytes
    record: dict[str, Any]

    @classmethod
    def for_recipient(cls, public_path: Path | str) -> Custody:
        recipient = load_custody_public(public_path)
        data_key = os.urandom(32)
        ephemeral = _x25519().X25519PrivateKey.generate()
        eph_raw, rec_raw = _raw(ephemeral.public_key()), _raw(recipient)
        nonce = os.urandom(12)
        wrapped = _aead(_kek(ephemeral.exchange(recipient), eph_raw, rec_raw)).encrypt(nonce, data_key, _INFO)
        b64 = base64.b64encode
        record = {
            "scheme": SCHEME,
            "parts": list(ENCRYPTED_PARTS),
            "recipient": recipient_id(recipient),
            "ephemeral": b64(eph_raw).decode(),
            "nonce": b64(nonce).decode(),
            "wrapped_key": b64(wrapped).decode(),
        }
        return cls(data_key, record)

    @classmethod
    def open(cls, record: Any, private_path: Path | str, *, where: str) -> Custody:
        """The data key, unwrapped with the private key; a wrong key or a damaged record is refused."""
        if not isinstance(record, dict) or record.get("scheme") != SCHEME:
            raise CustodyError(f"{where}: unknown custody scheme; this code reads {SCHEME}")
        private = load_custody_private(private_path)
        if recipient_id(private.public_key()) != record.get("recipient"):
            raise CustodyError(
                f"{where}: encrypted to custody key {record.get('recipient')}; {private_path} is key "
                f"{recipient_id(private.public_key())}"
            )
        try:
            eph_raw = base64.b64decode(record["ephemeral"], validate=True)
            ephemeral = _x25519().X25519PublicKey.from_public_bytes(eph_raw)
            kek = _kek(private.exchange(ephemeral), eph_raw, _raw(private.public_key()))
            nonce = base64.b64decode(record["nonce"], validate=True)
            data_key = _aead(kek).decrypt(nonce, base64.b64decode(record["wrapped_key"], validate=True), _INFO)
        except Exception as exc:  # InvalidTag, bad base64, a missing field: the record does not open
            raise CustodyError(f"{where}: the wrapped data key does not open ({type(exc).__name__})") from None
        return cls(bytes(data_key), dict(record))

    def _aad(self, name: str, index: int, last: bool) -> bytes:
        return f"{name}\x00{index}\x00{int(last)}".encode()

    def encrypt_file(self, source: Path, target: Path, name: str) -> tuple[str, int]:
        """Encrypt ``source`` into a new file ``target`` (``name``: its path in the bundle, bound into every
        chunk); the ciphertext's sha256 and size."""
        aead, prefix = _aead(self.data_key), os.urandom(8)
        digest, size = hashlib.sha256(), 0
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with open(source, "rb") as src, os.fdopen(os.open(target, flags, 0o644), "wb") as dst:

            def put(data: bytes) -> None:
                nonlocal size
                digest.update(data)
                size += len(data)
                dst.write(data)

            put(MAGIC + prefix)
            block, index = src.read(CHUNK), 0
            while True:
                following = src.read(CHUNK) if block else b""
                last = not following
                sealed = aead.encrypt(prefix + struct.pack(">I", index), block, self._aad(name, index, last))
                put(struct.pack(">I", len(sealed)) + sealed)
                if last:
                    break
                block, index = following, index + 1
            dst.flush()
            os.fsync(dst.fileno())
        return digest.hexdigest(), size

    def decrypt_file(self, source: Path, target: Path, name: str) -> None:
        """Decrypt ``source`` into a new file ``target``; a file altered, truncated or moved is refused."""
        aead = _aead(self.data_key)
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with open(source, "rb") as src, os.fdopen(os.open(target, flags, 0o644), "wb") as dst:
            head = src.read(len(MAGIC) + 8)
            if not head.startswith(MAGIC) or len(head) != len(MAGIC) + 8:
                raise CustodyError(f"{source}: not an encrypted bundle file")
            prefix, index, last = head[len(MAGIC) :], 0, False
            while not last:
                length = src.read(4)
                if len(length) != 4:
                    raise CustodyError(f"{source}: truncated (chunk {index} missing)")
                sealed = src.read(struct.unpack(">I", length)[0])
                nonce = prefix + struct.pack(">I", index)
                for last in (False, True):  # the associated data says whether this is the last chunk
                    try:
                        dst.write(aead.decrypt(nonce, sealed, self._aad(name, index, last)))
                        break
                    except Exception:  # InvalidTag under this reading; try the other, else refuse
                        if last:
                            raise CustodyError(f"{source}: chunk {index} does not decrypt (altered or moved)") from None
                index += 1
            if src.read(1):
                raise CustodyError(f"{source}: bytes after the last chunk")
            dst.flush()
            os.fsync(dst.fileno())
