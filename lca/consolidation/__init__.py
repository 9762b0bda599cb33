"""Layer 5: the consolidation cycle, with an independent verification stage.

One cycle reads the transcript written since the last checkpoint and turns it into durable
memory in six steps (docs/consolidation.md):

1. identify candidates: a writer generator call per window of the span, each candidate
   citing the numbered lines it rests on (``cycle``);
2. search existing memory for each candidate, so a near-duplicate updates the memory it
   repeats and related memories (same entities) are put before the reviewer (``review``);
3. verify: a reviewer generator call that sees only the candidate, the memories it touches
   and the cited source lines, told to refute rather than confirm, reasoning before verdict.
   A contradiction rejects the candidate or supersedes the older memory (never silent
   coexistence); a claim its sources do not support is downgraded to a labeled inference
   or removed (``review``);
4. procedural writes pass the approval gate (``MemoryStore.write``): without a named
   approver they are held as proposals (``writing``; applied later by ``approvals``);
5. write under the store's writer lock, archive what is replaced, log to the ledger and the
   transcript, index, and read every written memory back through recall from its own text
   (``writing``, ``cycle``);
6. leave a handoff when compaction may follow.

Beside the candidates, the writer may propose that a later line of its window corrects or replaces an
earlier one; each proposal is checked against the sources and by the reviewer, and what passes is a
replacement event in the ledger (``replacements``; lca.events).

Generator failures (malformed output, timeouts, refusals) are recorded per stage and the
candidates they touch are not written; a memory folder with invalid files is refused.
The prompts are in ``prompts``, the answer parsers in ``parsing``, the records in ``records``;
the cycle is handed its stores (``stores.CycleStores``) by the facade, lca.substrate.
"""

from __future__ import annotations

from lca.consolidation.approvals import ProposalStore, approve_proposal, pending_proposals
from lca.consolidation.cycle import Consolidator
from lca.consolidation.parsing import lexical_support, parse_review, parse_writer_output
from lca.consolidation.prompts import PROMPT_VERSION
from lca.consolidation.records import (
    CANDIDATE_TYPES,
    Candidate,
    ConsolidationConfig,
    ConsolidationRefused,
    ConsolidationResult,
    ConsolidationTrigger,
    Failure,
    Plan,
    ReadBack,
    ReplacementCheck,
    SpanLine,
    Verdict,
    Write,
)
from lca.consolidation.stores import CycleStores
from lca.token_windows import windows_by_tokens  # kept importable from here; its home is lca.token_windows

__all__ = [
    "CANDIDATE_TYPES",
    "PROMPT_VERSION",
    "Candidate",
    "ConsolidationConfig",
    "ConsolidationRefused",
    "ConsolidationResult",
    "ConsolidationTrigger",
    "Consolidator",
    "CycleStores",
    "Failure",
    "Plan",
    "ProposalStore",
    "ReadBack",
    "ReplacementCheck",
    "SpanLine",
    "Verdict",
    "Write",
    "approve_proposal",
    "lexical_support",
    "parse_review",
    "parse_writer_output",
    "pending_proposals",
    "windows_by_tokens",
]
