"""Conditions over the substrate: recall over the verbatim transcript only, and full LCA."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from conditions.base import Condition, ContextPacket, InjectedItem, Probe, Session, register_condition
from lca.bundle import migrate
from lca.continuation import injection_used
from lca.errors import LCAError
from lca.identity import IdentityStore
from lca.params import parse_assignments
from lca.recall import TERMS, RecallConfig, RecallContext, ResonanceWeights, ScoredCandidate
from lca.recall.shown import item_label
from lca.types import EntryKind, parse_timestamp


def parse_weights(spec: str) -> dict[str, float]:
    """``"experience=0,temporal=0.1"`` -> a mapping; a plain string so it can be a task parameter.
    Each part is a ``name=value`` of the one parameter language (``lca.params``), so a bad one fails
    with its error format: ``weights '<part>': <reason>``."""
    parts = [part.strip() for part in (spec or "").split(",") if part.strip()]
    return parse_assignments(parts, flag="weights", known={term: float for term in TERMS})


def _as_of(probe: Probe) -> datetime | None:
    return parse_timestamp(probe.asked_at)


def _where(probe: Probe) -> dict[str, Any]:
    """Where a probe is asked, as RecallContext fields: the same for the probe and for the live session's turns."""
    return {
        "role": probe.role,
        "project": probe.project,
        "channel": probe.channel,
        "public_channel": probe.channel == "public",
    }


def _pointers(candidate: ScoredCandidate, memory_files, transcript=None) -> tuple[str, ...]:
    if candidate.source_type == "transcript":
        own = candidate.source[len("transcript:") :].split("[", 1)[0]
        return (own, *_handoff_tail(own, candidate.text, transcript))
    memory_id = candidate.source[len("memory:") :].split("[", 1)[0]
    memory = memory_files.get(memory_id)
    if memory is None:
        return ()
    return tuple(f"{span.session}#{entry}" for span in memory.record.sources for entry in span.entries)


def _handoff_tail(pointer: str, text: str, transcript) -> tuple[str, ...]:
    """A recalled handoff entry quotes the last turns of its session: it rests on each of them whose text
    the injected item holds whole (a trimmed item or a split chunk may hold only some)."""
    session, _, entry_id = pointer.partition("#")
    if transcript is None or ":handoff:" not in entry_id:
        return ()
    entry = next((e for e in transcript.read(session).entries if e.id == entry_id), None)
    try:
        tail = json.loads(entry.content).get("recent_tail", []) if entry is not None else []
    except (ValueError, AttributeError):
        return ()
    return tuple(
        f"{t['session']}#{t['entry']}"
        for t in tail
        if t.get("text") and (t["text"] in text or json.dumps(t["text"])[1:-1] in text)
    )


def _injected(number: int, item: ScoredCandidate, memory_files, transcript=None) -> InjectedItem:
    """The ``number``-th recalled item as the packet records it, with the transcript entries it rests on and the
    header recall counted it with."""
    return InjectedItem(
        item.source_type,
        item.source,
        item.text,
        item.tokens,
        item.authority_key,
        round(item.score, 6),
        _pointers(item, memory_files, transcript),
        label=item_label(number, item),
        marker=item.marker,
    )


class _SubstrateCondition(Condition):
    current_session: str | None  # the session being ingested; unset until the first ``ingest``

    def __init__(
        self,
        budget_tokens: int,
        floor: float,
        resume_turns: int,
        exchanges: int,
        excerpts: int,
        agent_turn_risk: float,
        reply_inheritance: float,
    ) -> None:
        """The recall parameters both substrate conditions take (their defaults are each condition's own)."""
        self.budget_tokens = budget_tokens
        self.floor = floor
        self.resume_turns = resume_turns
        self.exchanges = exchanges
        self.excerpts = excerpts
        self.agent_turn_risk = agent_turn_risk
        self.reply_inheritance = reply_inheritance

    def reset(self) -> None:
        self.close()
        super().reset()
        if self.runtime.embedder is None:
            raise LCAError(f"condition '{self.name}' needs an embedder in its runtime")
        self.substrate = self._open(self.home / "store")

    def _open(self, root: Path):
        from lca.substrate import Substrate

        config = self.recall_config()
        return Substrate(
            root,
            embedder=self.runtime.embedder,
            recall_config=config,
            token_counter=self.runtime.token_counter,
            retrieval=self.runtime.retrieval,
            infer_events=config.turn_supersession and self._infers_events(),  # none where none is read
        )

    def _infers_events(self) -> bool:
        """Whether the store runs the model-free change detector at ingest (``lca.events``)."""
        return True

    def replaced_turns(self) -> Mapping[str, str]:
        config = self.substrate.recall_config
        if not config.turn_supersession:
            return {}
        acting = self.substrate.events.replacements(hold=config.hold_confidence, mark=config.mark_confidence)
        return {
            target.removeprefix("transcript:"): "held" if any(r.status == "held" for r in reps) else "marked"
            for target, reps in acting.items()
        }

    def replacement_events(self) -> Sequence[Any]:
        return self.substrate.events.events() if self.substrate.recall_config.turn_supersession else ()

    def migrate(
        self,
        target: Path | str,
        *,
        bundle_dir: Path | str,
        binding: Mapping[str, Any] | None = None,
    ):
        """Move this condition's substrate to ``target`` by the migration protocol (``lca.bundle.migrate``) and go
        on from there: the derived stores are rebuilt with the condition's embedder, and every later context is
        built from the target. A failed migration leaves the condition on the source. Returns the
        ``MigrationResult``."""

        source = Path(self.substrate.home)
        self.close()

        def rebuild(root: Path) -> None:
            with self._open(root) as substrate:
                substrate.reindex()

        result = migrate(source, target, bundle_dir=bundle_dir, rebuild=rebuild, binding=dict(binding or {}))
        self.substrate = self._open(Path(target) if result.ok else source)
        return result

    def close(self) -> None:
        substrate = getattr(self, "substrate", None)
        if substrate is not None:
            substrate.close()
            self.substrate = None

    def ingest(self, session: Session) -> None:
        self.substrate.append(session.entries)
        self.current_session = session.id

    def recall_config(self) -> RecallConfig:
        raise NotImplementedError

    def _recall_settings(self) -> dict[str, Any]:
        """The recall parameters both substrate conditions take, as ``RecallConfig`` fields."""
        return {
            "floor": self.floor,
            "token_budget": self.budget_tokens,
            "resume_turns": self.resume_turns,
            "exchanges": bool(self.exchanges),
            "excerpts": bool(self.excerpts),
            "agent_turn_risk": self.agent_turn_risk,
            "reply_inheritance": self.reply_inheritance,
        }

    def recall_context(self, probe: Probe) -> RecallContext:
        """The turn as a host serves it: where it is asked (role, project, channel; a public channel turns on
        the private-in-public rule), the continuation signals, and for a follow-up whether the previous
        injection was used."""
        signals = probe.signals
        return RecallContext(
            query=probe.question,
            **_where(probe),
            as_of=_as_of(probe),
            about_history=signals.about_history,
            exact_wording=signals.exact_wording,
            continues_previous_task=signals.follow_up,
            resume=signals.resume,
            previous_injection_used=self._previous_injection_used(probe) if signals.follow_up else None,
        )

    def _previous_injection_used(self, probe: Probe) -> bool | None:
        """For a follow-up in the live session: what recall offered at its last user turn (only history before
        that turn), and whether the assistant's reply after it used any of it. None when there is no such
        turn and reply."""

        if not probe.continues or getattr(self, "current_session", None) is None:
            return None
        live = list(self.substrate.transcript.read(self.current_session).entries)
        users = [n for n, e in enumerate(live) if e.kind is EntryKind.USER_TURN]
        if not users:
            return None
        turn = users[-1]
        reply = next((e for e in live[turn + 1 :] if e.kind is EntryKind.ASSISTANT_TURN), None)
        if reply is None:
            return None
        later = {f"{e.session_id}#{e.id}" for e in live[turn:]}
        context = RecallContext(query=live[turn].content, **_where(probe), as_of=parse_timestamp(live[turn].timestamp))
        result = self.substrate.recall(context)
        offered = [i.text for i in result.items if i.source.split(":", 1)[-1].split("[", 1)[0] not in later]
        return injection_used(offered, reply.content) if offered else None

    def _recall_items(self, probe: Probe, budget: int) -> tuple[list[InjectedItem], float, str]:
        config = replace(self.substrate.recall_config, token_budget=max(0, budget))
        result = self.substrate.recall(self.recall_context(probe), config=config)
        files = self.substrate.memory_files()
        items = [_injected(n, item, files, self.substrate.transcript) for n, item in enumerate(result.items, 1)]
        return items, result.latency_ms, result.action


@register_condition
class TranscriptRecall(_SubstrateCondition):
    """Indexed recall over the verbatim transcript only: similarity and the policy filters, no
    structured memory, no learned or task weights. ``floor`` is the absolute floor; recall lowers it
    to the store's own off-topic ceiling where that is lower (``RecallConfig.floor_mode``, docs/recall.md).
    ``exchanges`` and ``excerpts`` (0: off) are what a chosen turn shows (``lca.recall.shown``); ``agent_turn_risk`` is
    the K of a turn the agent wrote (0: off; ``RecallConfig.agent_turn_risk``); ``reply_inheritance`` the share of the
    agent's reply's S a user's turn scores at least (0: off; ``RecallConfig.reply_inheritance``)."""

    name = "transcript-recall"

    def __init__(
        self,
        budget_tokens: int = 1200,
        k: int = 6,
        floor: float = 0.5,
        resume_turns: int = 4,
        exchanges: int = 1,
        excerpts: int = 1,
        agent_turn_risk: float = 0.1,
        reply_inheritance: float = 0.0,
    ) -> None:
        super().__init__(budget_tokens, floor, resume_turns, exchanges, excerpts, agent_turn_risk, reply_inheritance)
        self.k = k

    def recall_config(self) -> RecallConfig:
        weights = ResonanceWeights(
            similarity=1.0, experience=0.0, temporal=0.0, authority=0.0, task=0.0, activation=0.0, risk=1.0
        )
        return RecallConfig(
            weights=weights,
            memory_quota=0,
            transcript_quota=self.k,
            turn_supersession=False,  # the verbatim transcript alone: no ledger of which turns were superseded
            **self._recall_settings(),
        )

    def build_context(self, probe: Probe) -> ContextPacket:
        items, latency, action = self._recall_items(probe, self.budget_tokens)
        return self._packet(probe, items, latency_ms=latency, notes={"recall_action": action})


@register_condition
class FullLCA(_SubstrateCondition):
    """Identity, memory written through consolidation with verification, resonance-weighted recall,
    the live context manager and handoffs. Ablations are parameters: ``weights`` ("TERM=V,..."),
    ``policy``, ``living_memory`` (activation and wildcards on), ``verify`` (0: consolidation
    without the verification stage), ``consolidate`` (0: no consolidation at all), ``mmr_lambda``
    (1: no redundancy penalty), ``handoff`` (0: no handoff written or replayed), ``resume_turns`` (0: a question
    that resumes interrupted work is not given the latest session's last turns first), ``handoff_tail`` ("resume", the
    default: the handoff's quoted tail only for such a question; "always": for every question), ``carry`` (0: a handoff holds its own
    session's decisions and constraints only, none carried from earlier ones), ``exchanges`` (0: a recalled turn
    comes without the turn it answers), ``excerpts`` (0: a long turn shows its opening only), ``agent_turn_risk`` (0: the
    agent's own turns carry no risk term), ``reply_inheritance`` (0: a user's turn does not score with the agent's
    reply to it), ``infer_events`` (0: no model-free change detector at ingest: labels alone say which turns were
    replaced), ``infer_replacements`` (0: the consolidation cycle proposes no replacement events). What it did less of
    than it claims (no memory written, a failed cycle, an empty handoff) is in each packet's ``notes["shortfalls"]``."""

    name = "full-lca"
    uses_roles = ("summarizer", "reviewer")

    def _infers_events(self) -> bool:
        return bool(self.infer_events)

    def __init__(
        self,
        budget_tokens: int = 1200,
        policy: str = "fixed-k",
        weights: str = "",
        living_memory: int = 0,
        verify: int = 1,
        consolidate: int = 1,
        approver: str = "",
        floor: float = 0.5,
        window_tokens: int = 900,
        mmr_lambda: float = 0.75,
        handoff: int = 1,
        resume_turns: int = 4,
        handoff_tail: str = "resume",
        carry: int = 1,
        exchanges: int = 1,
        excerpts: int = 1,
        agent_turn_risk: float = 0.1,
        reply_inheritance: float = 0.0,
        infer_events: int = 1,
        infer_replacements: int = 1,
    ) -> None:
        super().__init__(budget_tokens, floor, resume_turns, exchanges, excerpts, agent_turn_risk, reply_inheritance)
        self.policy = policy
        self.weights = weights
        self.infer_events = infer_events
        self.infer_replacements = infer_replacements
        self.living_memory = living_memory
        self.verify = verify
        self.consolidate = consolidate
        self.approver = approver
        self.window_tokens = window_tokens
        self.mmr_lambda = mmr_lambda
        self.handoff = handoff
        self.handoff_tail = handoff_tail
        self.carry = carry

    def recall_config(self) -> RecallConfig:
        runtime = getattr(self, "runtime", None)  # unattached (a parameter check): recall's defaults
        overrides = {**(runtime.recall_weights if runtime else {}), **parse_weights(self.weights)}
        if self.living_memory:
            overrides.setdefault("activation", 0.05)
        weights = ResonanceWeights().with_overrides(overrides)
        return RecallConfig(
            weights=weights,
            policy=self.policy,
            wildcard_mode="balanced" if self.living_memory else "precision",
            mmr_lambda=self.mmr_lambda,
            **self._recall_settings(),
        )

    def ingest(self, session: Session) -> None:
        super().ingest(session)
        for record, body in session.memories:  # the memory files the agent holds once this session has ended
            self.substrate.memory.write(record, body, approver="scenario")  # the scenario's author stands behind them
        if session.memories:
            self.substrate.ingest()

    def reset(self) -> None:
        super().reset()

        store = IdentityStore(self.substrate.home)
        for name, text in self.runtime.identity.items():
            if text and text.strip():
                store.write(name, text, approver="scenario")  # the scenario's author stands behind them
        self.cycles: list[dict[str, Any]] = []  # per consolidation cycle: its counts
        self.handoffs: list[dict] = []  # per session end: how its handoff was built and how many items it has
        self.current_session = None

    def end_session(self) -> None:
        from lca.consolidation import ConsolidationConfig
        from lca.context import ContextWindow, LiveContextManager

        if self.current_session is None:
            return
        manager = LiveContextManager(
            self.substrate,
            ContextWindow(total_tokens=self.budget_tokens + 512),
            session_id=self.current_session,
            agent_id="agent",
            identity="",
            summarizer=self.runtime.optional_generator("summarizer"),
        )
        manager.live = list(self.substrate.transcript.read(self.current_session).entries)
        ended = max((e.timestamp for e in manager.live), default=None)  # the history's clock, not the wall's
        now = parse_timestamp(ended)
        if self.consolidate:
            config = ConsolidationConfig(
                verify=bool(self.verify),
                window_tokens=self.window_tokens,
                seed=self.runtime.seed,
                infer_replacements=bool(self.infer_replacements),
            )
            result = self.substrate.checkpoint(
                self.runtime.generator("summarizer"),
                reviewer=self.runtime.generator("reviewer"),
                trigger="session_end",
                approver=self.approver or None,
                config=config,
                session_id=self.current_session,
                now=now,
            )
            self.cycles.append(result.counts)
        if not self.handoff:  # ablated: no handoff is written, so none can be replayed or recalled
            return
        # the summarizer's, checked against the transcript, or mechanical; with what still holds carried on
        notes = manager.compose_handoff(carry=bool(self.carry))
        manager.write_handoff(notes, reason="session end", at=now.isoformat() if now else None)
        self.handoffs.append(
            {
                "session": self.current_session,
                "items": len(notes.items),
                "built_by": notes.built_by,
                "dropped": notes.dropped,
            }
        )

    def build_context(self, probe: Probe) -> ContextPacket:
        from lca.context import ContextWindow, LiveContextManager

        count = self.runtime.count_tokens
        budget = self.budget_tokens
        standing = IdentityStore(self.substrate.home).standing()
        latest = LiveContextManager.latest_handoff(self.substrate, "agent") if self.handoff else None
        # the handoff's verbatim tail is where the last session stopped: shown for a question that picks that up,
        # else (handoff_tail "resume") its turns compete in recall on relevance like any other
        if self.handoff_tail not in ("always", "resume"):
            raise ValueError(f"full-lca: handoff_tail must be 'always' or 'resume', got {self.handoff_tail!r}")
        tail = self.handoff_tail == "always" or probe.signals.resume
        handoff = LiveContextManager.render_handoff(latest, tail=tail) if latest is not None else ""
        items: list[InjectedItem] = []
        share = budget // 2  # identity and handoff together take at most half; recall gets the rest
        for kind, source, text in (
            ("identity", "identity-files", standing),
            ("handoff", latest.id if latest else "handoff", handoff),
        ):
            if not text:
                continue
            fitted = self._fit(text, max(0, share - sum(i.tokens for i in items)))
            if fitted:
                # a handoff rests on the turns its fitted text still points at or quotes, not on what the fit cut
                pointers = LiveContextManager.handoff_pointers(latest, fitted) if kind == "handoff" and latest else ()
                items.append(InjectedItem(kind, source, fitted, count(fitted), pointers=pointers))
        fixed = "\n\n".join(i.text for i in items)
        fixed_tokens = sum(i.tokens for i in items)
        quoted = (  # the turns the handoff quotes whole, in its tail or its items
            {
                **LiveContextManager.whole_tail_quotes(latest),
                **LiveContextManager.whole_item_quotes(latest, self.substrate.transcript),
            }
            if latest is not None
            else {}
        )
        shown = tuple(key for key, line in quoted.items() if line in fixed)  # the fitted handoff shows them whole
        # critical memories get what they need of a quarter of the rest (at most 400): a reserve no critical
        # memory fills would only be taken from recall
        needed = sum(self.substrate.count_tokens(t) for _, t in LiveContextManager.critical_texts(self.substrate))
        critical_budget = min(400, max(0, (budget - fixed_tokens) // 4), needed)
        window = ContextWindow(
            total_tokens=budget + 512,
            critical_budget=critical_budget,
            recall_budget=max(0, budget - fixed_tokens - critical_budget),
        )
        manager = LiveContextManager(
            self.substrate, window, session_id=f"probe:{probe.id}", agent_id="agent", identity=fixed
        )
        ws = manager.build(probe.question, recall_context=replace(self.recall_context(probe), shown=shown))
        files = self.substrate.memory_files()
        for memory_id in ws.critical_ids:
            memory = files[memory_id]
            text = f"[critical] {memory_id}: {memory.body.strip()}"
            pointers = tuple(f"{s.session}#{e}" for s in memory.record.sources for e in s.entries)
            items.append(
                InjectedItem(
                    "critical",
                    f"memory:{memory_id}",
                    text,
                    count(text),
                    memory.record.authority.value,
                    pointers=pointers,
                )
            )
        recall = ws.recall
        if recall is not None:
            items.extend(_injected(n, item, files, self.substrate.transcript) for n, item in enumerate(recall.items, 1))
        return self._packet(
            probe,
            items,
            latency_ms=recall.latency_ms if recall else 0.0,
            notes={
                "recall_action": recall.action if recall else None,
                "cycles": self.cycles,
                "handoffs": self.handoffs,
                "critical_overflow": list(ws.critical_overflow),
                "shortfalls": self.shortfalls(),
            },
        )

    def shortfalls(self) -> dict[str, str]:
        """What this condition did less of than it claims, by kind: consolidation on but no memory written, or a
        cycle that recorded failures and wrote nothing (a failed cycle); a handoff on but written empty. A run's summary counts them (a condition
        that silently did less would otherwise look like the one it claims to be)."""
        out: dict[str, str] = {}
        if self.consolidate and self.cycles:
            if sum(int(c.get("writes", 0)) for c in self.cycles) == 0:
                out["no_memories_written"] = f"consolidation wrote no memory in {len(self.cycles)} cycle(s)"
            failed = [c for c in self.cycles if c.get("failures") and not c.get("writes")]
            if failed:
                out["failed_cycles"] = (
                    f"{len(failed)} of {len(self.cycles)} cycle(s) recorded failures and wrote nothing"
                )
        empty = [h["session"] for h in self.handoffs if not h.get("items")]
        if self.handoff and empty:
            out["empty_handoff"] = f"{len(empty)} of {len(self.handoffs)} handoff(s) hold no item: {', '.join(empty)}"
        return out
