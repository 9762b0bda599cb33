"""Layer 5: the consolidation cycle, with an independent verification stage.

One cycle reads the transcript written since the last checkpoint and turns it into durable
memory in six steps (docs/consolidation.md):

1. identify candidates: a writer generator call per window of the span, each candidate
   citing the numbered lines it rests on;
2. search existing memory for each candidate, so a near-duplicate updates the memory it
   repeats and related memories (same entities) are put before the reviewer;
3. verify: a reviewer generator call that sees only the candidate, the memories it touches
   and the cited source lines, told to refute rather than confirm, reasoning before verdict.
   A contradiction rejects the candidate or supersedes the older memory (never silent
   coexistence); a claim its sources do not support is downgraded to a labeled inference
   or removed;
4. procedural writes pass the approval gate (``MemoryStore.write``): without a named
   approver they are held as proposals;
5. write under the store's writer lock, archive what is replaced, log to the ledger and the
   transcript, index, and read every written memory back through recall from its own text;
6. leave a handoff when compaction may follow.

Generator failures (malformed output, timeouts, refusals) are recorded per stage and the
candidates they touch are not written; a memory folder with invalid files is refused.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Sequence

from lca.errors import ApprovalRequired, LCAError
from lca.fileio import atomic_write_bytes
from lca.ledger import Ledger, LearnedState, hypothesis_id, key_terms
from lca.memory import (PROCEDURAL_TYPES, Authority, Conflict, MemoryFile, MemoryRecord, MemoryType, Privacy,
                        SchemaRef, Supersession, TranscriptSpan, render_memory)
from lca.ports import TextGenerator
from lca.recall import RecallContext, contains_secret
from lca.types import EntryKind, SourceType, TranscriptEntry, as_utc, parse_timestamp

if TYPE_CHECKING:
    from lca.substrate import Substrate

PROMPT_VERSION = "consolidation-prompts/2"
CANDIDATE_TYPES = {"fact": MemoryType.FACT, "decision": MemoryType.DECISION, "lesson": MemoryType.LESSON,
                   "preference": MemoryType.PREFERENCE, "rule": MemoryType.PROCEDURE,
                   "procedure": MemoryType.PROCEDURE}
SKIPPED_KINDS = {EntryKind.CHECKPOINT, EntryKind.HANDOFF, EntryKind.REASONING}


class ConsolidationTrigger(str, Enum):
    """Fixed triggers fire from the host's lifecycle; ``elected`` is an explicit call or `lca checkpoint`."""

    PRE_COMPACTION = "pre_compaction"
    SESSION_END = "session_end"
    CONTEXT_PRESSURE = "context_pressure"
    ELECTED = "elected"


class ConsolidationRefused(LCAError):
    """The cycle will not write: the memory folder is in a state it must not write over."""


# ---- prompts (versioned: a change here changes PROMPT_VERSION) ------------------------------
# Each prompt carries a worked example as a prior exchange: small local models follow a shown
# format far more reliably than a described one (SmolLM2-135M ignores the description alone).
WRITER_SYSTEM = ("You extract memories from conversations: facts about the user or the work, decisions, lessons "
                 "learned, preferences, and rules the assistant must follow. Answer only with lines of the form: "
                 "TYPE | statement | line numbers. TYPE is one of: fact, decision, lesson, preference, rule. "
                 "Write NONE if nothing is worth remembering.")
WRITER_PREVENTED = (" If a memory in use changed what the assistant did, add a line: "
                    "prevented | memory id | line number | what changed")
WRITER_DEMO = (
    ("Conversation lines:\n[1] user: My daughter Mia starts school in Porto in September.\n"
     "[2] assistant: Congratulations to Mia!\n[3] user: From now on, always answer me in French.\n\n"
     "List what is worth remembering."),
    "fact | Mia, the user's daughter, starts school in Porto in September. | 1\n"
    "rule | Always answer the user in French. | 3")
WRITER_TASK = "List what is worth remembering."
REVIEWER_SYSTEM = (
    "You are a strict reviewer of memory writes. Your job is to find reasons to reject a candidate memory, "
    "not to agree with it. You see only the candidate, the source lines it cites, and existing memories.")
REVIEWER_INSTRUCTIONS = """Answer in exactly this form, reasoning first:
REASONING: <why the candidate might be wrong, unsupported, or in conflict>
SUPPORTED: yes or no (yes only if the source lines say the candidate)
CONTRADICTS: none, or the id of an existing memory that says something incompatible
VERDICT: accept, reject, or supersede (supersede: the candidate is newer and replaces the memory it contradicts)"""
REVIEWER_DEMOS = (
    ("Candidate (fact): Mia starts school in Lisbon.\nSource lines it cites:\n[1] user: My daughter Mia starts "
     "school in Porto in September.\nExisting memories:\n(none)\n\nAnswer with REASONING, SUPPORTED, CONTRADICTS, "
     "VERDICT.",
     "REASONING: The source says Porto, not Lisbon.\nSUPPORTED: no\nCONTRADICTS: none\nVERDICT: reject"),
    ("Candidate (preference): The user likes green tea.\nSource lines it cites:\n[4] user: I always drink green "
     "tea, I love it.\nExisting memories:\nm-coffee: The user drinks coffee every morning.\n\nAnswer with "
     "REASONING, SUPPORTED, CONTRADICTS, VERDICT.",
     "REASONING: The source says the user loves green tea. Drinking coffee does not exclude it.\n"
     "SUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept"),
)


def _with_demos(system: str, demos, task: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}]
    for user, assistant in demos:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return messages + [{"role": "user", "content": task}]


# ---- records -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpanLine:
    number: int
    session_id: str
    entry_id: str
    speaker: str
    text: str
    timestamp: str


@dataclass(frozen=True)
class Candidate:
    id: str                 # hypothesis id (stable per claim)
    type: str               # a CANDIDATE_TYPES key
    claim: str
    sources: tuple[tuple[str, str], ...]   # (session, entry) pairs cited
    lines: tuple[int, ...]
    window: int
    resurfaced_by: str | None = None   # a dormant hypothesis brought back by this candidate's evidence


@dataclass(frozen=True)
class Verdict:
    candidate: str
    verdict: str             # accept | reject | supersede | downgrade | remove | held | failed
    supported: bool
    lexical_support: float
    contradicts: str | None
    reasoning: str
    reasoning_first: bool
    reason: str              # the cycle's own account of the outcome
    touched: tuple[str, ...] = ()
    update_of: str | None = None
    earlier_refutations: int = 0
    raw: str = ""


@dataclass(frozen=True)
class Write:
    memory_id: str
    action: str              # created | updated | superseded | conflict_marked | held
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
    stage: str               # extract | verify | write | index | read_back | prevented
    kind: str                # malformed | timeout | refused | error | changed | unknown_memory ...
    message: str
    candidate: str | None = None
    raw: str = ""


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
    repeats_merged: int = 0   # candidates folded into an earlier near-identical one of the same cycle
    prompt_version: str = PROMPT_VERSION

    @property
    def counts(self) -> dict[str, Any]:
        by_verdict: dict[str, int] = {}
        for v in self.verdicts:
            by_verdict[v.verdict] = by_verdict.get(v.verdict, 0) + 1
        n = len(self.candidates)
        stopped = sum(by_verdict.get(k, 0) for k in ("reject", "remove"))
        return {"candidates": n, "verdicts": by_verdict,
                "rejection_rate": (stopped / n) if n else None,
                "downgrade_rate": (by_verdict.get("downgrade", 0) / n) if n else None,
                "writes": len([w for w in self.writes if w.action != "held"]),
                "held": len([w for w in self.writes if w.action == "held"]),
                "failures": len(self.failures),
                "read_back_failures": len([r for r in self.read_back if not r.retrieved])}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["counts"] = self.counts
        return out


# ---- parsing -------------------------------------------------------------------------------
_REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|i won't|as an ai)\b", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+")


def parse_writer_output(text: str) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, int, str]], int]:
    """Candidate lines (type, statement, line numbers), prevented lines (memory id, line, what), and
    the count of non-empty lines that fit neither form."""
    candidates, prevented, unparsed = [], [], 0
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*0123456789.) ").strip()
        if not line or line.upper().strip(".") == "NONE":
            continue
        parts = [p.strip() for p in line.split("|")]
        head = parts[0].lower().rstrip("s:") if parts else ""
        if head == "prevented" and len(parts) >= 4 and _NUMBERS.search(parts[2]):
            prevented.append((parts[1], parts[3], int(_NUMBERS.search(parts[2]).group()), parts[3]))
            continue
        if len(parts) >= 3 and (head in CANDIDATE_TYPES or head.rstrip("e") + "e" in CANDIDATE_TYPES):
            kind = head if head in CANDIDATE_TYPES else head.rstrip("e") + "e"
            statement = parts[1].strip().strip('"')
            numbers = [int(n) for n in _NUMBERS.findall(parts[2])]
            if statement:
                candidates.append((kind, statement, numbers))
                continue
        unparsed += 1
    return candidates, prevented, unparsed


_FIELD = re.compile(r"^\s*\**\s*(REASONING|SUPPORTED|CONTRADICTS|VERDICT)\s*\**\s*:\s*(.*)$", re.IGNORECASE)


def parse_review(text: str) -> dict[str, Any] | None:
    """The reviewer's fields, or None when SUPPORTED or VERDICT is missing or unreadable."""
    fields: dict[str, str] = {}
    order: list[str] = []
    current = None
    for line in text.splitlines():
        match = _FIELD.match(line)
        if match:
            current = match.group(1).upper()
            if current not in fields:
                fields[current] = match.group(2).strip()
                order.append(current)
        elif current == "REASONING" and line.strip():
            fields["REASONING"] += " " + line.strip()
    verdict = fields.get("VERDICT", "").lower()
    verdict = next((v for v in ("supersede", "reject", "accept") if verdict.startswith(v)), None)
    supported = fields.get("SUPPORTED", "").lower()
    supported = True if supported.startswith("yes") else False if supported.startswith("no") else None
    if verdict is None or supported is None:
        return None
    contradicts = fields.get("CONTRADICTS", "none").strip().strip("`'\".")
    if contradicts.lower() in ("", "none", "no", "n/a", "-"):
        contradicts = None
    reasoning_first = bool(order) and order[0] == "REASONING"
    return {"verdict": verdict, "supported": supported, "contradicts": contradicts,
            "reasoning": fields.get("REASONING", ""), "reasoning_first": reasoning_first}


def lexical_support(claim: str, lines: Sequence[str]) -> float:
    """Share of the claim's key terms found in the cited lines: a mechanical floor under the reviewer."""
    terms = key_terms(claim)
    if not terms:
        return 0.0
    source = key_terms(" ".join(lines))
    return len(terms & source) / len(terms)


def _slug(text: str, limit: int = 40) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "memory"


# ---- the cycle -----------------------------------------------------------------------------
@dataclass
class ConsolidationConfig:
    """Parameters of a cycle; plain values so a condition can name them."""

    window_tokens: int = 900            # transcript per writer call (the model's context is small)
    max_candidates: int = 24
    writer_max_tokens: int = 256
    reviewer_max_tokens: int = 200
    update_similarity: float = 0.88     # a candidate this close to a memory updates it
    related_similarity: float = 0.45    # memories this close (and sharing a key term) are "touched"
    related_k: int = 4
    min_lexical_support: float = 0.34
    unsupported: str = "downgrade"      # downgrade | remove
    privacy: str = "private"
    verify: bool = True                  # False: the "consolidation without verification" ablation
    seed: int = 0

    def __post_init__(self) -> None:
        if self.unsupported not in ("downgrade", "remove"):
            raise LCAError(f"unsupported must be 'downgrade' or 'remove', got {self.unsupported!r}")
        Privacy(self.privacy)


@dataclass
class _Plan:
    candidate: Candidate
    verdict: Verdict
    record: MemoryRecord | None = None
    body: str = ""
    supersede: MemoryFile | None = None
    conflict_on: MemoryFile | None = None
    base_hashes: dict[str, str | None] = field(default_factory=dict)


class Consolidator:
    """Runs cycles over one substrate. ``reviewer`` defaults to ``writer`` but every review is a
    fresh call with its own messages: nothing the writer saw or said reaches it but the candidate."""

    def __init__(self, substrate: "Substrate", writer: TextGenerator, *, reviewer: TextGenerator | None = None,
                 config: ConsolidationConfig | None = None, approver: str | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.substrate = substrate
        self.writer = writer
        self.reviewer = reviewer or writer
        self.config = config or ConsolidationConfig()
        self.approver = approver
        self.ledger = Ledger(substrate.home)
        self.progress = progress
        self.repeats_merged = 0

    # -- entry point
    def run(self, trigger: ConsolidationTrigger | str = ConsolidationTrigger.ELECTED, *,
            session_id: str | None = None, handoff: Callable[[str], str] | None = None,
            now: datetime | None = None) -> ConsolidationResult:
        """One cycle. ``now`` is the cycle's time on the history's clock (default: the wall clock);
        a replayed history passes the time of its session end so memories date from then."""
        trigger = ConsolidationTrigger(trigger)
        started = time.time()
        self.repeats_merged = 0
        self.now = as_utc(now) if now is not None else datetime.now(timezone.utc)
        cycle_id = f"cycle-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        loaded = self.substrate.memory.load()
        if loaded.failures:
            detail = "; ".join(str(f) for f in loaded.failures[:5])
            self.ledger.append("cycle_completed", cycle_id, {"trigger": trigger.value, "status": "refused",
                                                             "reason": detail})
            raise ConsolidationRefused(f"memory folder has {len(loaded.failures)} invalid file(s); the cycle "
                                       f"will not write over it: {detail}. Fix or move them, then run again.")
        drifted = set(loaded.drifted)
        state = self.ledger.state()
        # read once per cycle: the schemas stamped on every write, and what recall injected since the last cycle
        self.schema_stamp = tuple(SchemaRef(id=s.id, version=s.version) for s in state.active_schemas())
        injected = self._injected_since(self.substrate.home / "logs" / "recall.jsonl", self._last_cycle_at(state))
        lines, marks = self._span(state)
        failures: list[Failure] = []
        candidates, prevented = self._identify(lines, state, failures, injected)
        candidates += self._resurface(candidates, state)
        plans = [self._review(c, lines, state, failures) for c in candidates]
        events = self._experience(lines, prevented, failures, injected)
        writes: list[Write] = []
        read_back: list[ReadBack] = []
        if plans:
            writes = self._apply(plans, drifted, failures, cycle_id, state)
            self._index(failures)
            read_back = self._read_back(writes, failures)
        result = ConsolidationResult(
            cycle_id, trigger.value, started, time.time() - started, self.writer.model_id,
            self.reviewer.model_id if self.config.verify else None, self.config.verify,
            {s: m for s, m in marks.items()}, tuple(candidates), tuple(p.verdict for p in plans), tuple(writes),
            tuple(read_back), tuple(failures), tuple(events), None, self.repeats_merged)
        handoff_id = None
        if handoff is not None and trigger in (ConsolidationTrigger.PRE_COMPACTION,
                                               ConsolidationTrigger.CONTEXT_PRESSURE):
            handoff_id = handoff(f"consolidation {cycle_id} before compaction")
        result = replace(result, handoff_entry=handoff_id, seconds=time.time() - started)
        self._record(result, session_id or (lines[-1].session_id if lines else None))
        return result

    # -- step 0: the span since the last checkpoint
    @staticmethod
    def _last_cycle_at(state: LearnedState) -> float:
        done = [c for c in state.cycles if c.get("status") == "completed"]
        return done[-1]["at"] if done else 0.0

    def _span(self, state: LearnedState) -> tuple[list[SpanLine], dict[str, dict[str, Any]]]:
        offsets: dict[str, int] = {}
        for cycle in state.cycles:
            for session, mark in (cycle.get("marks") or {}).items():
                offsets[session] = max(offsets.get(session, 0), int(mark["end_offset"]))
        lines: list[SpanLine] = []
        marks: dict[str, dict[str, Any]] = {}
        transcript = self.substrate.transcript
        for session in transcript.session_ids():
            start = offsets.get(session, 0)
            if transcript.session_path(session).stat().st_size <= start:
                continue
            read = transcript.read(session, start=start)
            kept = [e for e in read.entries if e.kind not in SKIPPED_KINDS and e.content.strip()]
            if read.end_offset > start:
                marks[session] = {"start_offset": start, "end_offset": read.end_offset,
                                  "first": kept[0].id if kept else None, "last": kept[-1].id if kept else None,
                                  "entries": len(kept)}
            for entry in kept:
                lines.append(SpanLine(len(lines) + 1, entry.session_id, entry.id, self._speaker(entry),
                                      " ".join(entry.content.split()), entry.timestamp))
        return lines, marks

    @staticmethod
    def _speaker(entry: TranscriptEntry) -> str:
        if entry.author:
            return entry.author
        return {"user_turn": "user", "assistant_turn": "assistant"}.get(entry.kind.value, entry.kind.value)

    # -- step 1: identify candidates
    def _windows(self, lines: Sequence[SpanLine]) -> list[list[SpanLine]]:
        return windows_by_tokens(lines, self.config.window_tokens, text=lambda line: line.text)

    def _identify(self, lines: list[SpanLine], state: LearnedState, failures: list[Failure],
                  injected: set[str]) -> tuple[list[Candidate], list[tuple[str, str, int, str]]]:
        by_number = {line.number: line for line in lines}
        candidates: dict[str, Candidate] = {}
        prevented: list[tuple[str, str, int, str]] = []
        schemas = state.active_schemas()
        in_use = self._memories_in_use(injected)
        for w, window in enumerate(self._windows(lines)):
            if len(candidates) >= self.config.max_candidates:
                break
            numbered = "\n".join(f"[{line.number}] {line.speaker}: {line.text}" for line in window)
            parts = [f"Conversation lines:\n{numbered}"]
            if in_use:
                parts.append("Memories in use:\n" + "\n".join(f"{mid}: {text}" for mid, text in in_use))
            if schemas:
                parts.append("Known patterns:\n" + "\n".join(f"- {s.id} (v{s.version}): {s.description}"
                                                               for s in schemas))
            parts.append(WRITER_TASK)
            system = WRITER_SYSTEM + (WRITER_PREVENTED if in_use else "")
            messages = _with_demos(system, (WRITER_DEMO,), "\n\n".join(parts))
            self._say(f"identify: window {w + 1}")
            try:
                text = self.writer.generate(messages, max_tokens=self.config.writer_max_tokens, temperature=0.0,
                                            seed=self.config.seed)
            except Exception as exc:  # the generator's failure is the cycle's record, never a crash
                failures.append(Failure("extract", _failure_kind(exc), f"window {w + 1}: {exc}"))
                continue
            found, prevented_here, unparsed = parse_writer_output(text)
            if not found and not prevented_here and text.strip().upper().strip(".") != "NONE":
                kind = "refused" if _REFUSAL.search(text) else "malformed"
                failures.append(Failure("extract", kind, f"window {w + 1}: no line in the form "
                                        f"'TYPE | statement | line numbers' ({unparsed} other line(s))", raw=text))
                continue
            prevented.extend(prevented_here)
            for kind, statement, numbers in found:
                cited = [by_number[n] for n in numbers if n in by_number]
                cand = Candidate(hypothesis_id(statement), kind, statement,
                                 tuple((line.session_id, line.entry_id) for line in cited),
                                 tuple(line.number for line in cited), w + 1)
                if cand.id not in candidates and len(candidates) < self.config.max_candidates:
                    candidates[cand.id] = cand
        return self._merge_repeats(list(candidates.values())), prevented

    def _merge_repeats(self, candidates: list[Candidate]) -> list[Candidate]:
        """Candidates of one type this close to an earlier one in the same cycle are one item: the
        later one's cited lines join the earlier one (small models repeat themselves across windows)."""
        if len(candidates) < 2:
            return candidates
        vectors = self.substrate.embedder.embed([c.claim for c in candidates])
        kept: list[Candidate] = []
        kept_rows: list[int] = []
        for row, cand in enumerate(candidates):
            twin = next((k for k, r in zip(range(len(kept)), kept_rows)
                         if kept[k].type == cand.type
                         and float(vectors[row] @ vectors[r]) >= self.config.update_similarity), None)
            if twin is None:
                kept.append(cand)
                kept_rows.append(row)
                continue
            first = kept[twin]
            kept[twin] = replace(first, sources=tuple(dict.fromkeys(first.sources + cand.sources)),
                                 lines=tuple(dict.fromkeys(first.lines + cand.lines)))
            self.repeats_merged += 1
        return kept

    def _memories_in_use(self, injected: set[str]) -> list[tuple[str, str]]:
        """Memories recall injected since the last cycle, as (id, first line) for the writer prompt."""
        files = self.substrate.memory_files()
        return [(mid, files[mid].body.strip().splitlines()[0][:200]) for mid in sorted(injected)
                if mid in files and files[mid].body.strip()][:8]

    @staticmethod
    def _injected_since(path, since: float) -> set[str]:
        out: set[str] = set()
        if not path.exists():
            return out
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("at", 0) <= since:
                    continue
                for c in record.get("candidates", ()):
                    if c.get("injected") and c.get("source", "").startswith("memory:"):
                        out.add(c["source"][len("memory:"):].split("[", 1)[0])
        return out

    def _resurface(self, candidates: Sequence[Candidate], state: LearnedState) -> list[Candidate]:
        """Dormant hypotheses in a new candidate's neighbourhood come back for review, on the new
        candidate's evidence, with their earlier refutations attached (see _review)."""
        seen = {c.id for c in candidates}
        out = []
        for cand in candidates:
            for h in self.ledger.dormant_neighbours(key_terms(cand.claim), state=state):
                if h.id in seen:
                    continue
                seen.add(h.id)
                out.append(Candidate(h.id, h.type if h.type in CANDIDATE_TYPES else "fact", h.claim, cand.sources,
                                     cand.lines, cand.window, resurfaced_by=cand.id))
        return out

    # -- steps 2 and 3: search existing memory, then verify
    def _touched(self, candidate: Candidate) -> tuple[list[tuple[MemoryFile, float]], MemoryFile | None]:
        files = self.substrate.memory_files()
        if not files:
            return [], None
        qvec = self.substrate.index.query_vector(candidate.claim)   # embedded once, for the search and the cosines
        hits = self.substrate.index.search(candidate.claim, k=self.config.related_k * 3, mode="hybrid",
                                           query_vector=qvec)
        vectors = self.substrate.index.vectors_for_hits(hits) if hits else {}
        terms = key_terms(candidate.claim)
        best: dict[str, tuple[MemoryFile, float]] = {}
        for hit in hits:
            if hit.pointer.source_type is not SourceType.MEMORY or hit.pointer.memory_id not in files:
                continue
            memory = files[hit.pointer.memory_id]
            if memory.record.superseded_by is not None:
                continue
            cosine = float(vectors[hit.chunk_id] @ qvec)
            shares_entity = bool(terms & key_terms(memory.body))
            if cosine >= self.config.update_similarity or (cosine >= self.config.related_similarity and shares_entity):
                if memory.record.id not in best or best[memory.record.id][1] < cosine:
                    best[memory.record.id] = (memory, cosine)
        touched = sorted(best.values(), key=lambda mc: -mc[1])[: self.config.related_k]
        update = next((m for m, cos in touched if cos >= self.config.update_similarity
                       and CANDIDATE_TYPES[candidate.type].value == m.record.type.value), None)
        return touched, update

    def _review(self, candidate: Candidate, lines: Sequence[SpanLine], state: LearnedState,
                failures: list[Failure]) -> _Plan:
        cfg = self.config
        by_number = {line.number: line for line in lines}
        cited = [by_number[n] for n in candidate.lines]
        support = lexical_support(candidate.claim, [line.text for line in cited])
        touched, update = self._touched(candidate)
        touched_ids = tuple(m.record.id for m, _ in touched)
        known = state.hypotheses.get(candidate.id)
        refutations = list(known.refutations) if known is not None else []
        base = dict(candidate=candidate.id, lexical_support=round(support, 3), touched=touched_ids,
                    update_of=update.record.id if update else None, earlier_refutations=len(refutations))
        if contains_secret(candidate.claim):  # policy, not judgment: no reviewer can wave a credential through
            return _Plan(candidate, Verdict(verdict="remove", supported=False, contradicts=None, reasoning="",
                                            reasoning_first=False, reason="holds a secret or credential: never "
                                            "written to durable memory", **base))
        if not cfg.verify:
            verdict = Verdict(verdict="accept", supported=bool(cited), contradicts=None, reasoning="",
                              reasoning_first=False, reason="written without verification (ablation)", **base)
            return self._plan(candidate, verdict, cited, update, None, authority=Authority.UNREVIEWED)
        parts = [f"Candidate ({candidate.type}): {candidate.claim}",
                 "Source lines it cites:\n" + ("\n".join(f"[{line.number}] {line.speaker}: {line.text}"
                                                         for line in cited) or "(none)"),
                 "Existing memories:\n" + ("\n".join(f"{m.record.id}: {' '.join(m.body.split())[:400]}"
                                                     for m, _ in touched) or "(none)")]
        if refutations:
            parts.append("Earlier refutations of this claim:\n" + "\n".join(
                f"- {r['reason']}" for r in refutations[-4:]))
        parts.append(REVIEWER_INSTRUCTIONS)
        messages = _with_demos(REVIEWER_SYSTEM, REVIEWER_DEMOS, "\n\n".join(parts))
        self._say(f"verify: {candidate.claim[:50]}")
        try:
            raw = self.reviewer.generate(messages, max_tokens=cfg.reviewer_max_tokens, temperature=0.0, seed=cfg.seed)
        except Exception as exc:
            failures.append(Failure("verify", _failure_kind(exc), str(exc), candidate=candidate.id))
            return _Plan(candidate, Verdict(verdict="failed", supported=False, contradicts=None, reasoning="",
                                            reasoning_first=False, reason=f"reviewer failed: {exc}", **base))
        review = parse_review(raw)
        if review is None:
            kind = "refused" if _REFUSAL.search(raw) else "malformed"
            failures.append(Failure("verify", kind, "reviewer output lacks SUPPORTED or VERDICT", candidate.id, raw))
            return _Plan(candidate, Verdict(verdict="failed", supported=False, contradicts=None, reasoning="",
                                            reasoning_first=False, reason="reviewer output unreadable: nothing "
                                            "written (fail closed)", raw=raw, **base))
        contradicted = None
        if review["contradicts"] is not None:
            contradicted = next((m for m, _ in touched if m.record.id == review["contradicts"]), None)
            if contradicted is None:
                failures.append(Failure("verify", "unknown_memory", f"reviewer named '{review['contradicts']}', which "
                                        "is not among the memories it was shown", candidate.id, raw))
                return _Plan(candidate, Verdict(verdict="failed", supported=False, contradicts=review["contradicts"],
                                                reasoning=review["reasoning"],
                                                reasoning_first=review["reasoning_first"],
                                                reason="reviewer named an unknown memory: nothing written",
                                                raw=raw, **base))
        supported = bool(review["supported"] and cited and support >= cfg.min_lexical_support)
        why_support = ("supported by its source lines" if supported else
                       "no cited source line" if not cited else
                       f"cited lines share only {support:.0%} of its key terms" if support < cfg.min_lexical_support
                       else "reviewer: the source lines do not say it")
        common = dict(supported=supported, contradicts=review["contradicts"], reasoning=review["reasoning"],
                      reasoning_first=review["reasoning_first"], raw=raw, **base)
        if contradicted is not None:
            if review["verdict"] == "supersede" and supported:
                if self._newer(cited, contradicted):
                    return self._plan(candidate, Verdict(verdict="supersede", reason=f"contradicts "
                                                         f"{contradicted.record.id}; newer and supported: supersedes it",
                                                         **common), cited, None, contradicted)
                reason = f"contradicts {contradicted.record.id} but its evidence is not newer: rejected, conflict marked"
            elif supported:
                reason = f"contradicts {contradicted.record.id}; reviewer did not resolve it: rejected, conflict marked"
            else:
                reason = f"contradicts {contradicted.record.id} and is not supported ({why_support}): rejected"
            plan = _Plan(candidate, Verdict(verdict="reject", reason=reason, **common))
            if supported:  # the transcript holds evidence against the memory: never silent
                plan.conflict_on = contradicted
            return plan
        if review["verdict"] == "reject":
            said = " ".join(review["reasoning"].split())[:160] or "no reasoning given"
            return _Plan(candidate, Verdict(verdict="reject", reason=f"reviewer rejected it: {said} ({why_support})",
                                            **common))
        if not supported:
            if cfg.unsupported == "remove":
                return _Plan(candidate, Verdict(verdict="remove", reason=f"unsupported ({why_support}): removed",
                                                **common))
            return self._plan(candidate, Verdict(verdict="downgrade", reason=f"unsupported ({why_support}): "
                                                 "written as a labeled inference", **common),
                              cited, update, None, authority=Authority.INFERRED)
        return self._plan(candidate, Verdict(verdict="accept", reason=why_support + (
            f"; updates {update.record.id}" if update else ""), **common), cited, update, None)

    def _newer(self, cited: Sequence[SpanLine], memory: MemoryFile) -> bool:
        """Is the candidate's evidence at least as recent as the memory's? Compared by the times of the
        transcript entries each rests on (history may be imported: a file's creation time says nothing
        about when its facts were stated); a memory without readable sources falls back to ``created``."""
        latest = max((parse_timestamp(line.timestamp) for line in cited if parse_timestamp(line.timestamp)), default=None)
        if latest is None:
            return False
        return latest >= (self._evidence_time(memory) or as_utc(memory.record.created))

    def _evidence_time(self, memory: MemoryFile) -> datetime | None:
        times = []
        transcript = self.substrate.transcript
        for span in memory.record.sources:
            if not transcript.session_path(span.session).exists():
                continue
            wanted = set(span.entries) | {span.first, span.last} - {None}
            for entry in transcript.read(span.session).entries:
                if entry.id in wanted and parse_timestamp(entry.timestamp):
                    times.append(parse_timestamp(entry.timestamp))
        return max(times) if times else None

    def _plan(self, candidate: Candidate, verdict: Verdict, cited: Sequence[SpanLine], update: MemoryFile | None,
              supersede: MemoryFile | None, *, authority: Authority = Authority.REVIEWED) -> _Plan:
        mtype = CANDIDATE_TYPES[candidate.type]
        body = candidate.claim if authority is not Authority.INFERRED else \
            f"Inference (no supporting source span): {candidate.claim}"
        sources_by_session: dict[str, list[str]] = {}
        for line in cited:
            sources_by_session.setdefault(line.session_id, []).append(line.entry_id)
        spans = tuple(TranscriptSpan(session=s, entries=tuple(ids)) for s, ids in sources_by_session.items())
        stamp = self.schema_stamp
        when = self.now
        if update is not None:
            # A repeat reinforces the memory it repeats: its supporting spans are added; its text and
            # authority stay (a hand-written body is never replaced by a one-line paraphrase). A repeat
            # without support adds nothing.
            old = update.record
            merged = tuple(dict.fromkeys(old.sources + spans))
            if authority is Authority.INFERRED or merged == old.sources:
                verdict = replace(verdict, reason=verdict.reason + f"; repeats {old.id}: nothing new to record")
                return _Plan(candidate, verdict)
            record = old.model_copy(update={"sources": merged, "schemas": stamp or old.schemas, "content_hash": None})
            body = update.body
        else:
            record = MemoryRecord(id=f"{mtype.value}-{_slug(candidate.claim)}-{candidate.id[-6:]}", type=mtype,
                                  created=when, authority=authority, privacy=Privacy(self.config.privacy),
                                  sources=spans, schemas=stamp,
                                  supersedes=(Supersession(id=supersede.record.id, reason=verdict.reason),)
                                  if supersede else ())
        plan = _Plan(candidate, verdict, record, body, supersede)
        for memory in (update, supersede):
            if memory is not None:
                plan.base_hashes[memory.record.id] = memory.computed_hash
        return plan

    # -- experience: hits and prevented mistakes
    def _experience(self, lines: Sequence[SpanLine], prevented, failures: list[Failure],
                    injected: set[str]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        files = self.substrate.memory_files()
        by_number = {line.number: line for line in lines}
        for memory_id, _, number, what in prevented:
            line = by_number.get(number)
            if memory_id not in files or line is None:
                failures.append(Failure("prevented", "unknown_memory" if memory_id not in files else "malformed",
                                        f"prevented-mistake claim for '{memory_id}' at line {number} names no "
                                        "known memory or line: not counted"))
                continue
            span = f"{line.session_id}#{line.entry_id}"
            self.substrate.experience.record(f"memory:{memory_id}", "prevented_mistake", span=span)
            events.append({"memory": memory_id, "kind": "prevented_mistake", "span": span, "what": what})
        assistant_terms = key_terms(" ".join(line.text for line in lines if line.speaker == "assistant"))
        for memory_id in sorted(injected):
            memory = files.get(memory_id)
            if memory is None:
                continue
            terms = key_terms(memory.body)
            if terms and len(terms & assistant_terms) / len(terms) >= 0.5:
                self.substrate.experience.record(f"memory:{memory_id}", "used")
                events.append({"memory": memory_id, "kind": "used", "span": None,
                               "what": "injected and echoed by the assistant in this span"})
        return events

    # -- step 5: write, archive, log, index, read back
    def _apply(self, plans: list[_Plan], drifted: set[str], failures: list[Failure], cycle_id: str,
               state: LearnedState) -> list[Write]:
        writes: list[Write] = []
        with self.substrate.writer_lock():
            for plan in plans:
                cand = plan.candidate
                if cand.resurfaced_by is not None:
                    self.ledger.append("hypothesis_resurfaced", cand.id, {
                        "by": cand.resurfaced_by, "cycle": cycle_id,
                        "sources": [f"{s}#{e}" for s, e in cand.sources]})
                else:
                    self.ledger.propose(cand.claim, type=cand.type, cycle=cycle_id,
                                        sources=[f"{s}#{e}" for s, e in cand.sources])
                if plan.verdict.verdict in ("reject", "remove", "failed"):
                    if plan.verdict.verdict != "failed":
                        self.ledger.append("hypothesis_refuted", cand.id, {"reason": plan.verdict.reason,
                                                                           "cycle": cycle_id})
                    if plan.conflict_on is not None:
                        writes.extend(self._mark_conflict(plan, drifted, failures, cycle_id))
                    continue
                if plan.record is not None:
                    writes.extend(self._write_plan(plan, drifted, failures, cycle_id))
        return writes

    def _changed_since_plan(self, plan: _Plan, drifted: set[str], failures: list[Failure]) -> bool:
        for memory_id, base in plan.base_hashes.items():
            path = self.substrate.memory.path_for(memory_id)
            if str(path) in drifted:
                failures.append(Failure("write", "hand_edited", f"{path} was edited outside the write API; the cycle "
                                        "will not write over it", plan.candidate.id))
                return True
            try:
                current = self.substrate.memory.get(memory_id).computed_hash
            except LCAError as exc:
                failures.append(Failure("write", "changed", str(exc), plan.candidate.id))
                return True
            if current != base:
                failures.append(Failure("write", "changed", f"memory '{memory_id}' changed during the cycle; "
                                        "not written (run the cycle again)", plan.candidate.id))
                return True
        return False

    def _archive(self, memory: MemoryFile) -> None:
        target = self.substrate.home / "archive" / "memory" / memory.record.id / (
            memory.computed_hash.split(":")[-1][:16] + ".md")
        if not target.exists():
            atomic_write_bytes(target, memory.path.read_bytes())

    def _write_plan(self, plan: _Plan, drifted: set[str], failures: list[Failure], cycle_id: str) -> list[Write]:
        store = self.substrate.memory
        cand = plan.candidate
        record = plan.record
        assert record is not None
        if self._changed_since_plan(plan, drifted, failures):
            return []
        procedural = record.type.value in PROCEDURAL_TYPES or (
            plan.supersede is not None and plan.supersede.record.type.value in PROCEDURAL_TYPES)
        if procedural and not (self.approver and self.approver.strip()):
            return [self._hold(plan, cycle_id, "procedural write: needs a named approver (lca approve)")]
        existing = plan.base_hashes.keys()
        for memory_id in existing:
            self._archive(store.get(memory_id))
        written: list[MemoryFile] = []
        try:
            new = store.write(record, plan.body, approver=self.approver if procedural else None)
            written.append(new)
            out = [Write(new.record.id, "updated" if new.record.id in existing else "created", cand.id,
                         new.computed_hash, plan.verdict.reason)]
            if plan.supersede is not None:
                old = store.get(plan.supersede.record.id)
                marked = old.record.model_copy(update={
                    "superseded_by": Supersession(id=new.record.id, reason=plan.verdict.reason),
                    "valid_to": old.record.valid_to or self.now})
                done = store.write(marked, old.body, approver=self.approver if procedural else None)
                written.append(done)
                out.append(Write(done.record.id, "superseded", cand.id, done.computed_hash,
                                 f"superseded by {new.record.id}"))
        except (ApprovalRequired, LCAError, OSError) as exc:
            self._roll_back(written, plan)
            failures.append(Failure("write", "error", f"{exc}; rolled back", cand.id))
            return []
        for w, memory in zip(out, written):
            self.ledger.append("memory_written", memory.record.id, {
                "action": w.action, "content_hash": memory.computed_hash, "cycle": cycle_id, "candidate": cand.id,
                "file": render_memory(memory.record, memory.body)})
        if plan.supersede is not None:
            self.ledger.append("memory_superseded", plan.supersede.record.id, {"by": new.record.id,
                                                                               "reason": plan.verdict.reason})
        self.ledger.append("hypothesis_promoted", cand.id, {"memory_id": new.record.id, "cycle": cycle_id,
                                                            "verdict": plan.verdict.verdict})
        return out

    def _roll_back(self, written: list[MemoryFile], plan: _Plan) -> None:
        """Undo a half-applied plan: restore archived versions, delete what was created."""
        for memory in written:
            base = plan.base_hashes.get(memory.record.id)
            if base is None:
                memory.path.unlink(missing_ok=True)
            else:
                archived = self.substrate.home / "archive" / "memory" / memory.record.id / (base.split(":")[-1][:16] + ".md")
                shutil.copyfile(archived, memory.path)

    def _mark_conflict(self, plan: _Plan, drifted: set[str], failures: list[Failure], cycle_id: str) -> list[Write]:
        target = plan.conflict_on
        assert target is not None
        plan.base_hashes[target.record.id] = target.computed_hash
        if self._changed_since_plan(plan, drifted, failures):
            return []
        reason = (f"contradicted by {', '.join(f'{s}#{e}' for s, e in plan.candidate.sources)}: "
                  f"'{plan.candidate.claim[:160]}'")
        record = target.record.model_copy(update={"conflicts": target.record.conflicts + (
            Conflict(id=plan.candidate.id, reason=reason),)})
        procedural = record.type.value in PROCEDURAL_TYPES
        if procedural and not (self.approver and self.approver.strip()):
            return [self._hold(plan, cycle_id, f"marking a conflict on procedural memory {target.record.id}",
                               record=record, body=target.body, promotes=False)]
        self._archive(target)
        done = self.substrate.memory.write(record, target.body, approver=self.approver if procedural else None)
        self.ledger.append("memory_written", done.record.id, {
            "action": "conflict_marked", "content_hash": done.computed_hash, "cycle": cycle_id,
            "candidate": plan.candidate.id, "file": render_memory(done.record, done.body)})
        return [Write(done.record.id, "conflict_marked", plan.candidate.id, done.computed_hash, reason)]

    def _hold(self, plan: _Plan, cycle_id: str, why: str, *, record: MemoryRecord | None = None,
              body: str | None = None, promotes: bool = True) -> Write:
        """A proposal waiting for a named approver: on disk and in the ledger, never in memory/."""
        record = record or plan.record
        body = plan.body if body is None else body
        assert record is not None
        proposal_id = f"proposal-{plan.candidate.id[-8:]}-{uuid.uuid4().hex[:6]}"
        payload = {"id": proposal_id, "why": why, "cycle": cycle_id, "candidate": plan.candidate.id,
                   "record": record.model_dump(mode="json", exclude_none=True), "body": body,
                   "supersede": plan.supersede.record.id if plan.supersede else None,
                   "verdict": plan.verdict.reason, "base_hashes": plan.base_hashes, "promotes": promotes}
        path = self.substrate.home / "proposals" / f"{proposal_id}.json"
        atomic_write_bytes(path, json.dumps(payload, indent=2, sort_keys=True).encode())
        self.ledger.append("proposal_held", proposal_id, {"path": str(path), "memory_id": record.id, "why": why,
                                                          "cycle": cycle_id})
        if promotes:
            self.ledger.append("hypothesis_held", plan.candidate.id, {"proposal": proposal_id, "cycle": cycle_id})
        return Write(record.id, "held", plan.candidate.id, None, f"{why}: {proposal_id}")

    def _index(self, failures: list[Failure]) -> None:
        try:
            report = self.substrate.ingest()
        except LCAError as exc:
            failures.append(Failure("index", "error", str(exc)))
            return
        if report.index.failed_chunks:
            failures.append(Failure("index", "error", f"{report.index.failed_chunks} chunk(s) failed to embed; "
                                    "held back and retried at the next ingest"))

    def _read_back(self, writes: Sequence[Write], failures: list[Failure]) -> list[ReadBack]:
        """Every memory this cycle wrote must come back from recall on its own text."""
        out = []
        files = self.substrate.memory_files()
        for write in writes:
            if write.action not in ("created", "updated"):
                continue
            memory = files.get(write.memory_id)
            if memory is None:
                out.append(ReadBack(write.memory_id, False, None, "file not found after the write"))
                continue
            config = replace(self.substrate.recall_config, policy="fixed-k")
            result = self.substrate.recall(RecallContext(query=memory.body.strip()), config=config)
            rank = next((n for n, c in enumerate(result.candidates, 1)
                         if c.source.startswith(f"memory:{write.memory_id}[")), None)
            injected = any(i.source.startswith(f"memory:{write.memory_id}[") for i in result.items)
            if injected:
                out.append(ReadBack(write.memory_id, True, rank, "injected by recall on its own text"))
            else:
                why = next((c.why_not for c in result.candidates if c.source.startswith(f"memory:{write.memory_id}[")),
                           "not among the candidates")
                out.append(ReadBack(write.memory_id, False, rank, f"not injected: {why}"))
                failures.append(Failure("read_back", "not_retrievable", f"memory '{write.memory_id}' was written but "
                                        f"recall on its own text did not return it ({why})"))
        return out

    # -- the record
    def _record(self, result: ConsolidationResult, session_id: str | None) -> None:
        counts = result.counts
        path = self.substrate.home / "consolidation" / f"{result.cycle_id}.json"
        record = result.to_dict()
        record["worldview"] = self.ledger.state().summary()  # the learned state this cycle left behind
        atomic_write_bytes(path, json.dumps(record, indent=2, sort_keys=True, default=str).encode())
        if session_id is not None:
            entry = TranscriptEntry(
                id=f"{session_id}:checkpoint:{result.cycle_id}", session_id=session_id, agent_id="lca",
                kind=EntryKind.CHECKPOINT, timestamp=self.now.isoformat(timespec="seconds"),
                content=json.dumps({"cycle": result.cycle_id, "trigger": result.trigger, "counts": counts},
                                   sort_keys=True),
                meta={"record": str(path)})
            self.substrate.append([entry], index=False)
        self.ledger.append("cycle_completed", result.cycle_id, {
            "status": "completed", "trigger": result.trigger, "marks": result.span, "counts": counts,
            "rejected_reasons": [v.reason for v in result.verdicts if v.verdict in ("reject", "remove")],
            "failure_kinds": [f"{f.stage}:{f.kind}" for f in result.failures], "record": str(path),
            "writer_model": result.writer_model, "reviewer_model": result.reviewer_model})

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)


def windows_by_tokens(items: Sequence[Any], tokens: int, *, text: Callable[[Any], str] = str) -> list[list[Any]]:
    """Consecutive items in groups of about ``tokens`` tokens (four characters a token, a few more
    per item for its numbering): how a span is cut for a model with a short context."""
    out: list[list[Any]] = []
    current: list[Any] = []
    used = 0
    for item in items:
        cost = max(1, len(text(item)) // 4) + 4
        if current and used + cost > tokens:
            out.append(current)
            current, used = [], 0
        current.append(item)
        used += cost
    if current:
        out.append(current)
    return out


def min_authority(a: Authority, b: Authority) -> Authority:
    order = [Authority.INFERRED, Authority.UNREVIEWED, Authority.REVIEWED, Authority.APPROVED]
    return min(a, b, key=order.index)


def _failure_kind(exc: Exception) -> str:
    name = type(exc).__name__.lower()
    return "timeout" if "timeout" in name or isinstance(exc, TimeoutError) else "error"


# ---- approvals ----------------------------------------------------------------------------
def pending_proposals(substrate: "Substrate") -> list[dict[str, Any]]:
    folder = substrate.home / "proposals"
    if not folder.exists():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def approve_proposal(substrate: "Substrate", proposal_id: str, *, approver: str) -> list[Write]:
    """Apply a held procedural write with a named approver; refused if its targets changed since."""
    if not (approver and approver.strip()):
        raise ApprovalRequired("approving a proposal needs a named approver")
    path = substrate.home / "proposals" / f"{proposal_id}.json"
    if not path.exists():
        known = ", ".join(p["id"] for p in pending_proposals(substrate)) or "none pending"
        raise LCAError(f"no proposal '{proposal_id}' ({known})")
    payload = json.loads(path.read_text(encoding="utf-8"))
    ledger = Ledger(substrate.home)
    if payload.get("kind") == "identity":
        from lca.identity import IdentityStore

        with substrate.writer_lock():
            IdentityStore(substrate.home).write(payload["name"], payload["body"], approver=approver)
            ledger.append("proposal_resolved", proposal_id, {"resolution": "approved", "approver": approver})
            path.rename(path.with_suffix(".approved"))
        return [Write(payload["name"], "approved", None, None, approver)]
    store = substrate.memory
    writes = []
    with substrate.writer_lock():
        for memory_id, base in (payload.get("base_hashes") or {}).items():
            current = store.get(memory_id).computed_hash
            if current != base:
                raise LCAError(f"proposal '{proposal_id}': memory '{memory_id}' changed since it was proposed; "
                               "the proposal no longer applies (reject it and run a new cycle)")
        record = MemoryRecord.model_validate(payload["record"])
        new = store.write(record, payload["body"], approver=approver)
        writes.append(Write(new.record.id, "approved", payload.get("candidate"), new.computed_hash, approver))
        if payload.get("supersede"):
            old = store.get(payload["supersede"])
            marked = old.record.model_copy(update={
                "superseded_by": Supersession(id=new.record.id, reason=payload.get("verdict") or "approved"),
                "valid_to": old.record.valid_to or datetime.now(timezone.utc)})
            done = store.write(marked, old.body, approver=approver)
            writes.append(Write(done.record.id, "superseded", payload.get("candidate"), done.computed_hash, approver))
            ledger.append("memory_superseded", done.record.id, {"by": new.record.id, "reason": "approved proposal"})
        for w in writes:
            memory = store.get(w.memory_id)
            ledger.append("memory_written", w.memory_id, {"action": w.action, "content_hash": w.content_hash,
                                                          "approver": approver, "proposal": proposal_id,
                                                          "file": render_memory(memory.record, memory.body)})
        if payload.get("candidate") and payload.get("promotes", True):
            ledger.append("hypothesis_promoted", payload["candidate"], {"memory_id": new.record.id,
                                                                         "approver": approver})
        ledger.append("proposal_resolved", proposal_id, {"resolution": "approved", "approver": approver})
        path.rename(path.with_suffix(".approved"))
    substrate.ingest()
    return writes


__all__ = ["Candidate", "ConsolidationConfig", "ConsolidationRefused", "ConsolidationResult",
           "ConsolidationTrigger", "Consolidator", "Failure", "ReadBack", "Verdict", "Write",
           "approve_proposal", "lexical_support", "parse_review", "parse_writer_output", "pending_proposals"]
