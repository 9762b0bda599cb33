"""Living Memory's insight engine: structural signatures, the dual-space differential, the integration cycle.

``integrate`` is the API of one cycle (``lca integrate`` from the shell; its hot-cycle probes in
``lca.insight.probe``); ``review_queue`` and ``insight_detail`` read what it surfaced (``lca insights``);
``lca.insight.review`` runs the adversarial lenses (``lca.insight.lenses``) on it and ``recovery_gauge`` reads the
ledger's recovery rate; ``lca.insight.schemas`` proposes schemas over records and establishes them only on
measured evidence (``lca.insight.schema_gates``).
docs/insight.md says what runs, what is configuration and what is not built yet.
"""

from lca.insight.centrality import Centrality, CentralityConfig, record_centrality, refresh_centrality
from lca.insight.cycle import IntegrationConfig, IntegrationResult, integrate
from lca.insight.differential import DIFFERENTIAL_COMPOSITIONS, DifferentialConfig
from lca.insight.distill import SIGNATURE_PROMPT_VERSION, DistillReport, SummarizerSigner, distill
from lca.insight.lenses import (
    EvidenceIndependenceLens,
    LensVerdict,
    MemberEvidence,
    ReviewEvidence,
    ReviewLens,
    StructuralSoundnessLens,
    VocabularyCoincidenceLens,
)
from lca.insight.null_model import NullModel, null_threshold
from lca.insight.probe import HotRecord, ProbeReport
from lca.insight.queue import QueueItem, insight_detail, refute, review_queue
from lca.insight.reconcile import PROBE_TYPE, InsightCandidate, Reconciliation, reconcile
from lca.insight.recovery import RecoveryGauge, recovery_gauge
from lca.insight.review import COMBINATION_RULES, ReviewConfig, ReviewOutcome, review, review_store
from lca.insight.schema_gates import GateResult, SchemaEvidenceReport, SchemaGateConfig
from lca.insight.schemas import establish_schema, measure_schema, propose_schema
from lca.insight.signatures import SIGNATURE_JSON_SCHEMA, StructuralSignature, validate_signature
from lca.insight.store import InsightRecord, SignatureStore, insight_records

__all__ = [
    "COMBINATION_RULES",
    "DIFFERENTIAL_COMPOSITIONS",
    "PROBE_TYPE",
    "SIGNATURE_JSON_SCHEMA",
    "SIGNATURE_PROMPT_VERSION",
    "Centrality",
    "CentralityConfig",
    "DifferentialConfig",
    "DistillReport",
    "EvidenceIndependenceLens",
    "GateResult",
    "HotRecord",
    "InsightCandidate",
    "InsightRecord",
    "IntegrationConfig",
    "IntegrationResult",
    "LensVerdict",
    "MemberEvidence",
    "NullModel",
    "ProbeReport",
    "QueueItem",
    "Reconciliation",
    "RecoveryGauge",
    "ReviewConfig",
    "ReviewEvidence",
    "ReviewLens",
    "ReviewOutcome",
    "SchemaEvidenceReport",
    "SchemaGateConfig",
    "SignatureStore",
    "StructuralSignature",
    "StructuralSoundnessLens",
    "SummarizerSigner",
    "VocabularyCoincidenceLens",
    "distill",
    "establish_schema",
    "insight_detail",
    "insight_records",
    "integrate",
    "measure_schema",
    "null_threshold",
    "propose_schema",
    "reconcile",
    "record_centrality",
    "recovery_gauge",
    "refresh_centrality",
    "refute",
    "review",
    "review_queue",
    "review_store",
    "validate_signature",
]
