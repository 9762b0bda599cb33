"""What every ``lca`` command shares: where the store is, opening it, and how errors and stored text read.

Every error a user can cause reaches the shell as one line, ``lca: error: ...``, with exit status 2
(``main`` catches ``LCAError`` and ``FileNotFoundError``; ``lca.params.ParameterError`` is an ``LCAError``).

A path *holds a store* when ``StoreLayout.holds_store`` says so: it has a transcript (``sessions/``), memory
files (``memory/``), a derived index (``index/``) or learned-state event logs (``events/``); settings alone
(``recall.yaml``) are not a store. Reading commands refuse a path that holds none and create nothing there (a
mistyped ``--store`` is an error, not an empty result); only the commands that write (``ingest``,
``checkpoint``, ``schema``, ``identity set``) create a store, by creating its ``sessions/`` folder, and say so
on stderr. A command declares which it is with ``set_defaults(creates_store=True)``; the default is to read.
"""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

from lca.errors import LCAError
from lca.layout import StoreLayout

HOME_ENV = "LCA_HOME"
USAGE_ERROR = 2
# format characters a script needs to render (zero-width non-joiner and joiner, as in emoji sequences)
_KEPT_FORMAT_CHARACTERS = frozenset("\u200c\u200d")


def store_path(args: argparse.Namespace) -> Path:
    """``--store``, else ``$LCA_HOME``, else ``./.lca``."""
    if getattr(args, "store", None):
        return Path(args.store)
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    return Path(".lca")


def _store_source(args: argparse.Namespace) -> str:
    if getattr(args, "store", None):
        return "--store"
    return f"${HOME_ENV}" if os.environ.get(HOME_ENV) else "the default ./.lca"


def checked_store_path(args: argparse.Namespace) -> Path:
    """The command's store path once it is known to hold a store. A reading command refuses a path that holds
    none (naming it and where it came from) and creates nothing; a writing command (``args.creates_store``)
    creates the store there and says so on stderr."""
    path = store_path(args)
    source = _store_source(args)
    if path.exists() and not path.is_dir():
        raise LCAError(f"store path {path} (from {source}) is not a folder")
    layout = StoreLayout(path)
    if layout.holds_store():
        return path
    if not getattr(args, "creates_store", False):
        raise LCAError(
            f"no store at {path} (from {source}): it has no sessions/, memory/, index/ or events/ folder; "
            "check the path (`lca ingest` creates a store)"
        )
    try:
        layout.sessions.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LCAError(f"cannot create a store at {path} (from {source}): {exc.strerror}") from None
    print(f"lca: created a new store at {path}", file=sys.stderr)
    return path


def open_store(args: argparse.Namespace, *, progress: bool = False):
    """The substrate at the command's store, checked first (``checked_store_path``), with the embedder the store
    records (``lca.index.embedder_choice``) or the one ``--embedder`` names: ``lca reindex --embedder`` switches
    a store to it, any other command refuses one the store was not built with. Tests replace this function to
    open a store with fakes."""
    from lca.index.embedder_choice import embedder_source, make_embedder, recorded_embedder
    from lca.substrate import Substrate  # loads the index (faiss): not for `lca --help`

    asked = getattr(args, "embedder", None)
    source = embedder_source(asked) if asked else None  # an unknown name is refused before the store is touched
    path = checked_store_path(args)
    recorded = recorded_embedder(StoreLayout(path)).get("embedder_source")
    if source and recorded and source != recorded and not getattr(args, "switches_embedder", False):
        raise LCAError(
            f"the store at {path} was built with the embedder '{recorded}', not '{source}': reindex required "
            f"(`lca reindex --embedder {source}` re-embeds it)"
        )
    name = source or recorded
    return Substrate(path, progress=progress, embedder=make_embedder(name) if name else None)


def terminal_safe(text: object) -> str:
    """``text`` with every control, format (bidi overrides, invisible tags) and separator character shown as
    a visible escape (``\\x1b``, ``\\u202e``), so stored text cannot move the cursor, recolour the terminal
    or reorder what is printed around it. Newlines and tabs stay; the stored text itself is never changed."""
    out = []
    for char in str(text):
        if char in "\n\t":
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Zl", "Zp") or (category == "Cf" and char not in _KEPT_FORMAT_CHARACTERS):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def show(text: object = "", *, end: str = "\n") -> None:
    """Print text that may hold stored content on stdout, through ``terminal_safe``."""
    print(terminal_safe(text), end=end)


def at_least(value: int | None, minimum: int, *, flag: str) -> None:
    """Refuse a count below ``minimum`` in one line naming the flag (None: the flag was not given)."""
    if value is not None and value < minimum:
        raise LCAError(f"{flag} must be at least {minimum}, not {value}")


def os_error_line(exc: OSError) -> str:
    """An operating-system error as ``PATH: what went wrong`` ("nope.yaml: no such file or directory")."""
    if exc.strerror is None:  # raised with a message of its own ("nope.json: no such file"): that message
        return str(exc) or type(exc).__name__
    return f"{exc.filename}: {exc.strerror.lower()}" if exc.filename else exc.strerror.lower()


def print_error(message: object) -> int:
    """Print ``lca: error: MESSAGE`` on stderr (through ``terminal_safe``); returns the usage-error status."""
    print(f"lca: error: {terminal_safe(message)}", file=sys.stderr)
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
