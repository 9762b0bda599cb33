"""Locking a study, checking the lock and the deviations log, through ``lca prereg`` (``protocols.cli.main``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from lca.errors import LCAError, RecordFormatError
from lca.provenance import code_version
from protocols.cli import main
from protocols.study import (
    StudyNotLockedError,
    deviations_path,
    lock_path,
    lock_status,
    read_deviations,
    read_lock,
    record_deviation,
    require_locked,
)
from tests.study.conftest import PILOT


def lca(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["prereg", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_shipped_pilot_is_locked_as_it_stands():
    status = lock_status(PILOT)
    assert status.state == "locked", status.detail
    assert status.lock is not None and status.lock.study_id == "hollow_copy_pilot"
    assert status.lock.sha256 == hashlib.sha256(PILOT.read_bytes()).hexdigest()


def test_lock_check_edit_and_relock_with_a_reason(study, capsys):
    code, out, _ = lca(capsys, "check", study)
    assert code == 1 and "unlocked" in out and "lca prereg lock" in out
    with pytest.raises(StudyNotLockedError, match="--exploratory"):
        require_locked(study, exploratory=False)
    assert require_locked(study, exploratory=True).state == "unlocked"

    code, out, _ = lca(capsys, "lock", study)
    assert code == 0 and f"written: {lock_path(study)}" in out
    record = json.loads(lock_path(study).read_text())
    assert set(record) == {"study_id", "sha256", "locked_at", "code_revision", "schema_version"}
    assert record["sha256"] == hashlib.sha256(study.read_bytes()).hexdigest()
    assert record["code_revision"] == code_version() and record["schema_version"] == 1
    assert record["study_id"] == "hollow_copy_pilot" and record["locked_at"].endswith("+00:00")
    code, out, _ = lca(capsys, "check", study)
    assert code == 0 and "locked at" in out and "0 deviation(s)" in out
    assert require_locked(study, exploratory=False).locked

    before = lock_path(study).read_bytes()
    code, out, _ = lca(capsys, "lock", study)
    assert code == 0 and "already locked" in out and lock_path(study).read_bytes() == before

    edited = study.read_text().replace("limit: 8\n", "limit: 24\n", 1)
    assert edited != study.read_text()  # a real edit of the design
    study.write_text(edited)
    code, out, _ = lca(capsys, "check", study)
    assert code == 1 and "edited since it was locked" in out
    with pytest.raises(StudyNotLockedError, match="edited since it was locked"):
        require_locked(study, exploratory=False)
    assert require_locked(study, exploratory=True).state == "edited"

    code, _, err = lca(capsys, "lock", study)
    assert code == 2 and "--relock --reason" in err and lock_path(study).read_bytes() == before
    code, _, err = lca(capsys, "lock", study, "--relock")
    assert code == 2 and "needs --reason" in err and lock_path(study).read_bytes() == before
    assert read_deviations(study) == []

    code, out, _ = lca(capsys, "lock", study, "--relock", "--reason", "one scenario per domain", "--by", "ana")
    assert code == 0
    new = read_lock(study)
    assert new.sha256 == hashlib.sha256(study.read_bytes()).hexdigest() != record["sha256"]
    (relock,) = read_deviations(study)
    assert relock.kind == "relock" and relock.why == "one scenario per domain" and relock.by == "ana"
    assert record["sha256"] in relock.what and new.sha256 in relock.what
    code, out, _ = lca(capsys, "check", study)
    assert code == 0 and "1 deviation(s)" in out


def test_relock_of_a_study_never_locked_is_refused(study, capsys):
    code, _, err = lca(capsys, "lock", study, "--relock", "--reason", "x")
    assert code == 2 and "not locked yet" in err and not lock_path(study).exists()


def test_an_invalid_study_is_not_locked(study, capsys):
    study.write_text(study.read_text().replace("margin: 0.10", "margin: 0", 1))
    code, _, err = lca(capsys, "lock", study)
    assert code == 2 and "field 'predictions.7.margin'" in err and str(study) in err
    assert not lock_path(study).exists()


def test_check_prints_json(study, capsys):
    lca(capsys, "lock", study)
    code, out, _ = lca(capsys, "check", study, "--json")
    status = json.loads(out)
    assert code == 0 and status["state"] == "locked" and status["study"] == "hollow_copy_pilot"
    assert status["lock"]["sha256"] == status["sha256"] and status["deviations"] == 0


def test_a_damaged_lock_is_an_error_not_a_pass(study, capsys):
    lock_path(study).write_text('{"study_id": "hollow_copy_pilot"}')
    code, _, err = lca(capsys, "check", study)
    assert code == 2 and "a lock holds exactly" in err


def test_deviations_append_and_read_back_in_order(study, capsys):
    code, out, _ = lca(capsys, "deviate", study, "--what", "used the LoCoMo fixture", "--why", "file absent")
    assert code == 0 and "recorded deviation" in out
    record_deviation(study, "dropped probe se-18-001:p3", "its task errored", by="runner", kind="exclusion")
    code, _, _ = lca(capsys, "deviate", study, "--what", "w", "--why", "y", "--kind", "data_missing", "--by", "bo")
    first, second, third = read_deviations(study)
    assert (first.kind, first.what, first.why) == ("deviation", "used the LoCoMo fixture", "file absent")
    assert (second.kind, second.by) == ("exclusion", "runner")
    assert (third.kind, third.by) == ("data_missing", "bo")
    assert first.by  # the login when --by is not given
    assert len(deviations_path(study).read_text().splitlines()) == 3


def test_a_deviation_needs_what_and_why_and_a_known_kind(study, capsys):
    with pytest.raises(LCAError, match="non-empty 'why'"):
        record_deviation(study, "something", "  ")
    with pytest.raises(LCAError, match="unknown deviation kind 'whim'"):
        record_deviation(study, "something", "because", kind="whim")
    with pytest.raises(SystemExit) as caught:  # argparse refuses it: a relock is recorded by `lca prereg lock`
        lca(capsys, "deviate", study, "--what", "x", "--why", "y", "--kind", "relock")
    assert caught.value.code == 2 and "invalid choice: 'relock'" in capsys.readouterr().err
    assert not deviations_path(study).exists()


def test_a_malformed_deviation_line_is_reported_with_its_line_number(study, capsys):
    record_deviation(study, "first", "ok")
    log = deviations_path(study)
    with log.open("a", encoding="utf-8") as handle:
        handle.write('{"at": "2026-01-01T00:00:00+00:00", "what": "cut\n')
    with pytest.raises(RecordFormatError) as caught:
        read_deviations(study)
    assert caught.value.line == 2 and str(log) in str(caught.value) and "line 2" in str(caught.value)
    code, _, err = lca(capsys, "check", study)
    assert code == 2 and "line 2" in err

    lines = log.read_text().splitlines()
    lines[1] = json.dumps({"at": "t", "what": "w", "why": "y", "by": "b"})
    lines.append(json.dumps({"at": "t", "what": "w", "why": "y", "by": "b", "kind": "whim"}))
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordFormatError, match="line 2.*a deviation holds exactly"):
        read_deviations(study)
    lines[1] = json.dumps({"at": "t", "what": "w", "why": "y", "by": "b", "kind": "deviation"})
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordFormatError) as caught:
        read_deviations(study)
    assert caught.value.line == 3 and caught.value.field == "kind"
