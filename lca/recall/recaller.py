"""The recall pipeline: score the candidates, filter, apply quotas and MMR, fit the budget, log."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lca.activation import DORMANT_BELOW, WILDCARD_MODES, Access, query_shape, ucb_bonus
from lca.errors import EmbeddingFailedError
from lca.recall.config import RecallConfig
from lca.recall.floor import (
    StoreFloor,
    TopicReading,
    anchored,
    proper_names,
    query_anchor,
    speaks_of_own_history,
    store_floor,
    topic_reading,
)
from lca.recall.pairing import FLOOR_REASON, inherit_from_replies, pair_corrections
from lca.recall.records import RecallContext, RecallResult, ScoredCandidate, log_record
from lca.recall.resonance import CandidateFacts, TermScope, term_columns
from lca.recall.scoring import CandidateReading, scored_candidates
from lca.recall.shown import elsewhere, excerpt, exchange_prompts, item_label, term_stems, trim
from lca.recall.terms import (
    DEFAULT_AUTHORITY,
    age_days,
    asks_about_past,
    asks_for_agent_words,
    replies_to_replaced,
    risk_reasons,
    transcript_authority,
)
from lca.recall.tokens import TokenTally
from lca.recall_log import RecallLog
from lca.secrets import holds_redaction
from lca.temporal_anchor import TemporalAnchor
from lca.types import SourceType, as_utc

# ---- the pipeline ----------------------------------------------------------------------
SCOPE_KEYS = ("visibility", "project", "role")  # where a turn was said, from its transcript entry's meta


class Recaller:
    """Runs recall over one substrate's index, memory files and experience log.

    ``memory_files`` maps memory ids to loaded memory files; ``experience`` maps a target
    ("memory:<id>" or a transcript pointer key) to its event counts; ``count_tokens``
    counts tokens the way the host's model does (the caller supplies it; ``count_tokens_many``, optional, several
    texts in one call).
    """

    def __init__(
        self,
        index,
        *,
        memory_files: Callable[[], Mapping[str, Any]],
        experience: Callable[[], Mapping[str, Mapping[str, int]]],
        count_tokens: Callable[[str], int],
        count_tokens_many: Callable[[Sequence[str]], list[int]] | None = None,
        config: RecallConfig | None = None,
        log: RecallLog | None = None,
        retrievals=None,
        entry_meta: Callable[[str, str], Mapping[str, Any]] | None = None,
        corrections: Callable[[], Mapping[str, Sequence[str]]] | None = None,
        reply_to: Callable[[str, str], str | None] | None = None,
        agent_turns: Callable[[str], frozenset[str]] | None = None,
        replacements: Callable[[], Mapping[str, Sequence[Any]]] | None = None,
    ) -> None:
        self.index = index
        # ``transcript:<turn>`` -> how each later event acts on it (lca.events.Replacement: held or marked); read
        # with turn_supersession: a marked turn is penalized, and every replaced turn shown says what replaced it
        self.replacements = replacements
        self.corrections = corrections  # a turn -> the turns whose explicit event corrected or superseded it
        self.reply_to = reply_to  # (session, entry) -> the entry that answers that turn (Transcript.reply_to)
        self.agent_turns = agent_turns  # session -> the ids of its turns the agent wrote (K: its own words)
        self.entry_meta = entry_meta  # (session, entry) -> the turn's meta: where it was said (visibility, project)
        self._fallback: str | None = None  # set by a recall that could not rank the store's usual way
        self.retrievals = retrievals
        self.memory_files = memory_files
        self.experience = experience
        self.count_tokens = count_tokens
        self.count_tokens_many = count_tokens_many
        self.config = config or RecallConfig()
        self.log = log  # lca.recall_log: bounded, rotated
        self._floor: StoreFloor | None = None  # the floor the last recall applied
        self._store_in_pool = False  # the last search returned the whole store
        self._in_project: set[str] = set()  # the last recall's candidates said in the project it was asked in
        self._pinned: set[str] = set()  # the last recall's resumed-session tail, offered first (_resume_tail)
        self._whole = False  # the last recall let the whole history past the floor
        self._whole_why = ""  # ... and why: what made the question one about this history
        self._topic: TopicReading | None = None  # the last query read against a small store's topic
        self._query_vector: np.ndarray | None = None  # the last query's vector (None: ranked by BM25 alone)
        self._tokens = TokenTally(count_tokens, count_tokens_many)  # within one recall: each rendered text counted once
        self._query_terms: frozenset[str] = frozenset()  # the last query's terms (an excerpt shows sentences with them)
        self._excerpts: dict[str, tuple[str, bool]] = {}  # within one recall: a long text's excerpt, made once
        self._before: Mapping[str, str] | None = None  # within one recall: each transcript candidate's chunk before

    def recall(self, context: RecallContext, *, config: RecallConfig | None = None) -> RecallResult:
        cfg = config or self.config
        started = time.perf_counter()
        self._floor, self._store_in_pool, self._whole, self._fallback = None, False, False, None
        self._whole_why, self._topic, self._query_vector, self._excerpts = "", None, None, {}
        self._in_project, self._pinned, self._query_terms, self._before = set(), set(), frozenset(), None
        self._tokens = TokenTally(self.count_tokens, self.count_tokens_many)
        if cfg.policy == "none":
            return self._finish(context, cfg, "none", [], [], started)
        scored, vectors = self._score(context, cfg)
        action = "inject"
        quotas = {"memory": cfg.memory_quota, "transcript": cfg.transcript_quota}
        budget = cfg.token_budget
        if cfg.fit_budget:
            scored = self._whole_history(context, cfg, scored, budget)
        if context.resume and cfg.resume_turns and self._store_in_pool:  # the latest session is among the candidates
            scored = self._resume_tail(scored, cfg.resume_turns)
        if cfg.policy == "adaptive":
            if all((c.why_not or "").startswith(FLOOR_REASON) for c in scored):
                action = "skip"  # nothing relevant enough: inject nothing rather than noise
            elif context.continues_previous_task and context.previous_injection_used is False:
                action = "shrink"  # the last injection went unused on this same task: halve the offer
            elif context.continues_previous_task and context.previous_injection_used:
                action = "defer"  # the working set already holds what this task used: offer nothing new now
            elif not any(c.source_type == "memory" for c in scored):
                quotas["transcript"] += quotas["memory"]  # a role with no memories leans on its transcript
            if action == "shrink":
                quotas = {k: v // 2 for k, v in quotas.items()}
                budget //= 2
        if action in ("skip", "defer"):
            scored = [replace(c, why_not=c.why_not or f"adaptive policy: {action} this turn") for c in scored]
            return self._finish(context, cfg, action, [], scored, started, budget)
        selected, rest = self._select(scored, vectors, cfg, quotas, budget)
        return self._finish(context, cfg, action, selected, rest, started, budget)

    # -- the floor's exceptions
    def _whole_history(
        self, context: RecallContext, cfg: RecallConfig, scored: list[ScoredCandidate], budget: int
    ) -> list[ScoredCandidate]:
        """A question asked of a small store (``small_store``) that is about the history itself: in the first
        person ("what did I say", "our plan"), about history by its signals, on the store's topic (closer to
        the store's centroid, or to its few best turns, than any off-topic question: "which city is the middle
        stop of the October trip now?"), or naming a name the history uses ("Tidewater"), lets the whole history
        past the floor; one asked within a project (the host says where it is asked) lets that project's history
        past.
        That history is its context, and a paraphrase ("how are breaking interface changes labelled?" for "API
        versioning: Accept headers") scores no higher than chatter, so a floor would starve it. What is offered is
        then cut by the token budget alone, best first; quotas do not apply (``_select``); policy filters still
        hold. A question asked with no such context (an encyclopedic one) keeps the floor."""
        self._whole = False
        refused = {c.chunk_id for c in scored if (c.why_not or "").startswith(FLOOR_REASON)}
        if not refused or not self._store_in_pool:
            return scored
        why = self._about_this_history(context, scored, cfg)
        if why is None:
            refused &= self._in_project
            if not refused:
                return scored
            why = f"asked in project {context.project!r}: its turns"
        self._whole, self._whole_why = True, why
        return [replace(c, why_not=None) if c.chunk_id in refused else c for c in scored]

    def _about_this_history(
        self, context: RecallContext, scored: list[ScoredCandidate], cfg: RecallConfig
    ) -> str | None:
        """What makes the question one about this store's history, or None."""
        if speaks_of_own_history(context.query):
            return "a question in the first person"
        if context.about_history:
            return "a question about history"
        if self._topic is not None and self._topic.on_topic:
            return f"on the store's topic ({self._topic.describe()})"
        if cfg.shared_names and (asked := proper_names(context.query)):
            named = set().union(*(proper_names(c.text) for c in scored)) & asked
            if named:
                return f"it names what the history names ({', '.join(sorted(named))})"
        return None

    def _resume_tail(self, scored: list[ScoredCandidate], turns: int) -> list[ScoredCandidate]:
        """A question that picks up interrupted work ("where did things stand?") is answered by where the
        latest session ended, which its words rarely resemble: that session's last ``turns`` candidates clear
        the floor and are offered first, within the budget (policy filters still hold; ``_select``). Only where the
        store was ranked whole: in a larger one the latest session need not be among the candidates, and the
        handoff (full-lca) carries where the work stood."""
        dated = [c for c in scored if c.source_type == "transcript" and c.timestamp]
        if not dated:
            return scored
        latest = max(dated, key=lambda c: (c.timestamp or "", c.source))
        session = latest.source.split("#", 1)[0]
        tail = sorted(
            (c for c in dated if c.source.split("#", 1)[0] == session), key=lambda c: (c.timestamp or "", c.source)
        )[-turns:]
        self._pinned = {c.chunk_id for c in tail if c.why_not is None or c.why_not.startswith(FLOOR_REASON)}
        return [replace(c, why_not=None) if c.chunk_id in self._pinned else c for c in scored]

    def _fits(self, candidates: list[ScoredCandidate], cfg: RecallConfig, budget: int) -> bool:
        """Whether all ``candidates``, rendered as injected, fit ``budget`` together (``TokenTally.fit``); a long one
        counted as its opening cut (an excerpt keeps to the same cap, and reading each for the query's sentences would
        cost every recall over a large store what only the few that fit need)."""
        rendered = [self._render_item(n, c, trim(c.text, cfg.item_char_cap)[0]) for n, c in enumerate(candidates, 1)]
        return self._tokens.fit(rendered, budget)

    # -- scoring
    def _score(self, context: RecallContext, cfg: RecallConfig) -> tuple[list[ScoredCandidate], dict[str, np.ndarray]]:
        index = self.index
        as_of = context.as_of or datetime.now(UTC)  # a relative date in the query is read against this moment
        try:
            qvec: np.ndarray | None = index.query_vector(context.query)
        except EmbeddingFailedError as exc:  # fail closed on the vector, not on recall: rank by BM25 alone
            qvec, self._fallback = None, f"lexical: {exc}"
        size = index.chunk_count()
        small = size <= cfg.small_store
        pool = max(cfg.pool, size) if small else cfg.pool  # a small store is ranked whole
        if qvec is None:
            hits = index.search(context.query, k=pool, pool=pool, mode="lexical", as_of=as_of)
        else:  # the store's own ranking (``lca.retrieval``): S below is its score, the other terms re-weigh it
            retrieval = cfg.retrieval or index.retrieval
            if small and not cfg.small_store_feedback:
                retrieval = replace(retrieval, feedback_weight=0.0, lexical_feedback_weight=0.0)
            hits = index.search(context.query, k=pool, pool=pool, query_vector=qvec, as_of=as_of, config=retrieval)
        self._floor = floor = store_floor(
            index, floor=cfg.floor, mode=cfg.floor_mode, minimum=cfg.floor_min, margin=cfg.floor_margin
        )
        self._store_in_pool = small or len(hits) < cfg.pool  # ranked whole, or ran out of store before the pool
        if cfg.fit_budget and cfg.store_topic and qvec is not None and self._store_in_pool:
            self._topic = topic_reading(index, qvec, cfg.topic_margin)
        if not hits:
            return [], {}
        anchor = query_anchor(context.query, as_of) if cfg.date_anchor else None
        self._query_terms = term_stems(context.query) if cfg.excerpts else frozenset()
        vectors = index.vectors_for_hits(hits)
        memories = self.memory_files()
        experience = self.experience()
        markers = context.task_markers()
        weights = cfg.weights
        uses_history = weights.activation > 0 or cfg.wildcard_mode != "precision"
        history = self.retrievals.by_target() if self.retrievals is not None and uses_history else {}
        scope = TermScope(  # what every candidate's terms are read against (lca.recall.resonance)
            weights,
            cfg.half_life_days,
            {**DEFAULT_AUTHORITY, **(cfg.authority_table or {})},
            context.exact_wording,
            markers,
            history if uses_history else None,
            time.time(),
        )
        as_of_utc = as_utc(as_of)
        stale = replies_to_replaced(self.corrections, self.reply_to, self.agent_turns) if cfg.turn_supersession else {}
        replaced_turns = self.replacements() if cfg.turn_supersession and self.replacements is not None else {}
        # asked what happened: a decision since superseded is history, shown marked; a corrected turn stays held
        past = not context.about_history and cfg.past_tense and asks_about_past(context.query)
        agent_risk = 0.0 if asks_for_agent_words(context.query) else cfg.agent_turn_risk
        agent_turns: dict[str, frozenset[str]] = {}  # per session, read once per recall
        agent_ids: set[str] = set()  # the candidates the agent wrote (K), which lend a user's turn their S
        facts: list[CandidateFacts] = []  # what each term reads of a candidate
        seen: list[CandidateReading] = []  # ... and what its refusal and its record read
        scoped = bool(markers) or context.public_channel  # where the turn is asked matters: read where each was said
        for hit in hits:
            key = hit.pointer.key()
            cosine = float(vectors[hit.chunk_id] @ qvec) if qvec is not None else float("nan")
            if hit.dense_score is not None:  # the chunk's best dense key: one of its sentences, if the store keys them
                cosine = max(cosine, float(hit.dense_score))
            private_in_public = superseded = expired = conflict = outside_role = False
            answers_replaced = answers_superseded = possibly_replaced = False
            marker: str | None = None  # what replaced the turn; where it was said, if not here
            said_in: str | None = None
            agent, clears = 0.0, self._clears_floor(cosine, hit.timestamp, anchor)
            if hit.pointer.source_type is SourceType.MEMORY:
                memory = memories.get(hit.pointer.memory_id)
                record = memory.record if memory is not None else None
                counts = experience.get(f"memory:{hit.pointer.memory_id}", {})
                authority_key = f"memory:{record.authority.value}" if record else "memory:unreviewed"
                tags = {t.lower() for t in (record.tags + record.projects)} if record else set()
                if record is not None:
                    private_in_public = context.public_channel and record.privacy.value != "public"
                    superseded = record.superseded_by is not None
                    expired = bool(
                        (record.valid_to and as_utc(record.valid_to) < as_utc(as_of))
                        or (record.valid_from and as_utc(record.valid_from) > as_utc(as_of))
                    )
                    conflict = bool(record.conflicts)
                    outside_role = bool(
                        context.role and record.roles and context.role.lower() not in {r.lower() for r in record.roles}
                    )
                source_type = "memory"
            else:
                turn = key.split("[", 1)[0]  # events name the turn; a chunk of it shares them
                counts = experience.get(turn, {}) or experience.get(key, {})
                # the ledger of explicit events: a turn the user corrected, or a decision a later one replaced
                superseded = cfg.turn_supersession and bool(
                    counts.get("corrected") or (counts.get("superseded") and not past)
                )
                if reps := replaced_turns.get(turn):  # labelled or inferred (lca.events): the header says so
                    rep = next((r for r in reps if r.status == "held"), reps[0])
                    marker = rep.marker()
                    possibly_replaced = rep.status != "held" and not superseded
                    possibly_replaced &= not (past and rep.event.kind == "superseded")
                if (replaced := stale.get(turn)) is not None:  # a reply to a turn an explicit event replaced
                    kinds = experience.get(replaced, {})  # a decision superseded (no detail corrected): filtered
                    answers_superseded = bool(kinds.get("superseded")) and not kinds.get("corrected") and not past
                    answers_replaced = not answers_superseded
                # the agent's own words (K), read where a score can matter: a store ranked whole, or past the floor
                if agent_risk and (clears or self._store_in_pool) and self.agent_turns and hit.pointer.session_id:
                    if (by_agent := agent_turns.get(hit.pointer.session_id)) is None:
                        by_agent = agent_turns[hit.pointer.session_id] = self.agent_turns(hit.pointer.session_id)
                    agent = agent_risk if hit.pointer.entry_id in by_agent else 0.0
                    if agent:
                        agent_ids.add(hit.chunk_id)
                authority_key, source_type = transcript_authority(hit.pointer.peer_agent), "transcript"
                tags = {hit.channel.lower()} if hit.channel else set()  # a transcript turn carries its channel
                if scoped:  # ... and, in its meta, the visibility, project and role of where it was said
                    meta = self._meta(hit.pointer.session_id, hit.pointer.entry_id)
                    tags |= {str(meta[k]).lower() for k in SCOPE_KEYS if meta.get(k)}
                    # a turn said anywhere but a public channel (or nowhere known) stays out of a public one
                    private_in_public = context.public_channel and meta.get("visibility") != "public"
                    said_in = elsewhere(meta, context)
            if context.project and context.project.lower() in tags:
                self._in_project.add(hit.chunk_id)
            facts.append(
                CandidateFacts(
                    key,
                    hit.score,
                    counts,
                    age_days(hit.timestamp, as_of_utc),
                    authority_key,
                    tags,
                    risk_reasons(
                        private_in_public=private_in_public,
                        # a credential is redacted, not refused: the candidate keeps the risk term's reason and its K.
                        # The index's search shows only redacted text (lca.index.redaction), the one recall shows or logs
                        secret=holds_redaction(hit.text),
                        superseded=superseded,
                        expired=expired,
                        about_history=context.about_history,
                        conflict=conflict,
                        outside_role=outside_role,
                        answers_replaced=answers_replaced,
                        answers_superseded=answers_superseded,
                        possibly_replaced=possibly_replaced,
                    ),
                    agent,
                )
            )
            seen.append(CandidateReading(hit, source_type, cosine, clears, marker, said_in))
        out = scored_candidates(facts, seen, term_columns(facts, scope), cfg, context, f"< {floor.describe()})")
        if cfg.correction_pairing and self.corrections is not None:
            out = pair_corrections(
                out, self.corrections(), weights.risk, lambda c: self._clears_floor(c.cosine, c.timestamp, anchor)
            )
        chunks_before = getattr(self.index, "chunks_before", None)  # an index that knows no session order: none
        if chunks_before is not None and (cfg.exchanges or (cfg.reply_inheritance and agent_ids)):
            self._before = chunks_before(c.chunk_id for c in out if c.source_type == "transcript")
            out = inherit_from_replies(out, self._before, agent_ids, cfg.reply_inheritance, weights.similarity)
        out.sort(key=lambda c: (-c.score, c.chunk_id))
        self._query_vector = qvec  # its shape is read only where a retrieval is recorded (_finish)
        return out, vectors

    def _clears_floor(self, cosine: float, timestamp: str | None, anchor: TemporalAnchor | None) -> bool:
        """Whether a candidate clears this recall's floor on its own: its cosine reaches it, or it is dated where
        the question's date expression points. Without a query vector (cosine NaN) there is no floor to hold."""
        floor = self._floor
        return floor is None or not math.isfinite(cosine) or cosine >= floor.value or anchored(anchor, timestamp)

    def _meta(self, session_id: str | None, entry_id: str | None) -> Mapping[str, Any]:
        if self.entry_meta is None or not session_id or not entry_id:
            return {}
        return self.entry_meta(session_id, entry_id)

    # -- selection
    def _select(
        self,
        scored: list[ScoredCandidate],
        vectors: Mapping[str, np.ndarray],
        cfg: RecallConfig,
        quotas: dict[str, int],
        budget: int,
    ) -> tuple[list[ScoredCandidate], list[ScoredCandidate]]:
        eligible = [c for c in scored if c.why_not is None]
        decided: dict[str, ScoredCandidate] = {c.chunk_id: c for c in scored if c.why_not is not None}
        chosen: list[ScoredCandidate] = []
        used = {"memory": 0, "transcript": 0}
        tokens = 0
        remaining = list(eligible)
        share, temperature = WILDCARD_MODES[cfg.wildcard_mode]
        n_wild = int(round(share * sum(quotas.values())))
        counts = {kind: sum(1 for c in eligible if c.source_type == kind) for kind in quotas}
        if (
            cfg.fit_budget
            and any(counts[k] > quotas[k] > 0 for k in quotas)
            and (self._whole or self._fits(eligible, cfg, budget))
        ):
            # the relevant history fits the budget, or is the whole of a small store's history: a quota would
            # only cut relevant history, so the budget alone decides (a zero quota, a source switched off,
            # stays zero)
            quotas = {k: max(q, counts[k]) if q > 0 else 0 for k, q in quotas.items()}
        pinned = [c for c in eligible if c.chunk_id in self._pinned]
        if pinned and quotas["transcript"] > 0:  # the resumed session's tail takes its slots on top of the quota
            quotas["transcript"] = max(quotas["transcript"], len(pinned) + min(quotas["transcript"], 2))
        main_slots = sum(quotas.values()) - n_wild
        # MMR: relevance against redundancy with what is already chosen (the best cosine to any chosen item),
        # kept as one running vector so a pick costs one matrix-vector product; ties fall by chunk id
        relevance = np.array([c.score for c in remaining], dtype=np.float64)
        if self._pinned and len(relevance):  # the resumed session's tail first, in its order of relevance
            relevance = relevance + np.array([2.0 if c.chunk_id in self._pinned else 0.0 for c in remaining])
        matrix = np.stack([vectors[c.chunk_id] for c in remaining]) if remaining else np.zeros((0, 1))
        redundancy = np.zeros(len(remaining))
        by_id = np.argsort(np.argsort([c.chunk_id for c in remaining], kind="stable"), kind="stable")
        alive = np.ones(len(remaining), dtype=bool)
        quota_held: set[str] = set()  # refused by a filled source quota: a wildcard may still take them
        position, brought = {c.chunk_id: i for i, c in enumerate(remaining)}, 0  # brought: prompts, outside quotas
        before = self._before  # read in _score: each transcript candidate's chunk before it (None: no session order)
        prompts = (
            exchange_prompts(scored, before, lambda why: not why or why.startswith(FLOOR_REASON))
            if cfg.exchanges and before is not None
            else {}
        )
        while alive.any() and len(chosen) - brought < main_slots:
            mmr = relevance if not chosen else cfg.mmr_lambda * relevance - (1.0 - cfg.mmr_lambda) * redundancy
            masked = np.where(alive, mmr, -np.inf)
            ties = np.flatnonzero(masked == masked.max())
            pick = int(ties[np.argmin(by_id[ties])])
            alive[pick] = False
            best = remaining[pick]
            if used[best.source_type] >= quotas[best.source_type]:
                quota_held.add(best.chunk_id)
                decided[best.chunk_id] = replace(
                    best, why_not=f"{best.source_type} quota ({quotas[best.source_type]}) reached"
                )
                continue
            text, trimmed = self._shown(best.text, cfg)
            cost = self._tokens(self._render_item(len(chosen) + 1, best, text))
            if tokens + cost > budget:
                decided[best.chunk_id] = replace(
                    best, why_not=f"token budget: needs {cost}, {budget - tokens} of {budget} left"
                )
                continue
            tokens += cost
            used[best.source_type] += 1
            chosen.append(replace(best, injected=True, tokens=cost, trimmed=trimmed, text=text))
            similar = matrix @ matrix[pick]
            redundancy = similar if len(chosen) == 1 else np.maximum(redundancy, similar)
            prompt = self._prompt_for(prompts.get(best.chunk_id), chosen, cfg, budget - tokens)
            if prompt is not None:  # the turn it answers, just before it; outside the quota
                tokens, brought = tokens + prompt.tokens, brought + 1
                chosen.insert(len(chosen) - 1, prompt)
                decided.pop(prompt.chunk_id, None)
                if (at := position.get(prompt.chunk_id)) is not None:
                    alive[at] = False
                    redundancy = np.maximum(redundancy, matrix @ matrix[at])
        remaining = [c for c, left in zip(remaining, alive) if left or c.chunk_id in quota_held]
        if n_wild:
            chosen, tokens = self._wildcards(
                remaining, decided, chosen, used, quotas, tokens, budget, n_wild, temperature, cfg
            )
        picked = {x.chunk_id for x in chosen}
        for c in remaining:
            if c.chunk_id in decided or c.chunk_id in picked:
                continue
            if used[c.source_type] >= quotas[c.source_type]:
                reason = f"{c.source_type} quota ({quotas[c.source_type]}) reached"
            else:
                reason = "not picked: the remaining slots are reserved for wildcards"
            decided[c.chunk_id] = replace(c, why_not=reason)
        rest = [decided[c.chunk_id] for c in scored if c.chunk_id in decided]
        return chosen, rest

    def _wildcards(self, remaining, decided, chosen, used, quotas, tokens, budget, n_wild, temperature, cfg):
        """Reserved slots for relevant but dormant records, by an exploration bonus that decays as
        a record is examined; each pick is labeled a wildcard."""
        history = self.retrievals.by_target() if self.retrievals is not None else {}
        examined = {key: sum(1 for a in accesses if a.wildcard) for key, accesses in history.items()}
        total = sum(examined.values())
        dormant = [c for c in remaining if c.terms.get("activation", 0.0) < DORMANT_BELOW]
        dormant.sort(key=lambda c: (-(c.score + ucb_bonus(examined.get(c.source, 0), total, temperature)), c.chunk_id))
        picked = 0
        slots = sum(quotas.values())  # wildcard slots come out of the total, not a source's quota: a source whose
        for c in dormant:  # quota the main picks filled (a store of turns alone) still gets its dormant record offered
            if picked >= n_wild or sum(used.values()) >= slots:
                break
            if quotas[c.source_type] == 0:  # a source switched off stays off
                continue
            text, trimmed = self._shown(c.text, cfg)
            item = replace(c, wildcard=True)
            cost = self._tokens(self._render_item(len(chosen) + 1, item, text))
            if tokens + cost > budget:
                decided[c.chunk_id] = replace(c, why_not=f"token budget (wildcard): needs {cost}")
                continue
            tokens += cost
            used[c.source_type] += 1
            picked += 1
            decided.pop(c.chunk_id, None)
            chosen.append(replace(item, injected=True, tokens=cost, trimmed=trimmed, text=text))
        return chosen, tokens

    def _prompt_for(
        self, prompt: ScoredCandidate | None, chosen: list[ScoredCandidate], cfg: RecallConfig, room: int
    ) -> ScoredCandidate | None:
        """The turn the last pick answers, as an item, where it fits ``room`` and costs no more than the pick (a
        page-long prompt would crowd out the next pick; a reply's short question does not)."""
        if prompt is None or any(prompt.chunk_id == c.chunk_id for c in chosen):
            return None
        text, trimmed = self._shown(prompt.text, cfg)
        prompt = replace(prompt, prompt_of=chosen[-1].chunk_id)
        cost = self._tokens(self._render_item(len(chosen) + 1, prompt, text))
        if cost > min(room, chosen[-1].tokens):
            return None
        return replace(prompt, injected=True, tokens=cost, trimmed=trimmed, text=text, why_not=None)

    def _shown(self, text: str, cfg: RecallConfig) -> tuple[str, bool]:
        """What of a chosen candidate's text is shown within the item cap (``lca.recall.shown``)."""
        if not cfg.excerpts or len(text) <= cfg.item_char_cap:
            return trim(text, cfg.item_char_cap)
        if text not in self._excerpts:
            self._excerpts[text] = excerpt(text, cfg.item_char_cap, self._query_terms)
        return self._excerpts[text]

    @staticmethod
    def _render_item(number: int, item: ScoredCandidate, text: str) -> str:
        return f"{item_label(number, item)}\n{text}\n"

    def _finish(
        self,
        context: RecallContext,
        cfg: RecallConfig,
        action: str,
        items: list[ScoredCandidate],
        rest: list[ScoredCandidate],
        started: float,
        budget: int | None = None,
    ) -> RecallResult:
        budget = cfg.token_budget if budget is None else budget
        tokens = sum(i.tokens for i in items)
        body = "".join(self._render_item(n, item, item.text) for n, item in enumerate(items, 1))
        block = (
            f'<recalled-context policy="{cfg.policy}" action="{action}" items="{len(items)}" '
            f'tokens="{tokens}/{budget}">\n{body}</recalled-context>\n'
        )
        ordered = sorted([*items, *rest], key=lambda c: (-c.score, c.chunk_id))
        floor = self._floor
        result = RecallResult(
            context,
            cfg.policy,
            action,
            tuple(items),
            tuple(ordered),
            tokens,
            budget,
            (time.perf_counter() - started) * 1000.0,
            block,
            floor=floor.value if floor is not None else None,
            floor_detail=floor.describe() if floor is not None else "",
            whole_history=self._whole,
            whole_history_why=self._whole_why,
            fallback=self._fallback,
        )
        if self.log is not None:  # one JSONL record per recall, one row per candidate
            self.log.append(log_record(result, cfg.weights, cfg.floor))
        if self.retrievals is not None and items:
            shape = query_shape(self._query_vector) if self._query_vector is not None else 0
            self.retrievals.record(Access(i.source, time.time(), shape, i.wildcard) for i in items)
        return result
