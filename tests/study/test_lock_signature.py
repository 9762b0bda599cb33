"""Signed study locks (issue 49, case 10): the lock's hash shows the document unchanged only to whoever trusts the
lock, and anyone can edit both; a signature by a key the author holds shows who locked it. ``lca prereg check
--key`` refuses, in one line with exit 2, a lock that is unsigned, signed by another key or altered after
signing; an unsigned lock is shown as unsigned."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from lca.errors import LCAError
from lca.signing import SigningError, generate_key
from protocols.cli import main
from protocols.study.lock import lock_path, lock_signature, lock_study, signature_path


@pytest.fixture
def keys(tmp_path):
    return generate_key(tmp_path / "mine"), generate_key(tmp_path / "theirs")


def prereg(capsys, *args) -> tuple[int, str, str]:
    code = main(["prereg", *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_a_signed_lock_checks_with_its_key_and_only_with_its_key(study, keys, capsys):
    mine, theirs = keys
    code, out, _ = prereg(capsys, "lock", study, "--sign", mine.private)
    assert code == 0 and f"signed by key {mine.key_id}" in out and signature_path(study).is_file()
    code, out, _ = prereg(capsys, "check", study, "--key", mine.public)
    assert code == 0 and f"signed by key {mine.key_id}, verified with your key" in out
    code, out, err = prereg(capsys, "check", study, "--key", theirs.public)
    assert code == 2 and out == "" and err.count("\n") == 1 and "not by the key in" in err
    code, out, _ = prereg(capsys, "check", study, "--json")
    assert code == 0 and json.loads(out)["signature"] == {"state": "signed", "key_id": mine.key_id}


def test_an_unsigned_lock_is_marked_and_refused_with_a_key(study, keys, capsys):
    mine, _ = keys
    prereg(capsys, "lock", study)
    code, out, _ = prereg(capsys, "check", study)
    assert code == 0 and out.splitlines()[0].endswith("; unsigned")
    code, out, _ = prereg(capsys, "check", study, "--json")
    assert json.loads(out)["signature"]["state"] == "unsigned"
    code, _, err = prereg(capsys, "check", study, "--key", mine.public)
    assert code == 2 and err.count("\n") == 1 and "study lock is unsigned" in err
    code, out, _ = prereg(capsys, "lock", study, "--sign", mine.private)  # an existing lock is signed as it is
    assert code == 0 and "already locked" in out and "now signed by key" in out
    assert lock_signature(study, mine.public).state == "verified"


def test_a_lock_edited_to_match_an_edited_study_fails_its_signature(study, keys, capsys):
    mine, _ = keys
    lock_study(study, sign=mine.private)
    edited = study.read_text().replace("limit: 8\n", "limit: 24\n", 1)
    study.write_text(edited)
    record = json.loads(lock_path(study).read_text())
    record["sha256"] = hashlib.sha256(edited.encode()).hexdigest()  # the forger makes the lock match again
    lock_path(study).write_text(json.dumps(record))
    with pytest.raises(SigningError, match="altered after signing"):
        lock_signature(study)
    code, _, err = prereg(capsys, "check", study, "--key", mine.public)
    assert code == 2 and "altered after signing" in err


def test_a_relock_without_a_key_drops_the_old_signature_and_a_bad_key_writes_nothing(study, keys, capsys):
    mine, _ = keys
    lock_study(study, sign=mine.private)
    study.write_text(study.read_text().replace("limit: 8\n", "limit: 24\n", 1))
    before = lock_path(study).read_bytes()
    code, _, err = prereg(capsys, "lock", study, "--relock", "--reason", "more items", "--sign", mine.public)
    assert code == 2 and "not a private key" in err and lock_path(study).read_bytes() == before
    code, out, _ = prereg(capsys, "lock", study, "--relock", "--reason", "more items")
    assert code == 0 and "unsigned" in out and not signature_path(study).exists()
    with pytest.raises(LCAError, match="not locked"):
        lock_signature(study.with_name("other.yaml"), mine.public)


def test_a_bundle_signature_cannot_pass_for_a_lock_signature(study, keys, tmp_path):
    from lca.bundle import export_bundle
    from tests.lca.test_bundle import build

    mine, _ = keys
    lock_study(study)
    export_bundle(build(tmp_path / "store"), tmp_path / "b", sign=mine.private)
    shutil.copyfile(tmp_path / "b" / "signature.json", signature_path(study))
    with pytest.raises(SigningError, match="a signature for 'bundle', not for 'study lock'"):
        lock_signature(study, mine.public)
