"""Which code wrote a store: the package version plus the git revision when run from a checkout."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from lca import __version__

# Not code: the study documents, their locks and deviations logs (preregistration/) carry their own integrity, a
# sha256 lock per document, and a confirmatory run appends to a deviations log by design, so a checkout whose only
# change is there still runs the committed code.
NOT_CODE = (":(exclude)preregistration",)


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """This checkout's ``checkout_version``, computed once per process (the CLI reads it as a command starts)."""
    return checkout_version(Path(__file__).resolve().parent.parent)


def checkout_version(repo: Path) -> str:
    """``<version>+g<revision>`` for a git checkout, with ``.dirty`` when tracked files differ from the revision
    (the pre-registrations excepted, ``NOT_CODE``); the package version elsewhere."""
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
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{rev}{'.dirty' if dirty else ''}"


def version_order(version: str, running: str) -> int | None:
    """Whether ``version`` is older (-1), the same (0) or later (1) than ``running``; None when that cannot be told
    (a prerelease tag, two dirty trees of one revision, or revisions the checkout does not hold or that diverge).
    Package versions compare by their release numbers; equal ones by git ancestry of their ``+g<revision>``."""
    if version == running:
        return 0
    (public, _, local), (running_public, _, running_local) = version.partition("+"), running.partition("+")
    release, running_release = _release(public), _release(running_public)
    if release is None or running_release is None:
        return None
    if public != running_public:
        width = max(len(release), len(running_release))
        ours, theirs = release + (0,) * (width - len(release)), running_release + (0,) * (width - len(running_release))
        if ours == theirs:
            return None  # same numbers, different tags (0.1.0rc1 and 0.1.0): not told here
        return -1 if ours < theirs else 1
    revision, running_revision = _revision(local), _revision(running_local)
    if revision is None or running_revision is None or revision == running_revision:
        return None  # no revision recorded, or one revision with different uncommitted changes
    if _is_ancestor(revision, running_revision):
        return -1
    if _is_ancestor(running_revision, revision):
        return 1
    return None


def _release(public: str) -> tuple[int, ...] | None:
    parts = public.split(".")
    digits = [p for p in parts if p.isdigit()]
    return tuple(int(p) for p in digits) if digits and parts[: len(digits)] == digits else None


def _revision(local: str) -> str | None:
    head = local.split(".")[0]
    return head[1:] if head.startswith("g") and len(head) > 1 else None


@functools.lru_cache(maxsize=64)
def _is_ancestor(older: str, newer: str) -> bool:
    """``older`` is a strict ancestor of ``newer`` in this checkout's history (False without a checkout)."""
    repo = Path(__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        return False
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer],
            capture_output=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
