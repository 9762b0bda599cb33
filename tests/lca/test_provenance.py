"""Which code wrote a store: the package version, plus the git revision from a checkout."""

from __future__ import annotations

import re
from pathlib import Path

from lca import __version__
from lca.provenance import code_version

REPO = Path(__file__).resolve().parents[2]


def test_code_version_is_the_package_version_plus_the_revision_in_a_checkout():
    version = code_version()
    assert version.startswith(__version__)
    if (REPO / ".git").exists():
        assert re.fullmatch(re.escape(__version__) + r"\+g[0-9a-f]{7,12}(\.dirty)?", version)
    assert code_version() is version  # computed once per process
