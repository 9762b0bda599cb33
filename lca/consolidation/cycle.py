"""One consolidation cycle, start to finish (the steps are listed in lca.consolidation)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lca.consolidation.parsing import (
    REFUSAL,
    echoes_example,
    failure_kind,
    parse_writer_output,
    parse_writer_relations,
    writer_said_nothing,
)
from lca.consolidation.prompts import (
    WRITER_DEMO,
    WRITER_DEMO_CLAIMS,
    WRITER_PREVENTED,
    WRITER_REPLACES,
    WRITER_SYSTEM,
    WRITER_TASK,
    with_demos,
    writer_schema,
)
from lca.consolidation.records import (
    CANDIDATE_TYPES,
    INSTRUCTION_TYPES,
    SKIPPED_KINDS,
    Candidate,
    ConsolidationConfig,
    ConsolidationRefused,
    ConsolidationResult,
    ConsolidationTrigger,
    Failure,
    ReadBack,
    SpanLine,
    Write,
)
from lca.consolidation.replacements import Proposal, ReplacementReview
from lca.consolidation.review import CandidateReview
from lca.consolidation.stores import CycleStores
from lca.consolidation.writing import PlanWriter
from lca.continuation import echoes
from lca.errors import LCAError
from lca.experience import count_on_memory, experience_of, source_key, turn_event
from lca.fileio import atomic_write_bytes
from lca.ledger import LearnedState, hypothesis_id, key_terms
from lca.memory import SchemaRef
from lca.ports import TextGenerator
from lca.recall import RecallContext
from lca.recall_log import RecallLog
from lca.secrets import redacted
from lca.token_windows import windows_by_tokens
from lca.types import EntryKind, TranscriptEntry, as_utc

LOG_CLOCK_SLACK_S = 300.0  # a record this much older than the last cycle ends the read back (a clock stepped back)

PreventedClaim = tuple[str, str, int, str]  # memory id, what, line number, what


class Consolidator:
    """Runs cycles over one store. ``reviewer`` defaults to ``writer`` but every review is a fresh
    call with its own messages: nothing the writer saw or said reaches it but the candidate."""

    def __init__(
        self,
        stores: CycleStores,
        writer: TextGenerator,
        *,
        reviewer: TextGenerator | None = None,
        config: ConsolidationConfig | None = None,
        approver: str | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.stores = stores
        self.writer = writer
        self.reviewer = reviewer or writer
        self.config = config or ConsolidationConfig()
        self.approver = approver
        self.ledger = stores.ledger
        self.progress = progress
        self.repeats_merged = 0
        self.now = datetime.now(UTC)

    # -- entry point
    def run(
        self,
        trigger: ConsolidationTrigger | str = ConsolidationTrigger.ELECTED,
        *,
        session_id: str | None = None,
        handoff: Callable[[str], str] | None = None,
        now: datetime | None = None,
    ) -> ConsolidationResult:
        """One cycle. ``now`` is the cycle's time on the history's clock (default: the wall clock);
        a replayed history passes the time of its session end so memories date from then."""
        trigger = ConsolidationTrigger(trigger)
        started = time.time()
        self.repeats_merged = 0
        self.now = as_utc(now) if now is not None else datetime.now(UTC)
        cycle_id = f"cycle-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        loaded = self.stores.memory.load()
        if loaded.failures:
            detail = "; ".join(str(f) for f in loaded.failures[:5])
            self.ledger.append(
                "cycle_completed", cycle_id, {"trigger": trigger.value, "status": "refused", "reason": detail}
            )
            raise ConsolidationRefused(
                f"memory folder has {len(loaded.failures)} invalid file(s); the cycle "
                f"will not write over it: {detail}. Fix or move them, then run again."
            )
        drifted = set(loaded.drifted)
        state = self.ledger.state()
        # read once per cycle: the schemas stamped on every write, and what recall injected since the last cycle
        schema_stamp = tuple(SchemaRef(id=s.id, version=s.version) for s in state.active_schemas())
        injected = self._injected_since(self.stores.layout.recall_log, self._last_cycle_at(state))
        lines, marks = self._span(state)
        failures: list[Failure] = []
        proposals: list[Proposal] = []  # the writer's "this replaces that", checked after the memory writes
        candidates, prevented = self._identify(lines, state, failures, injected, proposals)
        candidates += self._resurface(candidates, state)
        review = CandidateReview(
            self.stores, self.reviewer, self.config, schema_stamp=schema_stamp, now=self.now, say=self._say
        )
        plans = [review.review(c, lines, state, failures) for c in candidates]
        writes: list[Write] = []
        read_back: list[ReadBack] = []
        if plans:
            with self.stores.writer_lock():
                writes = PlanWriter(
                    self.stores.layout, self.stores.memory, self.ledger, approver=self.approver, now=self.now
                ).apply(plans, drifted, failures, cycle_id)
            self._index(failures)
            read_back = self._read_back(writes, failures)
        replaced = ReplacementReview(self.stores, self.reviewer, self.config, say=self._say).run(
            proposals, lines, failures
        )
        # after the writes: a counter bump is not lost to an update written from an earlier read, and the
        # span's approvals and corrections reach the memories this cycle wrote from the turns they name
        events = self._experience(lines, prevented, failures, injected)
        result = ConsolidationResult(
            cycle_id,
            trigger.value,
            started,
            time.time() - started,
            self.writer.model_id,
            self.reviewer.model_id if self.config.verify else None,
            self.config.verify,
            {s: m for s, m in marks.items()},
            tuple(candidates),
            tuple(p.verdict for p in plans),
            tuple(writes),
            tuple(read_back),
            tuple(failures),
            tuple(events),
            None,
            self.repeats_merged,
            replacements=tuple(replaced),
        )
        handoff_id = None
        if handoff is not None and trigger in (
            ConsolidationTrigger.PRE_COMPACTION,
            ConsolidationTrigger.CONTEXT_PRESSURE,
        ):
            handoff_id = handoff(f"consolidation {cycle_id} before compaction")
        # what the cycle reports, stores and returns holds no credential: a removed candidate is reported redacted
        result = replace(result, handoff_entry=handoff_id, seconds=time.time() - started).redacted()
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
        transcript = self.stores.transcript
        for session in transcript.session_ids():
            start = offsets.get(session, 0)
            if transcript.session_path(session).stat().st_size <= start:
                continue
            read = transcript.read(session, start=start)
            kept = [e for e in read.entries if e.kind not in SKIPPED_KINDS and e.content.strip()]
            if read.end_offset > start:
                marks[session] = {
                    "start_offset": start,
                    "end_offset": read.end_offset,
                    "first": kept[0].id if kept else None,
                    "last": kept[-1].id if kept else None,
                    "entries": len(kept),
                }
            for entry in kept:
                lines.append(
                    SpanLine(
                        len(lines) + 1,
                        entry.session_id,
                        entry.id,
                        self._speaker(entry),
                        redacted(" ".join(entry.content.split())),  # no model is shown a credential
                        entry.timestamp,
                        entry.meta,
                        entry.kind is EntryKind.PEER_AGENT_TURN,
                    )
                )
        return lines, marks

    @staticmethod
    def _speaker(entry: TranscriptEntry) -> str:
        if entry.kind is EntryKind.PEER_AGENT_TURN:  # the writer is told whose words these are
            return f"peer agent {redacted(entry.author or '')}"
        if entry.author:
            return entry.author
        return {"user_turn": "user", "assistant_turn": "assistant"}.get(entry.kind.value, entry.kind.value)

    # -- step 1: identify candidates
    def _windows(self, lines: Sequence[SpanLine]) -> list[list[SpanLine]]:
        return windows_by_tokens(lines, self.config.window_tokens, text=lambda line: line.text)

    def _identify(
        self,
        lines: list[SpanLine],
        state: LearnedState,
        failures: list[Failure],
        injected: set[str],
        proposals: list[Proposal],
    ) -> tuple[list[Candidate], list[PreventedClaim]]:
        by_number = {line.number: line for line in lines}
        candidates: dict[str, Candidate] = {}
        prevented: list[PreventedClaim] = []
        schemas = state.active_schemas()
        in_use = self._memories_in_use(injected)
        relate = self.config.infer_replacements  # off: the writer is not asked, and what it says is not read
        for w, window in enumerate(self._windows(lines)):
            if len(candidates) >= self.config.max_candidates:
                break
            numbered = "\n".join(f"[{line.number}] {line.speaker}: {line.text}" for line in window)
            parts = [f"Conversation lines:\n{numbered}"]
            if in_use:
                parts.append("Memories in use:\n" + "\n".join(f"{mid}: {text}" for mid, text in in_use))
            if schemas:
                parts.append(
                    "Known patterns:\n" + "\n".join(f"- {s.id} (v{s.version}): {s.description}" for s in schemas)
                )
            parts.append(WRITER_TASK)
            system = WRITER_SYSTEM + (WRITER_PREVENTED if in_use else "") + (WRITER_REPLACES if relate else "")
            messages = with_demos(system, (WRITER_DEMO,), "\n\n".join(parts))
            self._say(f"identify: window {w + 1}")
            shown = [line.number for line in window]
            schema = writer_schema(shown, [mid for mid, _ in in_use], replacements=relate)
            try:
                text = self.writer.generate(
                    messages,
                    max_tokens=self.config.writer_max_tokens,
                    temperature=0.0,
                    seed=self.config.seed,
                    json_schema=schema,
                )
            except Exception as exc:  # the generator's failure is the cycle's record, never a crash
                failures.append(Failure("extract", failure_kind(exc), f"window {w + 1}: {exc}"))
                continue
            found, prevented_here, unparsed = parse_writer_output(text)
            relations, unread = parse_writer_relations(text) if relate else ([], 0)
            unparsed += unread
            proposals.extend(Proposal(*r, w + 1, frozenset(shown)) for r in relations)
            if not found and not prevented_here and not relations and not writer_said_nothing(text):
                kind = "refused" if REFUSAL.search(text) else "malformed"
                failures.append(
                    Failure(
                        "extract",
                        kind,
                        f"window {w + 1}: no readable candidate (JSON per the writer's schema, or lines "
                        f"'TYPE | statement | line numbers'; {unparsed} part(s) not read)",
                        raw=text,
                    )
                )
                continue
            prevented.extend(prevented_here)
            window_texts = [line.text for line in window]
            for kind, statement, numbers in found:
                if echoes_example(statement, window_texts, WRITER_DEMO_CLAIMS):
                    failures.append(
                        Failure(
                            "extract",
                            "echoed_example",
                            f"window {w + 1}: a candidate repeats the prompt's worked example, not the "
                            "conversation: dropped",
                            raw=statement,
                        )
                    )
                    continue
                cited = [by_number[n] for n in numbers if n in by_number]
                if kind in INSTRUCTION_TYPES and cited and all(line.peer_agent for line in cited):
                    why = f"window {w + 1}: a {kind} resting on peer agents' messages alone: an observation, dropped"
                    failures.append(Failure("extract", "peer_instruction", why, raw=statement))
                    continue
                cand = Candidate(
                    hypothesis_id(statement),
                    kind,
                    statement,
                    tuple((line.session_id, line.entry_id) for line in cited),
                    tuple(line.number for line in cited),
                    w + 1,
                )
                if cand.id not in candidates and len(candidates) < self.config.max_candidates:
                    candidates[cand.id] = cand
        return self._merge_repeats(list(candidates.values())), prevented

    def _merge_repeats(self, candidates: list[Candidate]) -> list[Candidate]:
        """Candidates of one type this close to an earlier one in the same cycle are one item: the
        later one's cited lines join the earlier one (small models repeat themselves across windows)."""
        if len(candidates) < 2:
            return candidates
        vectors = self.stores.embedder.embed([c.claim for c in candidates])
        kept: list[Candidate] = []
        kept_rows: list[int] = []
        for row, cand in enumerate(candidates):
            twin = next(
                (
                    k
                    for k, r in enumerate(kept_rows)
                    if kept[k].type == cand.type and float(vectors[row] @ vectors[r]) >= self.config.update_similarity
                ),
                None,
            )
            if twin is None:
                kept.append(cand)
                kept_rows.append(row)
                continue
            first = kept[twin]
            kept[twin] = replace(
                first,
                sources=tuple(dict.fromkeys(first.sources + cand.sources)),
                lines=tuple(dict.fromkeys(first.lines + cand.lines)),
            )
            self.repeats_merged += 1
        return kept

    def _memories_in_use(self, injected: set[str]) -> list[tuple[str, str]]:
        """Memories recall injected since the last cycle, as (id, first line) for the writer prompt."""
        files = self.stores.memory_files()
        return [
            (mid, redacted(files[mid].body.strip().splitlines()[0])[:200])
            for mid in sorted(injected)
            if mid in files and files[mid].body.strip()
        ][:8]

    @staticmethod
    def _injected_since(path: Path, since: float) -> set[str]:
        """The memories recall injected after ``since``, read from the recall log's end back to the first record
        older than ``since`` by ``LOG_CLOCK_SLACK_S``: a cycle reads what was logged since the last one, not the
        whole log (about 24 KB a recall), which a long-running agent's log would make grow without bound."""
        out: set[str] = set()
        for line in RecallLog(path).lines_backwards():  # across the rotated segments (lca.recall_log)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            at = record.get("at", 0) if isinstance(record, dict) else 0
            if at <= since - LOG_CLOCK_SLACK_S:
                break
            if at <= since:
                continue
            for c in record.get("candidates", ()):
                if c.get("injected") and c.get("source", "").startswith("memory:"):
                    out.add(c["source"][len("memory:") :].split("[", 1)[0])
        return out

    def _resurface(self, candidates: Sequence[Candidate], state: LearnedState) -> list[Candidate]:
        """Dormant hypotheses in a new candidate's neighbourhood come back for review, on the new
        candidate's evidence, with their earlier refutations attached (see CandidateReview.review)."""
        seen = {c.id for c in candidates}
        out = []
        for cand in candidates:
            for h in self.ledger.dormant_neighbours(key_terms(cand.claim), state=state):
                if h.id in seen:
                    continue
                seen.add(h.id)
                out.append(
                    Candidate(
                        h.id,
                        h.type if h.type in CANDIDATE_TYPES else "fact",
                        h.claim,
                        cand.sources,
                        cand.lines,
                        cand.window,
                        resurfaced_by=cand.id,
                    )
                )
        return out

    # -- experience: hits, prevented mistakes, and the span's explicit approvals and corrections
    def _experience(
        self,
        lines: Sequence[SpanLine],
        prevented: Sequence[PreventedClaim],
        failures: list[Failure],
        injected: set[str],
    ) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        files = self.stores.memory_files()
        by_number = {line.number: line for line in lines}
        experience, memory = self.stores.experience, self.stores.memory
        with self.stores.writer_lock():  # the counters are written into the memory files
            for memory_id, _, number, what in prevented:
                line = by_number.get(number)
                if memory_id not in files or line is None:
                    failures.append(
                        Failure(
                            "prevented",
                            "unknown_memory" if memory_id not in files else "malformed",
                            f"prevented-mistake claim for '{memory_id}' at line {number} names no "
                            "known memory or line: not counted",
                        )
                    )
                    continue
                span = source_key(line.session_id, line.entry_id)
                recorded = experience.record(f"memory:{memory_id}", "prevented_mistake", span=span)
                count_on_memory(memory, recorded, applied_at=self.now)
                events.append({"memory": memory_id, "kind": "prevented_mistake", "span": span, "what": what})
            assistant_terms = key_terms(" ".join(line.text for line in lines if line.speaker == "assistant"))
            for memory_id in sorted(injected):
                memory_file = files.get(memory_id)
                if memory_file is None:
                    continue
                if echoes(memory_file.body, assistant_terms):
                    count_on_memory(memory, experience.record(f"memory:{memory_id}", "used"), applied_at=self.now)
                    events.append(
                        {
                            "memory": memory_id,
                            "kind": "used",
                            "span": None,
                            "what": "injected and echoed by the assistant in this span",
                        }
                    )
            # approvals and corrections the span shows: most were recorded when their turn was appended
            # (lca.substrate); record_new adds only what is new, e.g. a memory written from the corrected turn
            try:
                turns = [t for t in (turn_event(x.session_id, x.entry_id, x.meta) for x in lines) if t is not None]
            except LCAError as exc:
                failures.append(Failure("experience", "malformed", str(exc)))
                turns = []
            observed = experience_of(turns, files, transcript=self.stores.transcript)
            for event in experience.record_new(observed):
                source, _, name = event.target.partition(":")
                what = "an explicit approval" if event.kind == "approved" else "an explicit correction"
                events.append(
                    {
                        "memory": name if source == "memory" else None,
                        "target": event.target,
                        "kind": event.kind,
                        "span": event.span,
                        "what": f"{what} in the span",
                    }
                )
        return events

    # -- step 5, after the writes: index and read back
    def _index(self, failures: list[Failure]) -> None:
        try:
            report = self.stores.ingest()
        except LCAError as exc:
            failures.append(Failure("index", "error", str(exc)))
            return
        if report.index.failed_chunks:
            failures.append(
                Failure(
                    "index",
                    "error",
                    f"{report.index.failed_chunks} chunk(s) failed to embed; held back and retried at the next ingest",
                )
            )

    def _read_back(self, writes: Sequence[Write], failures: list[Failure]) -> list[ReadBack]:
        """Every memory this cycle wrote must come back from recall on its own text."""
        out = []
        files = self.stores.memory_files()
        for write in writes:
            if write.action not in ("created", "updated"):
                continue
            memory = files.get(write.memory_id)
            if memory is None:
                out.append(ReadBack(write.memory_id, False, None, "file not found after the write"))
                continue
            config = replace(self.stores.recall_config, policy="fixed-k")
            result = self.stores.recall(RecallContext(query=memory.body.strip()), config)
            source = f"memory:{write.memory_id}["
            rank = next((n for n, c in enumerate(result.candidates, 1) if c.source.startswith(source)), None)
            if any(i.source.startswith(source) for i in result.items):
                out.append(ReadBack(write.memory_id, True, rank, "injected by recall on its own text"))
            else:
                why = next(
                    (c.why_not for c in result.candidates if c.source.startswith(source)), "not among the candidates"
                )
                out.append(ReadBack(write.memory_id, False, rank, f"not injected: {why}"))
                failures.append(
                    Failure(
                        "read_back",
                        "not_retrievable",
                        f"memory '{write.memory_id}' was written but recall on its own text did not return it ({why})",
                    )
                )
        return out

    # -- the record
    def _record(self, result: ConsolidationResult, session_id: str | None) -> None:
        counts = result.counts
        path = self.stores.layout.cycle_report(result.cycle_id)
        record = result.to_dict()
        record["worldview"] = self.ledger.state().summary()  # the learned state this cycle left behind
        atomic_write_bytes(path, json.dumps(record, indent=2, sort_keys=True, default=str).encode())
        if session_id is not None:
            entry = TranscriptEntry(
                id=f"{session_id}:checkpoint:{result.cycle_id}",
                session_id=session_id,
                agent_id="lca",
                kind=EntryKind.CHECKPOINT,
                timestamp=self.now.isoformat(timespec="seconds"),
                content=json.dumps(
                    {"cycle": result.cycle_id, "trigger": result.trigger, "counts": counts}, sort_keys=True
                ),
                meta={"record": str(path)},
            )
            self.stores.append([entry])
        self.ledger.append(
            "cycle_completed",
            result.cycle_id,
            {
                "status": "completed",
                "trigger": result.trigger,
                "marks": result.span,
                "counts": counts,
                "rejected_reasons": [v.reason for v in result.verdicts if v.verdict in ("reject", "remove")],
                "failure_kinds": [f"{f.stage}:{f.kind}" for f in result.failures],
                "record": str(path),
                "writer_model": result.writer_model,
                "reviewer_model": result.reviewer_model,
            },
        )

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)
