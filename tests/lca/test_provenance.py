"""Which code wrote a store: the package version, plus the git revision from a checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lca import __version__
from lca.provenance import code_version

REPO = Path(__file__).resolve().parents[2]


def test_code_version_is_the_package_version_plus_the_revision_in_a_checkout():
    version = code_version()
    assert version.startswith(__version__)
    if (REPO / ".git").exists():
        assert re.fullmatch(re.escape(__version__) + r"\+g[0-9a-f]{7,12}(\.dirty)?", version)
    assert code_version() is version  # computed once per process


def test_versions_order_by_release_and_say_when_they_cannot_be_ordered():
    from lca.provenance import version_order

    running = code_version()
    assert version_order(running, running) == 0
    assert version_order("0.0.1+g000000000000", "0.1.0+gabcdef123456") == -1
    assert version_order("0.2", "0.1.9+gabcdef123456") == 1 and version_order("0.1", "0.1.0.1") == -1
    assert version_order("0.1.0+gabc", "0.1.0+gabc.dirty") is None  # one revision, other uncommitted changes
    assert version_order("0.1.0rc1", "0.1.0") is None and version_order("lca elsewhere", running) is None
    assert version_order("0.1.0", "0.1.0+gabc") is None  # no revision recorded


def test_one_release_orders_by_git_ancestry_in_a_checkout():
    import subprocess

    from lca.provenance import version_order

    revs = subprocess.run(
        ["git", "-C", str(REPO), "rev-list", "--max-count=2", "--abbrev=12", "--abbrev-commit", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.split()
    if len(revs) < 2:
        pytest.skip("not a git checkout with history: nothing to order by ancestry")
    head, parent = (f"{__version__}+g{r}" for r in revs)
    assert version_order(parent, head) == -1 and version_order(head, parent) == 1
    assert version_order(head, f"{__version__}+g0123456789ab") is None  # a revision this checkout does not hold


def test_a_checkout_is_dirty_for_a_code_change_but_not_for_its_pre_registrations(tmp_path):
    import subprocess

    from lca.provenance import checkout_version

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "preregistration").mkdir()
    log = tmp_path / "preregistration" / "pilot.deviations.jsonl"
    log.write_text('{"kind": "relock"}\n')
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    clean = checkout_version(tmp_path)
    assert re.fullmatch(re.escape(__version__) + r"\+g[0-9a-f]{12}", clean)
    with log.open("a") as handle:
        handle.write('{"kind": "data_missing"}\n')
    assert checkout_version(tmp_path) == clean  # the run's own record is not a code change
    (tmp_path / "preregistration" / "pilot.yaml").write_text("id: pilot\n")
    git("add", "preregistration")
    assert checkout_version(tmp_path) == clean  # nor a study document (its lock carries its own sha256)
    (tmp_path / "code.py").write_text("x = 2\n")
    assert checkout_version(tmp_path) == clean + ".dirty"
    assert checkout_version(tmp_path / "preregistration") == __version__  # not the root of a checkout
