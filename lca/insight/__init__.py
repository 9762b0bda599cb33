"""Living Memory's insight engine: structural signatures, the dual-space differential, the integration cycle.

``integrate`` is the API of one cycle (``lca integrate`` from the shell; its hot-cycle probes in
``lca.insight.probe``); ``review_queue`` and ``insight_detail`` read what it surfaced (``lca insights``).
docs/insight.md says what runs, what is configuration and what is not built yet.
"""

from lca.insight.centrality import Centrality, CentralityConfig, record_centrality, refresh_centrality
from lca.insight.cycle import IntegrationConfig, IntegrationResult, integrate
from lca.insight.differential import DIFFERENTIAL_COMPOSITIONS, DifferentialConfig
from lca.insight.distill import SIGNATURE_PROMPT_VERSION, DistillReport, SummarizerSigner, distill
from lca.insight.null_model import NullModel, null_threshold
from lca.insight.probe import HotRecord, ProbeReport
from lca.insight.queue import QueueItem, insight_detail, refute, review_queue
from lca.insight.reconcile import PROBE_TYPE, InsightCandidate, Reconciliation, reconcile
from lca.insight.signatures import SIGNATURE_JSON_SCHEMA, StructuralSignature, validate_signature
from lca.insight.store import InsightRecord, SignatureStore, insight_records

__all__ = [
    "DIFFERENTIAL_COMPOSITIONS",
    "SIGNATURE_JSON_SCHEMA",
    "PROBE_TYPE",
    "SIGNATURE_PROMPT_VERSION",
    "Centrality",
    "CentralityConfig",
    "DifferentialConfig",
    "DistillReport",
    "HotRecord",
    "InsightCandidate",
    "InsightRecord",
    "IntegrationConfig",
    "IntegrationResult",
    "NullModel",
    "ProbeReport",
    "QueueItem",
    "Reconciliation",
    "SignatureStore",
    "StructuralSignature",
    "SummarizerSigner",
    "distill",
    "insight_detail",
    "insight_records",
    "integrate",
    "null_threshold",
    "reconcile",
    "record_centrality",
    "refresh_centrality",
    "refute",
    "review_queue",
    "validate_signature",
]
