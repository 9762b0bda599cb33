"""Replaying a history into a condition and asking it a probe, the one way every protocol and bench does it.

A probe that ``continues`` is asked in the last session before it ends: that session is ingested but not
ended (no summary, consolidation or handoff yet) and the memories it would yield do not exist yet. The
``Probe`` carries what a host knows when it is asked (channel, project, role) and the continuation
signals read off the conversation (``lca.continuation``), never the gold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from conditions import Condition, ContextPacket, Probe, Session
from lca.continuation import continuation_signals
from lca.types import TranscriptEntry
from protocols.harness.scenario import entry_from_dict, memory_from_dict


def history_sessions(history: Mapping[str, Any], *, continues: bool = False) -> list[Session]:
    """The history's sessions as conditions take them; the last one's memories left out when it continues."""
    raw = list(history["sessions"])
    out = []
    for n, session in enumerate(raw):
        entries = tuple(e if isinstance(e, TranscriptEntry) else entry_from_dict(e) for e in session["entries"])
        live = continues and n == len(raw) - 1
        memories = () if live else tuple(memory_from_dict(m) for m in session.get("memories", ()))
        out.append(Session(session["id"], entries, memories))
    return out


def make_probe(
    probe_id: str,
    question: str,
    asked_at: str | None,
    context: Mapping[str, Any] | None,
    sessions: list[Session],
    *,
    embedder=None,
) -> Probe:
    """The probe as a host would serve it, with the continuation signals computed from the conversation."""
    context = dict(context or {})
    continues = bool(context.get("continues"))
    live = sessions[-1].entries if continues and sessions else ()
    return Probe(
        probe_id,
        question,
        asked_at,
        channel=context.get("channel"),
        project=context.get("project"),
        role=context.get("role"),
        continues=continues,
        signals=continuation_signals(question, live, embedder=embedder),
    )


def ingest_history(condition: Condition, sessions: list[Session], probe: Probe) -> None:
    """Ingest every session, ending each but a last one that ``probe`` continues."""
    for n, session in enumerate(sessions):
        condition.ingest(session)
        if not (probe.continues and n == len(sessions) - 1):
            condition.end_session()


def replay(condition: Condition, sessions: list[Session], probe: Probe, *, building: Any = None) -> ContextPacket:
    """The history ingested (``ingest_history``), then the context built for ``probe``. ``building``: an embedder
    shared with other threads, held (its ``exclusive()``) while the context is built, so the recall latency the
    packet reports is this recall's work and not a wait for another thread's embedding."""
    ingest_history(condition, sessions, probe)
    hold = getattr(building, "exclusive", None)
    with hold() if hold is not None else nullcontext():
        packet = condition.build_context(probe)
    return with_replacements(packet, condition)


def with_replacements(packet: ContextPacket, condition: Condition) -> ContextPacket:
    """The packet with what its condition knows of replaced turns in its notes: the turns it holds back or marks
    (``replaced_turns``) and the events its store inferred (``inferred_events``: of, by, confidence), which the
    replacement scorers and ``lca bench probes`` read (``continuity_scorers.replacement_view``)."""
    if not isinstance(packet, ContextPacket):  # a stand-in condition's packet: nothing to add to
        return packet
    # a stand-in that is no Condition knows of none
    events: Sequence[Any] = getattr(condition, "replacement_events", tuple)()
    inferred = [[e.of, e.by, e.confidence] for e in events if e.origin == "inferred"]
    acting = dict(getattr(condition, "replaced_turns", dict)())
    notes = {**packet.notes, "replaced_turns": acting, "inferred_events": inferred}
    return replace(packet, notes=notes)
