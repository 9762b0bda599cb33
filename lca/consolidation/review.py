"""Steps 2 and 3 of a cycle: search existing memory for a candidate, then verify it.

The reviewer sees only the candidate, the memories it touches and the source lines it cites, and
is told to refute rather than confirm. A contradiction rejects the candidate or supersedes the
older memory (never silent coexistence); a claim its sources do not support is downgraded to a
labeled inference or removed. The outcome is a Plan the write stage carries out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from lca.consolidation.parsing import REFUSAL, failure_kind, lexical_support, parse_review, slug
from lca.consolidation.prompts import (
    REVIEWER_DEMOS,
    REVIEWER_INSTRUCTIONS,
    REVIEWER_SYSTEM,
    reviewer_schema,
    with_demos,
)
from lca.consolidation.records import CANDIDATE_TYPES, Candidate, ConsolidationConfig, Failure, Plan, SpanLine, Verdict
from lca.consolidation.stores import CycleStores
from lca.experience import ObservedEvent, source_key
from lca.ledger import LearnedState, key_terms
from lca.memory import Authority, MemoryFile, MemoryRecord, Privacy, SchemaRef, Supersession, TranscriptSpan
from lca.ports import TextGenerator
from lca.secrets import contains_secret, redacted
from lca.types import SourceType, as_utc, parse_timestamp


class CandidateReview:
    """Reviews the candidates of one cycle. Every review is a fresh call with its own messages:
    nothing the writer saw or said reaches the reviewer but the candidate."""

    def __init__(
        self,
        stores: CycleStores,
        reviewer: TextGenerator,
        config: ConsolidationConfig,
        *,
        schema_stamp: tuple[SchemaRef, ...],
        now: datetime,
        say: Callable[[str], None],
    ) -> None:
        self.stores = stores
        self.reviewer = reviewer
        self.config = config
        self.schema_stamp = schema_stamp  # the schemas active this cycle, stamped on every write
        self.now = now  # the cycle's time on the history's clock
        self.say = say

    # -- step 2: the memories a candidate touches, and the one it would update
    def touched(self, candidate: Candidate) -> tuple[list[tuple[MemoryFile, float]], MemoryFile | None]:
        files = self.stores.memory_files()
        if not files:
            return [], None
        index = self.stores.index
        qvec = index.query_vector(candidate.claim)  # embedded once, for the search and the cosines
        hits = index.search(candidate.claim, k=self.config.related_k * 3, mode="hybrid", query_vector=qvec)
        vectors = index.vectors_for_hits(hits) if hits else {}
        terms = key_terms(candidate.claim)
        best: dict[str, tuple[MemoryFile, float]] = {}
        for hit in hits:
            memory_id = hit.pointer.memory_id
            if hit.pointer.source_type is not SourceType.MEMORY or memory_id is None or memory_id not in files:
                continue
            memory = files[memory_id]
            if memory.record.superseded_by is not None:
                continue
            cosine = float(vectors[hit.chunk_id] @ qvec)
            shares_entity = bool(terms & key_terms(memory.body))
            if cosine >= self.config.update_similarity or (cosine >= self.config.related_similarity and shares_entity):
                if memory.record.id not in best or best[memory.record.id][1] < cosine:
                    best[memory.record.id] = (memory, cosine)
        touched = sorted(best.values(), key=lambda mc: -mc[1])[: self.config.related_k]
        update = next(
            (
                m
                for m, cos in touched
                if cos >= self.config.update_similarity and CANDIDATE_TYPES[candidate.type].value == m.record.type.value
            ),
            None,
        )
        return touched, update

    # -- step 3: verify
    def review(
        self, candidate: Candidate, lines: Sequence[SpanLine], state: LearnedState, failures: list[Failure]
    ) -> Plan:
        cfg = self.config
        by_number = {line.number: line for line in lines}
        cited = [by_number[n] for n in candidate.lines]
        support = lexical_support(candidate.claim, [line.text for line in cited])
        touched, update = self.touched(candidate)
        touched_ids = tuple(m.record.id for m, _ in touched)
        known = state.hypotheses.get(candidate.id)
        refutations = list(known.refutations) if known is not None else []
        base: dict[str, Any] = dict(
            candidate=candidate.id,
            lexical_support=round(support, 3),
            touched=touched_ids,
            update_of=update.record.id if update else None,
            earlier_refutations=len(refutations),
        )
        if contains_secret(candidate.claim):  # policy, not judgment: no reviewer can wave a credential through
            return Plan(
                candidate,
                Verdict(
                    verdict="remove",
                    supported=False,
                    contradicts=None,
                    reasoning="",
                    reasoning_first=False,
                    reason="holds a secret or credential: never written to durable memory",
                    **base,
                ),
            )
        if not cfg.verify:
            verdict = Verdict(
                verdict="accept",
                supported=bool(cited),
                contradicts=None,
                reasoning="",
                reasoning_first=False,
                reason="written without verification (ablation)",
                **base,
            )
            return self.plan(candidate, verdict, cited, update, None, authority=Authority.UNREVIEWED)
        parts = [
            f"Candidate ({candidate.type}): {candidate.claim}",
            "Source lines it cites:\n"
            + ("\n".join(f"[{line.number}] {line.speaker}: {line.text}" for line in cited) or "(none)"),
            "Existing memories:\n"
            + ("\n".join(f"{m.record.id}: {redacted(' '.join(m.body.split()))[:400]}" for m, _ in touched) or "(none)"),
        ]
        if refutations:
            parts.append(
                "Earlier refutations of this claim:\n" + "\n".join(f"- {r['reason']}" for r in refutations[-4:])
            )
        parts.append(REVIEWER_INSTRUCTIONS)
        messages = with_demos(REVIEWER_SYSTEM, REVIEWER_DEMOS, "\n\n".join(parts))
        self.say(f"verify: {candidate.claim[:50]}")
        try:
            raw = self.reviewer.generate(
                messages,
                max_tokens=cfg.reviewer_max_tokens,
                temperature=0.0,
                seed=cfg.seed,
                json_schema=reviewer_schema(touched_ids),
            )
        except Exception as exc:  # the generator's failure is the cycle's record, never a crash
            failures.append(Failure("verify", failure_kind(exc), str(exc), candidate=candidate.id))
            return Plan(
                candidate,
                Verdict(
                    verdict="failed",
                    supported=False,
                    contradicts=None,
                    reasoning="",
                    reasoning_first=False,
                    reason=f"reviewer failed: {exc}",
                    **base,
                ),
            )
        review = parse_review(raw)
        if review is None:
            kind = "refused" if REFUSAL.search(raw) else "malformed"
            failures.append(
                Failure("verify", kind, "reviewer output lacks a readable supported or verdict", candidate.id, raw)
            )
            return Plan(
                candidate,
                Verdict(
                    verdict="failed",
                    supported=False,
                    contradicts=None,
                    reasoning="",
                    reasoning_first=False,
                    reason="reviewer output unreadable: nothing written (fail closed)",
                    raw=raw,
                    **base,
                ),
            )
        contradicted = None
        if review["contradicts"] is not None:
            contradicted = next((m for m, _ in touched if m.record.id == review["contradicts"]), None)
            if contradicted is None:
                failures.append(
                    Failure(
                        "verify",
                        "unknown_memory",
                        f"reviewer named '{review['contradicts']}', which is not among the memories it was shown",
                        candidate.id,
                        raw,
                    )
                )
                return Plan(
                    candidate,
                    Verdict(
                        verdict="failed",
                        supported=False,
                        contradicts=review["contradicts"],
                        reasoning=review["reasoning"],
                        reasoning_first=review["reasoning_first"],
                        reason="reviewer named an unknown memory: nothing written",
                        raw=raw,
                        **base,
                    ),
                )
        supported = bool(review["supported"] and cited and support >= cfg.min_lexical_support)
        why_support = (
            "supported by its source lines"
            if supported
            else "no cited source line"
            if not cited
            else f"cited lines share only {support:.0%} of its key terms"
            if support < cfg.min_lexical_support
            else "reviewer: the source lines do not say it"
        )
        common = dict(
            supported=supported,
            contradicts=review["contradicts"],
            reasoning=review["reasoning"],
            reasoning_first=review["reasoning_first"],
            raw=raw,
            **base,
        )
        if contradicted is not None:
            if review["verdict"] == "supersede" and supported:
                if self.newer(cited, contradicted):
                    self.record_contradicted(contradicted, cited)
                    return self.plan(
                        candidate,
                        Verdict(
                            verdict="supersede",
                            reason=f"contradicts {contradicted.record.id}; newer and supported: supersedes it",
                            **common,
                        ),
                        cited,
                        None,
                        contradicted,
                    )
                reason = (
                    f"contradicts {contradicted.record.id} but its evidence is not newer: rejected, conflict marked"
                )
            elif supported:
                reason = f"contradicts {contradicted.record.id}; reviewer did not resolve it: rejected, conflict marked"
            else:
                reason = f"contradicts {contradicted.record.id} and is not supported ({why_support}): rejected"
            plan = Plan(candidate, Verdict(verdict="reject", reason=reason, **common))
            if supported:  # the transcript holds evidence against the memory: never silent
                plan.conflict_on = contradicted
                self.record_contradicted(contradicted, cited)
            return plan
        if review["verdict"] == "reject":
            said = " ".join(review["reasoning"].split())[:160] or "no reasoning given"
            return Plan(
                candidate, Verdict(verdict="reject", reason=f"reviewer rejected it: {said} ({why_support})", **common)
            )
        if not supported:
            if cfg.unsupported == "remove":
                return Plan(
                    candidate, Verdict(verdict="remove", reason=f"unsupported ({why_support}): removed", **common)
                )
            return self.plan(
                candidate,
                Verdict(
                    verdict="downgrade", reason=f"unsupported ({why_support}): written as a labeled inference", **common
                ),
                cited,
                update,
                None,
                authority=Authority.INFERRED,
            )
        return self.plan(
            candidate,
            Verdict(
                verdict="accept", reason=why_support + (f"; updates {update.record.id}" if update else ""), **common
            ),
            cited,
            update,
            None,
        )

    def record_contradicted(self, memory: MemoryFile, cited: Sequence[SpanLine]) -> None:
        """E learns the verdict against a memory that lost (superseded, or marked in conflict with
        supported evidence): ``contradicted``, citing the latest line of that evidence; once per line."""
        line = max(cited, key=lambda c: c.number)
        span = source_key(line.session_id, line.entry_id)
        self.stores.experience.record_new([ObservedEvent(f"memory:{memory.record.id}", "contradicted", span)])

    def newer(self, cited: Sequence[SpanLine], memory: MemoryFile) -> bool:
        """Is the candidate's evidence at least as recent as the memory's? Compared by the times of the
        transcript entries each rests on (history may be imported: a file's creation time says nothing
        about when its facts were stated); a memory without readable sources falls back to ``created``."""
        latest = max((t for t in (parse_timestamp(line.timestamp) for line in cited) if t), default=None)
        if latest is None:
            return False
        return latest >= (self.evidence_time(memory) or as_utc(memory.record.created))

    def evidence_time(self, memory: MemoryFile) -> datetime | None:
        times = []
        transcript = self.stores.transcript
        for span in memory.record.sources:
            if not transcript.session_path(span.session).exists():
                continue
            wanted = set(span.entries) | {span.first, span.last} - {None}
            for entry in transcript.read(span.session).entries:
                at = parse_timestamp(entry.timestamp) if entry.id in wanted else None
                if at:
                    times.append(at)
        return max(times) if times else None

    def plan(
        self,
        candidate: Candidate,
        verdict: Verdict,
        cited: Sequence[SpanLine],
        update: MemoryFile | None,
        supersede: MemoryFile | None,
        *,
        authority: Authority = Authority.REVIEWED,
    ) -> Plan:
        mtype = CANDIDATE_TYPES[candidate.type]
        claim = redacted(candidate.claim)  # a claim holding a credential is removed before this; never written
        body = claim if authority is not Authority.INFERRED else f"Inference (no supporting source span): {claim}"
        sources_by_session: dict[str, list[str]] = {}
        for line in cited:
            sources_by_session.setdefault(line.session_id, []).append(line.entry_id)
        spans = tuple(TranscriptSpan(session=s, entries=tuple(ids)) for s, ids in sources_by_session.items())
        stamp = self.schema_stamp
        if update is not None:
            # A repeat reinforces the memory it repeats: its supporting spans are added; its text and
            # authority stay (a hand-written body is never replaced by a one-line paraphrase). A repeat
            # without support adds nothing.
            old = update.record
            merged = tuple(dict.fromkeys(old.sources + spans))
            if authority is Authority.INFERRED or merged == old.sources:
                verdict = replace(verdict, reason=verdict.reason + f"; repeats {old.id}: nothing new to record")
                return Plan(candidate, verdict)
            record = old.model_copy(update={"sources": merged, "schemas": stamp or old.schemas, "content_hash": None})
            body = update.body
        else:
            record = MemoryRecord(
                id=f"{mtype.value}-{slug(candidate.claim)}-{candidate.id[-6:]}",
                type=mtype,
                created=self.now,
                authority=authority,
                privacy=Privacy(self.config.privacy),
                sources=spans,
                schemas=stamp,
                supersedes=(Supersession(id=supersede.record.id, reason=verdict.reason),) if supersede else (),
            )
        plan = Plan(candidate, verdict, record, body, supersede)
        for memory in (update, supersede):
            if memory is not None:
                plan.base_hashes[memory.record.id] = memory.computed_hash
        return plan
