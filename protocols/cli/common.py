"""What every ``lca`` command shares: where the store is, opening it, and how errors read.

Every error a user can cause reaches the shell as one line, ``lca: error: ...``, with exit status 2
(``main`` catches ``LCAError`` and ``FileNotFoundError``; ``lca.params.ParameterError`` is an ``LCAError``).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from lca.errors import LCAError

HOME_ENV = "LCA_HOME"
USAGE_ERROR = 2


def store_path(args: argparse.Namespace) -> Path:
    """``--store``, else ``$LCA_HOME``, else ``./.lca``."""
    if getattr(args, "store", None):
        return Path(args.store)
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    return Path(".lca")


def open_store(args: argparse.Namespace, *, progress: bool = False):
    """The substrate at the command's store (tests replace this function to open a store with fakes)."""
    from lca.substrate import Substrate

    return Substrate(store_path(args), progress=progress)


def print_error(message: object) -> int:
    """Print ``lca: error: MESSAGE`` on stderr; returns the usage-error status to exit with."""
    print(f"lca: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def moment(text: str) -> float:
    """Epoch seconds from epoch seconds or an ISO 8601 time (UTC when it names no zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LCAError(f"'{text}' is neither epoch seconds nor an ISO 8601 time") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
