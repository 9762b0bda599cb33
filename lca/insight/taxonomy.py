"""What an established schema changes first: a taxonomy tag on the records it covers.

A record is covered by an established schema when it is one of the schema's members, or when its current signature
fits the schema's cue and holds its prediction (``lca.insight.schema_gates.prediction_for``, the test anticipation
counts right): so a record signed after the schema was established is tagged by the next refresh. The tags are
derived data, ``<store>/insight/taxonomy.json``, rewritten whole from the ledger's established schemas and the
stored signatures, sorted and without a time in it (a rebuild writes the same bytes). The integration cycle
refreshes it after it signs the records, and so does every schema transition from ``lca schema``; a deprecated
schema's tags go at the next refresh.

The tags are shown (``lca insights show`` and ``taxonomy``, ``lca recall --json`` and ``--explain``); recall does
not rank by them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import RecordFormatError
from lca.fileio import atomic_write_bytes
from lca.insight.review import current_signatures
from lca.insight.schema_gates import SchemaGateConfig, prediction_for
from lca.insight.signatures import signature_features, signature_from_json
from lca.insight.store import InsightRecord, insight_records
from lca.layout import StoreLayout
from lca.ledger import Ledger

TAXONOMY_VERSION = 1


@dataclass(frozen=True)
class SchemaTag:
    """One established schema (and version) covering a record, and how: ``member`` or ``predicted``."""

    schema: str
    version: int
    how: str


def refresh_taxonomy(
    home: Path | str, *, records: Sequence[InsightRecord] | None = None, config: SchemaGateConfig | None = None
) -> dict[str, tuple[SchemaTag, ...]]:
    """Rewrite the taxonomy file from the ledger's established schemas and the records' current signatures; return
    each covered record's tags."""
    config = config or SchemaGateConfig()
    records = insight_records(home)[0] if records is None else records
    schemas = sorted(
        (s for s in Ledger(home).state().schemas.values() if s.state == "established" and s.features),
        key=lambda s: s.id,
    )
    signed = current_signatures(home, records)
    features = {rid: signature_features(signature_from_json(row.signature)) for rid, row in signed.items()}
    tags: dict[str, list[SchemaTag]] = {}
    for schema in schemas:
        for record in records:
            if record.id in schema.members:
                how = "member"
            elif record.id in features and prediction_for(schema.features, features[record.id], config=config):
                how = "predicted"
            else:
                continue
            tags.setdefault(record.id, []).append(SchemaTag(schema.id, schema.version, how))
    document = {
        "version": TAXONOMY_VERSION,
        "schemas": {s.id: {"version": s.version, "description": s.description} for s in schemas},
        "records": {rid: [t.__dict__ for t in tags[rid]] for rid in sorted(tags)},
    }
    path = StoreLayout(home).insight_taxonomy
    atomic_write_bytes(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return {rid: tuple(t) for rid, t in tags.items()}


def record_taxonomy(home: Path | str) -> dict[str, tuple[SchemaTag, ...]]:
    """Each record's tags as the last refresh wrote them (empty before any)."""
    path = StoreLayout(home).insight_taxonomy
    if not path.exists():
        return {}
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
        return {rid: tuple(SchemaTag(**t) for t in rows) for rid, rows in raw["records"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordFormatError(
            f"not a taxonomy file ({exc}); lca integrate rewrites it from the ledger and the signatures",
            path=str(path),
        ) from None


def tags_of(source: str, taxonomy: dict[str, tuple[SchemaTag, ...]]) -> list[str]:
    """A recall source's tags as ``schema vN``: a memory's (``memory:<id>[...]``), none for a transcript turn."""
    if not source.startswith("memory:"):
        return []
    memory_id = source[len("memory:") :].split("[", 1)[0]
    return [f"{t.schema} v{t.version}" for t in taxonomy.get(memory_id, ())]
