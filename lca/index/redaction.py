"""Which secret detector vouches for a store's texts, so that what a search shows is scanned once, not per read.

Chunking redacts every text before the store holds it (``lca.index.chunker``). A write records the detector's
fingerprint (``lca.secrets.detector_fingerprint``) in the catalog's ``redacted_with`` after that detector found
nothing in the texts it adds; a store written before this was recorded, by two detectors, or given a text that
still holds a credential is ``mixed``. A search shows a stored text as it is only when the reading detector is
the one that vouched for every text (redaction is idempotent); otherwise it redacts each hit again. A recall
scans 50 candidates, ~60 microseconds each: most of what recall adds to a search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lca.index.catalog import Catalog
from lca.secrets import detector_fingerprint, find_secrets, redacted
from lca.types import SearchHit

MIXED = "mixed"


def vouch(catalog: Catalog, texts: Sequence[str]) -> None:
    """Before a write adds chunks with these new texts: keep, set or give up the store's fingerprint."""
    if not texts:
        return
    fingerprint = detector_fingerprint()
    if fingerprint is not None and any(find_secrets(text) for text in texts):
        fingerprint = None
    held = catalog.get_meta("redacted_with")
    if fingerprint is not None and held == fingerprint:
        return
    catalog.set_meta("redacted_with", fingerprint if _unwritten(catalog, held) and fingerprint is not None else MIXED)


def _unwritten(catalog: Catalog, held: str | None) -> bool:
    """No detector recorded and no chunk stored: the store's first write may vouch for all of it."""
    return held is None and not catalog.has_chunks()


def vouched(catalog: Catalog) -> bool:
    """Whether this process's detector vouched for every text the store holds."""
    fingerprint = detector_fingerprint()
    return fingerprint is not None and catalog.get_meta("redacted_with") == fingerprint


def state(catalog: Catalog) -> str:
    """``vouched`` (this process's detector scanned every text when written), ``empty`` (nothing written yet),
    ``other detector`` (one fingerprint, not this process's: the detector changed since), or ``mixed``."""
    if vouched(catalog):
        return "vouched"
    held = catalog.get_meta("redacted_with")
    if _unwritten(catalog, held):
        return "empty"
    return "other detector" if held not in (None, MIXED) else MIXED


def shown(catalog: Catalog, hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with texts fit to show: as stored where ``vouched``, else each redacted again."""
    if vouched(catalog):
        return hits
    return [replace(hit, text=redacted(hit.text)) for hit in hits]
