"""Schemas that earn their place: proposed from the records they organize, established only on measured evidence.

``propose_schema`` records a schema with what it claims to organize: its member records (an insight hypothesis's,
or named ones) and its features, the signature features a strict majority of its members share
(``lca.insight.signatures.signature_features``). ``measure_schema`` measures its evidence gates
(``lca.insight.schema_gates``) from the store's logs and records; ``establish_schema`` passes that measurement to
the ledger's state machine, which refuses trial -> established without a named approver or with a failed gate,
naming the failed gates, and records the evidence with the transition. ``start_trial`` does the same for
candidate -> trial: a schema proposed from an insight goes on trial when the insight passes its trial gates
(``lca.insight.trial_gate``: differential, review survival, trajectory), one proposed from no insight when a named
person puts it there.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from lca.activation import RetrievalLog
from lca.errors import LCAError
from lca.experience import ExperienceLog
from lca.insight.reconcile import INSIGHT_TYPES, MEMBER_PREFIX
from lca.insight.review import current_signatures
from lca.insight.schema_gates import (
    USE_KINDS,
    SchemaEvidenceReport,
    SchemaGateConfig,
    anticipation,
    compression,
    retrieval_lift,
)
from lca.insight.signatures import StructuralSignature, signature_features, signature_from_json
from lca.insight.store import insight_records
from lca.insight.trial_gate import TrialGateConfig, TrialGateReport, trial_gates
from lca.ledger import Ledger, Schema
from lca.memory import MemoryStore
from lca.types import as_utc


def shared_features(signatures: Sequence[StructuralSignature]) -> frozenset[str]:
    """The features held by more than half of ``signatures`` (by both of two)."""
    counted = Counter(f for s in signatures for f in signature_features(s))
    return frozenset(f for f, n in counted.items() if 2 * n > len(signatures))


def propose_schema(
    home: Path | str,
    schema_id: str,
    description: str,
    *,
    insight: str | None = None,
    records: Iterable[str] = (),
) -> Schema:
    """Propose a schema over an insight hypothesis's records and/or the named ones, with the features a majority of
    their current signatures share (run ``lca integrate`` first: the records must be signed)."""
    members = set(records)
    if insight is not None:
        h = Ledger(home).state().hypotheses.get(insight)
        if h is None or h.type not in INSIGHT_TYPES:
            raise LCAError(f"no insight hypothesis {insight!r} in the ledger (lca insights list shows them)")
        members |= {m[len(MEMBER_PREFIX) :] for m in h.members if m.startswith(MEMBER_PREFIX)}
    if len(members) < 2:
        raise LCAError(f"schema '{schema_id}': a schema organizes at least two records, got {sorted(members)}")
    current, _ = insight_records(home)
    signed = current_signatures(home, [r for r in current if r.id in members])
    missing = sorted(members - set(signed))
    if missing:
        raise LCAError(
            f"schema '{schema_id}': no current signature for {', '.join(missing)} (lca integrate signs the records)"
        )
    features = shared_features([signature_from_json(signed[m].signature) for m in sorted(members)])
    if not features:
        raise LCAError(f"schema '{schema_id}': its records share no signature feature")
    details = {"members": sorted(members), "features": sorted(features), "insight": insight}
    return Ledger(home).schema_event("schema_proposed", schema_id, description=description, details=details)


def measure_schema(
    home: Path | str, schema_id: str, config: SchemaGateConfig | None = None, *, now: float | None = None
) -> SchemaEvidenceReport:
    """The schema's evidence gates, measured over what happened since this version was proposed."""
    config = config or SchemaGateConfig()
    schema = Ledger(home).state().schemas.get(schema_id)
    if schema is None:
        raise LCAError(f"no schema {schema_id!r} in the ledger")
    since = schema.proposed_at or 0.0
    loaded = MemoryStore(home).load()
    records, _ = insight_records(home, loaded=loaded)
    features = {
        rid: signature_features(signature_from_json(row.signature))
        for rid, row in current_signatures(home, records).items()
    }
    vocabulary = frozenset().union(*features.values()) if features else frozenset()
    members = set(schema.members)
    current = {r.id for r in records}
    written = {m.record.id: as_utc(m.record.created).timestamp() for m in loaded.files if m.record.id in current}
    later = {rid: features.get(rid) for rid, at in written.items() if at >= since and rid not in members}
    accesses = [a for history in RetrievalLog(home, record=False).by_target().values() for a in history]
    gates = (
        retrieval_lift(members, accesses, ExperienceLog(home).events(USE_KINDS), since=since, config=config),
        anticipation(schema.features, later, config=config),
        compression(schema.features, {m: features.get(m) for m in sorted(members)}, vocabulary, config=config),
    )
    return SchemaEvidenceReport(
        schema_id, schema.version, schema.proposed_at, time.time() if now is None else now, gates
    )


def establish_schema(
    home: Path | str, schema_id: str, *, approver: str | None, config: SchemaGateConfig | None = None
) -> tuple[Schema, SchemaEvidenceReport]:
    """trial -> established with a named approver and the gates measured now; the ledger refuses a failed gate."""
    report = measure_schema(home, schema_id, config)
    schema = Ledger(home).schema_event("schema_established", schema_id, approver=approver, evidence=report)
    return schema, report


def measure_trial(home: Path | str, schema_id: str, config: TrialGateConfig | None = None) -> TrialGateReport:
    """The trial gates of the insight a candidate schema was proposed from, read off the ledger."""
    state = Ledger(home).state()
    schema = state.schemas.get(schema_id)
    if schema is None:
        raise LCAError(f"no schema {schema_id!r} in the ledger")
    if not schema.insight:
        raise LCAError(f"schema '{schema_id}' was proposed from no insight: a named approver puts it on trial")
    h = state.hypotheses.get(schema.insight)
    if h is None:
        raise LCAError(f"schema '{schema_id}': its insight {schema.insight!r} is not in the ledger")
    return trial_gates(schema_id, h, config)


def start_trial(
    home: Path | str, schema_id: str, *, approver: str | None = None, config: TrialGateConfig | None = None
) -> tuple[Schema, TrialGateReport | None]:
    """candidate -> trial: with the insight's trial gates measured now (the ledger refuses a failed one), or for a
    schema proposed from no insight with a named ``approver`` (the ledger refuses none)."""
    schema = Ledger(home).state().schemas.get(schema_id)
    report = measure_trial(home, schema_id, config) if schema is not None and schema.insight else None
    moved = Ledger(home).schema_event("schema_trial", schema_id, approver=approver, evidence=report)
    return moved, report
