"""Private custody (lca.custody): a bundle's identity and memory encrypted to a recipient's key, the body plain;
anyone can verify it, only the key's holder can import it, and tampering is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lca.bundle import BundleError, export_bundle, import_bundle, read_manifest, verify_bundle
from lca.custody import Custody, CustodyError, generate_custody_key
from lca.migration_check import history_fingerprint
from lca.transcript import TranscriptStore
from tests.conftest import make_entry

TURN = "the staging database listens on port 6543"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    TranscriptStore(root).append([make_entry("s1", 1, TURN), make_entry("s1", 2, "deploy on Fridays")])
    (root / "identity").mkdir()
    (root / "identity" / "identity.md").write_text("I am the atlas project's assistant.\n")
    (root / "recall.yaml").write_text("token_budget: 900\n")
    return root


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public, _ = generate_custody_key(tmp_path / "custody")
    return private, public


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_private_parts_are_encrypted_the_body_plain_and_only_the_key_holder_imports(store, keys, tmp_path):
    private, public = keys
    bundle = tmp_path / "b"
    manifest = export_bundle(store, bundle, encrypt_to=public)
    assert TURN.encode() not in _all_bytes(bundle / "memory")
    assert b"atlas" not in _all_bytes(bundle / "identity")
    assert (bundle / "body" / "recall.yaml").read_text() == "token_budget: 900\n"
    assert verify_bundle(bundle).bundle_id == manifest.bundle_id  # integrity checks need no key
    assert read_manifest(bundle).extra["custody"]["recipient"] == manifest.extra["custody"]["recipient"]

    with pytest.raises(BundleError, match="encrypted to custody key"):
        import_bundle(bundle, tmp_path / "no-key")
    other, _, _ = generate_custody_key(tmp_path / "other")
    with pytest.raises(CustodyError, match="encrypted to custody key"):
        import_bundle(bundle, tmp_path / "wrong-key", decrypt=other)
    assert not (tmp_path / "no-key").exists() and not (tmp_path / "wrong-key").exists()

    import_bundle(bundle, tmp_path / "opened", decrypt=private)
    assert history_fingerprint(tmp_path / "opened") == history_fingerprint(store)
    assert (tmp_path / "opened" / "identity" / "identity.md").read_text() == "I am the atlas project's assistant.\n"


def test_a_truncated_reordered_or_moved_encrypted_file_does_not_decrypt(store, keys, tmp_path):
    _, public = keys
    custody = Custody.for_recipient(public)
    source = tmp_path / "big.txt"
    source.write_bytes(b"x" * (2 * (1 << 20) + 17))  # three chunks
    custody.encrypt_file(source, tmp_path / "enc", "memory/big.txt")
    custody.decrypt_file(tmp_path / "enc", tmp_path / "dec", "memory/big.txt")
    assert (tmp_path / "dec").read_bytes() == source.read_bytes()
    with pytest.raises(CustodyError, match="does not decrypt"):
        custody.decrypt_file(tmp_path / "enc", tmp_path / "moved", "memory/other.txt")
    data = (tmp_path / "enc").read_bytes()
    last_chunk = 4 + (1 << 20) + 16
    (tmp_path / "cut").write_bytes(data[: len(data) - (17 + 16 + 4)])  # the last chunk dropped
    with pytest.raises(CustodyError, match="truncated"):
        custody.decrypt_file(tmp_path / "cut", tmp_path / "dec-cut", "memory/big.txt")
    head = len(b"LCAENC1\n") + 8
    swapped = data[:head] + data[head + last_chunk : head + 2 * last_chunk] + data[head : head + last_chunk]
    (tmp_path / "swap").write_bytes(swapped + data[head + 2 * last_chunk :])
    with pytest.raises(CustodyError, match="chunk 0 does not decrypt"):
        custody.decrypt_file(tmp_path / "swap", tmp_path / "dec-swap", "memory/big.txt")


def test_a_credential_in_the_shareable_body_is_refused(store, tmp_path):
    (store / "retrieval.yaml").write_text("api_key: sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0" + "\n")
    with pytest.raises(BundleError, match="retrieval.yaml: holds a credential"):
        export_bundle(store, tmp_path / "b")


def test_the_cli_exports_an_encrypted_bundle_and_imports_it_with_the_key(store, tmp_path, capsys):
    from protocols.cli import main

    assert main(["keys", "generate", str(tmp_path / "k"), "--custody"]) == 0
    bundle = tmp_path / "b"
    code = main(["bundle", "export", str(bundle), "--store", str(store), "--encrypt-to", str(tmp_path / "k.pub")])
    assert code == 0 and TURN.encode() not in _all_bytes(bundle / "memory")
    assert main(["bundle", "import", str(bundle), "--store", str(tmp_path / "x"), "--no-rebuild"]) == 2
    assert "--decrypt KEY" in capsys.readouterr().err
    args = ["bundle", "import", str(bundle), "--store", str(tmp_path / "y"), "--no-rebuild", "--decrypt"]
    assert main([*args, str(tmp_path / "k")]) == 0
    assert history_fingerprint(tmp_path / "y") == history_fingerprint(store)
    assert main(["bundle", "verify", str(bundle), "--decrypt", str(tmp_path / "k")]) == 2  # a flag of import only


def test_a_flipped_byte_a_swapped_part_and_a_key_from_the_environment(store, keys, tmp_path, monkeypatch):
    import json

    from lca.bundle import _canonical_id

    private, public = keys
    bundle = tmp_path / "b"
    export_bundle(store, bundle, encrypt_to=public)
    files = {f.path: f for f in read_manifest(bundle).files if f.part == "memory"}
    first = sorted(p for p in files if p.startswith("sessions/"))[0]
    session = bundle / "memory" / first
    original = session.read_bytes()
    session.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(BundleError, match=f"memory/{first}: sha256"):
        import_bundle(bundle, tmp_path / "flipped", decrypt=private)
    session.write_bytes(original)

    # a forger swaps the identity file's ciphertext into the session's place and rewrites the manifest to match
    identity = next(f for f in read_manifest(bundle).files if f.part == "identity")
    session.write_bytes((bundle / "identity" / identity.path).read_bytes())
    data = json.loads((bundle / "manifest.json").read_text())
    for entry in data["files"]:
        if entry["path"] == first:
            entry["sha256"], entry["bytes"] = identity.sha256, identity.bytes
    body = {k: v for k, v in data.items() if k != "bundle_id"}
    data["bundle_id"] = _canonical_id(body)
    (bundle / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(CustodyError, match=f"memory/{first}: chunk 0 does not decrypt"):
        import_bundle(bundle, tmp_path / "swapped", decrypt=private)
    assert not (tmp_path / "swapped").exists()

    session.write_bytes(original)  # back as exported, the key read from the environment
    for entry in data["files"]:
        if entry["path"] == first:
            entry["sha256"], entry["bytes"] = files[first].sha256, files[first].bytes
    data["bundle_id"] = _canonical_id({k: v for k, v in data.items() if k != "bundle_id"})
    (bundle / "manifest.json").write_text(json.dumps(data))
    monkeypatch.setenv("LCA_CUSTODY_KEY", private.read_text())
    import_bundle(bundle, tmp_path / "from-env", decrypt="env:LCA_CUSTODY_KEY")
    assert history_fingerprint(tmp_path / "from-env") == history_fingerprint(store)
