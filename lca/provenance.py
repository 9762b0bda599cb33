"""Which code wrote a store: the package version plus the git revision when run from a checkout."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from lca import __version__


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    repo = Path(__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        return __version__
    try:
        rev = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{rev}{'.dirty' if dirty else ''}"
