"""The typed records of a consolidation cycle: its span, candidates, verdicts, writes, failures and result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from lca.consolidation.prompts import PROMPT_VERSION
from lca.derived import derived_tree
from lca.errors import LCAError
from lca.memory import MemoryFile, MemoryRecord, MemoryType, Privacy
from lca.secrets import redacted
from lca.types import EntryKind

CANDIDATE_TYPES = {
    "fact": MemoryType.FACT,
    "decision": MemoryType.DECISION,
    "lesson": MemoryType.LESSON,
    "preference": MemoryType.PREFERENCE,
    "rule": MemoryType.PROCEDURE,
    "procedure": MemoryType.PROCEDURE,
}
SKIPPED_KINDS = {EntryKind.CHECKPOINT, EntryKind.HANDOFF, EntryKind.REASONING}
INSTRUCTION_TYPES = frozenset({"rule", "procedure", "preference"})
"""Candidate types that would bind the agent later: only the user sets them, so one resting on peer agents' messages
alone is dropped (another agent's words are an observation, never an instruction)."""


class ConsolidationTrigger(str, Enum):  # noqa: UP042 (StrEnum would change str() of a member)
    """Fixed triggers fire from the host's lifecycle; ``elected`` is an explicit call or `lca checkpoint`."""

    PRE_COMPACTION = "pre_compaction"
    SESSION_END = "session_end"
    CONTEXT_PRESSURE = "context_pressure"
    ELECTED = "elected"


class ConsolidationRefused(LCAError):
    """The cycle will not write: the memory folder is in a state it must not write over."""


@dataclass
class ConsolidationConfig:
    """Parameters of a cycle; plain values so a condition can name them."""

    window_tokens: int = 900  # transcript per writer call (the model's context is small)
    max_candidates: int = 24
    writer_max_tokens: int = 256
    reviewer_max_tokens: int = 200
    update_similarity: float = 0.88  # a candidate this close to a memory updates it
    related_similarity: float = 0.45  # memories this close (and sharing a key term) are "touched"
    related_k: int = 4
    min_lexical_support: float = 0.34
    unsupported: str = "downgrade"  # downgrade | remove
    privacy: str = "private"
    verify: bool = True  # False: the "consolidation without verification" ablation
    infer_replacements: bool = True  # False: the writer is not asked which turns replace which (an ablation)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.unsupported not in ("downgrade", "remove"):
            raise LCAError(f"unsupported must be 'downgrade' or 'remove', got {self.unsupported!r}")
        Privacy(self.privacy)


@dataclass(frozen=True)
class SpanLine:
    number: int
    session_id: str
    entry_id: str
    speaker: str
    text: str
    timestamp: str
    # the entry's meta (scenario events, channel, role): never shown to a model; not part of equality
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    peer_agent: bool = field(default=False, compare=False)  # a peer agent's message: an observation, never a rule


@dataclass(frozen=True)
class Candidate:
    id: str  # hypothesis id (stable per claim)
    type: str  # a CANDIDATE_TYPES key
    claim: str
    sources: tuple[tuple[str, str], ...]  # (session, entry) pairs cited
    lines: tuple[int, ...]
    window: int
    resurfaced_by: str | None = None  # a dormant hypothesis brought back by this candidate's evidence


@dataclass(frozen=True)
class Verdict:
    candidate: str
    verdict: str  # accept | reject | supersede | downgrade | remove | held | failed
    supported: bool
    lexical_support: float
    contradicts: str | None
    reasoning: str
    reasoning_first: bool
    reason: str  # the cycle's own account of the outcome
    touched: tuple[str, ...] = ()
    update_of: str | None = None
    earlier_refutations: int = 0
    raw: str = ""


@dataclass(frozen=True)
class Write:
    memory_id: str
    action: str  # created | updated | superseded | conflict_marked | held | approved
    candidate: str | None
    content_hash: str | None
    detail: str = ""


@dataclass(frozen=True)
class ReadBack:
    memory_id: str
    retrieved: bool
    rank: int | None
    detail: str


@dataclass(frozen=True)
class Failure:
    stage: str  # extract | verify | write | index | read_back | prevented | replacement
    kind: str  # malformed | timeout | refused | error | changed | unknown_memory ...
    message: str
    candidate: str | None = None
    raw: str = ""


@dataclass(frozen=True)
class ReplacementCheck:
    """A relation the writer proposed between two lines of its window ("line ``later`` corrects / replaces / adds
    to line ``earlier``") and what the verifier made of it (lca.consolidation.replacements)."""

    relation: str  # replaces | corrects | adds to (prompts.RELATIONS)
    later: int  # the line numbers the writer cited
    earlier: int
    why: str  # the writer's reason: the event's evidence
    window: int
    verdict: str  # accept | reject | refused | failed | known | adds_to
    reason: str  # the cycle's own account of the outcome
    of: str | None = None  # "<session>#<entry>" once both lines are turns the transcript holds
    by: str | None = None
    event: str | None = None  # lca.events.event_id(of, by)
    confidence: float | None = None  # what an accepted one was recorded with
    recorded: bool = False  # appended to the ledger as event_inferred by this cycle
    reasoning: str = ""  # the reviewer's
    raw: str = ""


@dataclass
class Plan:
    """What the review decided to do with one candidate; the write stage carries it out."""

    candidate: Candidate
    verdict: Verdict
    record: MemoryRecord | None = None
    body: str = ""
    supersede: MemoryFile | None = None
    conflict_on: MemoryFile | None = None
    base_hashes: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ConsolidationResult:
    """The typed record of one cycle."""

    cycle_id: str
    trigger: str
    started: float
    seconds: float
    writer_model: str
    reviewer_model: str | None
    verified: bool
    span: dict[str, dict[str, Any]]
    candidates: tuple[Candidate, ...]
    verdicts: tuple[Verdict, ...]
    writes: tuple[Write, ...]
    read_back: tuple[ReadBack, ...]
    failures: tuple[Failure, ...]
    experience_events: tuple[dict[str, Any], ...]
    handoff_entry: str | None
    repeats_merged: int = 0  # candidates folded into an earlier near-identical one of the same cycle
    prompt_version: str = PROMPT_VERSION
    replacements: tuple[ReplacementCheck, ...] = ()  # the writer's "this replaces that", checked

    @property
    def replacement_counts(self) -> dict[str, int]:
        """Proposed replacements (corrects or replaces; "adds to" is counted apart, as no replacement) by outcome:
        accepted, rejected (an order, a shared word or the reviewer said no), refused (a line the writer was not
        shown), failed (the reviewer's answer), known (the ledger held it), and how many this cycle recorded."""
        checks = self.replacements
        by = {v: sum(1 for c in checks if c.verdict == v) for v in ("accept", "reject", "refused", "failed", "known")}
        return {
            "proposed": sum(1 for c in checks if c.verdict != "adds_to"),
            "accepted": by["accept"],
            "rejected": by["reject"],
            "refused": by["refused"],
            "failed": by["failed"],
            "known": by["known"],
            "recorded": sum(1 for c in checks if c.recorded),
            "adds_to": sum(1 for c in checks if c.verdict == "adds_to"),
        }

    @property
    def counts(self) -> dict[str, Any]:
        by_verdict: dict[str, int] = {}
        for v in self.verdicts:
            by_verdict[v.verdict] = by_verdict.get(v.verdict, 0) + 1
        n = len(self.candidates)
        stopped = sum(by_verdict.get(k, 0) for k in ("reject", "remove"))
        return {
            "candidates": n,
            "verdicts": by_verdict,
            "rejection_rate": (stopped / n) if n else None,
            "downgrade_rate": (by_verdict.get("downgrade", 0) / n) if n else None,
            "writes": len([w for w in self.writes if w.action != "held"]),
            "held": len([w for w in self.writes if w.action == "held"]),
            "failures": len(self.failures),
            "read_back_failures": len([r for r in self.read_back if not r.retrieved]),
            "replacements": self.replacement_counts,
        }

    def to_dict(self) -> dict[str, Any]:
        """As stored in the cycle report: every string and mapping key redacted (``lca.derived``)."""
        out = asdict(self)
        out["counts"] = self.counts
        return derived_tree(out)

    def redacted(self) -> ConsolidationResult:
        """The same record with every text in it redacted: a candidate removed for holding a
        credential is still reported, as its claim with the credential replaced by a marker."""
        return replace(
            self,
            candidates=tuple(_redacted_fields(c) for c in self.candidates),
            verdicts=tuple(_redacted_fields(v) for v in self.verdicts),
            writes=tuple(_redacted_fields(w) for w in self.writes),
            read_back=tuple(_redacted_fields(r) for r in self.read_back),
            failures=tuple(_redacted_fields(f) for f in self.failures),
            experience_events=tuple(derived_tree(e) for e in self.experience_events),
            replacements=tuple(_redacted_fields(r) for r in self.replacements),
        )


def _redacted_fields(record: Any) -> Any:
    """A frozen dataclass with its string fields redacted."""
    changes = {
        f.name: redacted(getattr(record, f.name)) for f in fields(record) if isinstance(getattr(record, f.name), str)
    }
    return replace(record, **changes)
