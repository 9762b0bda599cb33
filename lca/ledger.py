"""Learned state as an append-only event log: the hypothesis ledger and the schema lifecycle.

Nothing learned is stored as mutable state. Every candidate the consolidation cycle ever
proposed, every verdict, every promotion, every schema transition is an event in
``<home>/events/ledger.jsonl``; the current state is the replay of that log, and the state
at any past time is the replay of its prefix (a checkpointed worldview), so two worldviews
can be rebuilt and diffed. Refutation makes a hypothesis dormant; nothing is ever deleted.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lca.authority import WriterFence
from lca.derived import derived_id, derived_tree
from lca.errors import ApprovalRequired, LCAError, RecordFormatError
from lca.fileio import append_bytes
from lca.layout import StoreLayout
from lca.secrets import MARKER, redacted

LEDGER_VERSION = 1

HYPOTHESIS_EVENTS = (
    "hypothesis_proposed",
    "hypothesis_refuted",
    "hypothesis_resurfaced",
    "hypothesis_promoted",
    "hypothesis_held",
    "hypothesis_observed",  # seen again by a later cycle (its score joins the trajectory); the status stays
    "hypothesis_reviewed",  # an adversarial review's verdicts (lca.insight.review); the status stays
)
SCHEMA_EVENTS = ("schema_proposed", "schema_trial", "schema_established", "schema_deprecated", "schema_revised")
OTHER_EVENTS = (
    "memory_written",
    "memory_superseded",
    "proposal_held",
    "proposal_resolved",
    "cycle_completed",
    "identity_written",
    "event_inferred",
    "event_confirmed",
    "event_rejected",
    "records_forgotten",  # lca.forget removed these memory records: replay drops them from every member list
)
EVENT_KINDS = HYPOTHESIS_EVENTS + SCHEMA_EVENTS + OTHER_EVENTS

# the schema lifecycle: state -> the events allowed from it
SCHEMA_TRANSITIONS = {
    None: {"schema_proposed"},
    "candidate": {"schema_trial", "schema_deprecated", "schema_revised"},
    "trial": {"schema_established", "schema_deprecated", "schema_revised"},
    "established": {"schema_deprecated", "schema_revised"},
    "deprecated": {"schema_revised"},  # a deprecated schema comes back only as a new version, on trial
}
_SCHEMA_STATE_AFTER = {
    "schema_proposed": "candidate",
    "schema_trial": "trial",
    "schema_established": "established",
    "schema_deprecated": "deprecated",
    "schema_revised": "trial",
}
ACTIVE_SCHEMA_STATES = ("trial", "established")


class TransitionRefused(LCAError):
    """A lifecycle transition the current state does not allow."""


class EvidenceRequired(TransitionRefused):
    """candidate -> trial or trial -> established without measured evidence that passes every gate."""


class SchemaEvidence(Protocol):
    """A schema's measured evidence for establishment (``lca.insight.schema_gates`` measures it): whether every gate
    passed, a line per failed gate, and the record the ledger keeps with the transition."""

    @property
    def passed(self) -> bool: ...

    @property
    def failed(self) -> tuple[str, ...]: ...

    def to_dict(self) -> dict[str, Any]: ...


# ---- membership: the neighbourhood a hypothesis lives in --------------------------------
_STOP = frozenset(
    """a an the and or but if then than that this these those there here is are was were be been being
have has had do does did of in on at to for from by with about into over under after before as it its it's
they them their we our you your he she his her him i me my mine not no yes so very just also only can could
will would should may might must shall one two all any some each every more most less least such what which
who whom whose when where why how user assistant""".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def key_terms(text: str) -> frozenset[str]:
    """The content words a claim is about (lowercased, stopwords and short words dropped, a final
    plural 's' folded): the membership used to scope contradiction checks and to find a dormant
    hypothesis's neighbourhood."""
    out = set()
    for word in _WORD.findall(MARKER.sub(" ", text)):  # a redaction marker is not what a claim is about
        w = word.lower().rstrip(".")
        if len(w) < 3 or w in _STOP:
            continue
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return frozenset(out)


def membership_overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """Shared terms over the smaller set (0 when either is empty)."""
    a, b = set(a), set(b)
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def hypothesis_id(claim: str) -> str:
    """Stable id of a claim: the same wording proposed twice is one hypothesis with a longer history."""
    normalized = " ".join(_WORD.findall(claim.lower()))
    return "hyp-" + hashlib.sha256(normalized.encode()).hexdigest()[:12]


# ---- records ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerEvent:
    kind: str
    subject: str
    at: float
    data: Mapping[str, Any]

    def to_json(self) -> str:
        return json.dumps(
            {"v": LEDGER_VERSION, "kind": self.kind, "subject": self.subject, "at": self.at, "data": self.data},
            sort_keys=True,
            ensure_ascii=False,
        )


@dataclass
class Hypothesis:
    id: str
    claim: str
    type: str
    members: frozenset[str]
    status: str = "proposed"  # proposed | dormant | resurfaced | promoted | held
    refutations: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    memory_id: str | None = None

    @property
    def once_refuted(self) -> bool:
        return bool(self.refutations)

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        """Each cycle's score of it, in order: the events that carried a ``score`` (the integration cycle's)."""
        return [
            {"cycle": e.get("cycle"), "at": e["at"], "score": e["score"], "kind": e["kind"]}
            for e in self.history
            if isinstance(e.get("score"), (int, float))
        ]


@dataclass
class Schema:
    id: str
    description: str
    version: int = 1
    state: str = "candidate"
    approver: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    # what it claims to organize, when proposed from records (lca.insight.schemas): their ids, the signature features
    # its members share, the insight it came from, and when this version was proposed (its evidence counts after)
    members: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    insight: str | None = None
    proposed_at: float | None = None


@dataclass
class LearnedState:
    """The replay of the ledger up to a time: what the agent has learned, as it stood then."""

    as_of: float | None
    hypotheses: dict[str, Hypothesis] = field(default_factory=dict)
    schemas: dict[str, Schema] = field(default_factory=dict)
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> last written event data
    proposals: dict[str, dict[str, Any]] = field(default_factory=dict)  # pending approvals
    cycles: list[dict[str, Any]] = field(default_factory=list)
    identity: dict[str, dict[str, Any]] = field(default_factory=dict)  # file name -> last approved write
    replacement_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # id -> inferred, decided
    events: int = 0

    def recovery_rate(self) -> tuple[float | None, int, int]:
        """Fraction of promoted hypotheses that were refuted at some point before (None if none promoted)."""
        promoted = [h for h in self.hypotheses.values() if h.status == "promoted"]
        recovered = [h for h in promoted if h.once_refuted]
        return (len(recovered) / len(promoted) if promoted else None), len(recovered), len(promoted)

    def active_schemas(self) -> list[Schema]:
        return sorted((s for s in self.schemas.values() if s.state in ACTIVE_SCHEMA_STATES), key=lambda s: s.id)

    def summary(self) -> dict[str, Any]:
        by_status: dict[str, int] = {}
        for h in self.hypotheses.values():
            by_status[h.status] = by_status.get(h.status, 0) + 1
        rate, recovered, promoted = self.recovery_rate()
        return {
            "as_of": self.as_of,
            "events": self.events,
            "hypotheses": by_status,
            "recovery_rate": rate,
            "recovered": recovered,
            "promoted": promoted,
            "schemas": {s.id: {"state": s.state, "version": s.version} for s in self.schemas.values()},
            "memories": len(self.memories),
            "pending_proposals": sorted(self.proposals),
            "identity": {name: d.get("approver") for name, d in self.identity.items()},
            "cycles": len(self.cycles),
        }


def diff_states(before: LearnedState, after: LearnedState) -> dict[str, Any]:
    """What changed between two worldviews: hypothesis statuses, schema states and versions, memories."""
    changes: dict[str, Any] = {"hypotheses": [], "schemas": [], "memories": []}
    for hid in sorted(set(before.hypotheses) | set(after.hypotheses)):
        old_h, new_h = before.hypotheses.get(hid), after.hypotheses.get(hid)
        if (old_h.status if old_h else None) != (new_h.status if new_h else None):
            either = new_h or old_h
            assert either is not None  # hid came from one of the two
            changes["hypotheses"].append(
                {
                    "id": hid,
                    "claim": either.claim,
                    "from": old_h.status if old_h else None,
                    "to": new_h.status if new_h else None,
                }
            )
    for sid in sorted(set(before.schemas) | set(after.schemas)):
        old_s, new_s = before.schemas.get(sid), after.schemas.get(sid)
        pair_old = (old_s.state, old_s.version) if old_s else None
        pair_new = (new_s.state, new_s.version) if new_s else None
        if pair_old != pair_new:
            changes["schemas"].append({"id": sid, "from": pair_old, "to": pair_new})
    for mid in sorted(set(before.memories) | set(after.memories)):
        old_m, new_m = before.memories.get(mid) or {}, after.memories.get(mid) or {}
        if old_m.get("content_hash") != new_m.get("content_hash"):
            changes["memories"].append(
                {
                    "id": mid,
                    "from": old_m.get("content_hash"),
                    "to": new_m.get("content_hash"),
                    "action": new_m.get("action"),
                }
            )
    return changes


# ---- the log -----------------------------------------------------------------------------
class Ledger:
    """Append-only learned-state log; every transition is checked against the replayed state."""

    def __init__(self, root: Path | str) -> None:
        self.path = StoreLayout(root).ledger
        self._fence = WriterFence(root)  # the learned state is authoritative: only the active copy appends

    # -- reading
    def events(self, *, until: float | None = None) -> list[LedgerEvent]:
        if not self.path.exists():
            return []
        out = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                event = LedgerEvent(raw["kind"], raw["subject"], float(raw["at"]), raw.get("data") or {})
            except (ValueError, KeyError, TypeError) as exc:
                raise RecordFormatError(f"unreadable ledger event: {exc}", path=str(self.path), line=number) from None
            if until is not None and event.at > until:
                continue
            out.append(event)
        return out

    def state(self, *, as_of: float | None = None) -> LearnedState:
        """Replay the log (up to ``as_of``, epoch seconds) into the learned state."""
        state = LearnedState(as_of)
        for event in self.events(until=as_of):
            apply_event(state, event)
        return state

    # -- writing
    def append(
        self, kind: str, subject: str, data: Mapping[str, Any] | None = None, *, at: float | None = None
    ) -> LedgerEvent:
        """The subject, every string in ``data`` and every key in it are stored redacted (``lca.derived``): the
        ledger is derived from the transcript, which alone keeps the credentials."""
        if kind not in EVENT_KINDS:
            raise RecordFormatError(f"unknown ledger event {kind!r}", field="kind")
        subject, at = derived_id(subject), time.time() if at is None else at
        event = LedgerEvent(kind, subject, at, derived_tree(dict(data or {})))
        self._fence.check(f"append ledger event {kind} ({subject})")
        append_bytes(self.path, (event.to_json() + "\n").encode("utf-8"))
        return event

    # -- hypotheses
    def propose(
        self, claim: str, *, type: str, sources: list[str], cycle: str, members: Iterable[str] | None = None
    ) -> LedgerEvent:
        """A candidate enters the ledger under its stable id, its membership its key terms by default.
        The claim is stored redacted and its key terms are read from the redacted claim, so that no
        credential survives as a lone term (the id stays that of the claim as proposed)."""
        subject, claim = hypothesis_id(claim), redacted(claim)
        return self.append(
            "hypothesis_proposed",
            subject,
            {
                "claim": claim,
                "type": type,
                "sources": list(sources),
                "cycle": cycle,
                "members": sorted(members if members is not None else key_terms(claim)),
            },
        )

    def dormant_neighbours(
        self, members: Iterable[str], *, threshold: float = 0.6, min_shared: int = 2, state: LearnedState | None = None
    ) -> list[Hypothesis]:
        """Dormant hypotheses whose membership overlaps new evidence: candidates to resurface."""
        members = set(members)
        state = state or self.state()
        out = []
        for h in state.hypotheses.values():
            if h.status != "dormant":
                continue
            shared = len(members & set(h.members))
            if shared >= min_shared and membership_overlap(members, h.members) >= threshold:
                out.append(h)
        return sorted(out, key=lambda h: h.id)

    # -- schemas
    def schema_event(
        self,
        kind: str,
        schema_id: str,
        *,
        description: str | None = None,
        approver: str | None = None,
        reason: str | None = None,
        details: Mapping[str, Any] | None = None,
        evidence: SchemaEvidence | None = None,
    ) -> Schema:
        """One lifecycle transition, refused unless the replayed state allows it.
        candidate -> trial needs ``evidence`` that passed the insight's trial gates for a schema proposed from an
        insight (``lca.insight.trial_gate``), a named approver for one proposed from no insight; trial -> established
        needs a named approver and ``evidence`` that passed every gate (refused naming the failed ones); those rules
        live here, not in a caller. ``details``: what a proposal or revision organizes
        (``members``, ``features``, ``insight``)."""
        if kind not in SCHEMA_EVENTS:
            raise RecordFormatError(f"unknown schema transition {kind!r}", field="kind")
        current = self.state().schemas.get(schema_id)
        allowed = SCHEMA_TRANSITIONS[current.state if current else None]
        if kind not in allowed:
            where = current.state if current else "absent"
            raise TransitionRefused(
                f"schema '{schema_id}' is {where}: {kind} is not allowed from there "
                f"(allowed: {', '.join(sorted(allowed)) or 'none'})"
            )
        if kind == "schema_established" and not (approver and approver.strip()):
            raise ApprovalRequired(f"schema '{schema_id}': trial -> established needs a named approver")
        if kind == "schema_trial" and current is not None and current.insight:
            _require_passed(
                evidence,
                missing=f"schema '{schema_id}': candidate -> trial needs its insight's trial gates (differential, "
                "review survival, trajectory; lca schema trial measures them)",
                failed=f"schema '{schema_id}' stays a candidate: trial gates failed: ",
            )
        elif kind == "schema_trial" and not (approver and approver.strip()):
            raise ApprovalRequired(
                f"schema '{schema_id}': candidate -> trial needs a named approver (proposed from no insight, nothing "
                "measured gates it)"
            )
        if kind in ("schema_proposed", "schema_revised") and not (description and description.strip()):
            raise RecordFormatError("a schema needs a description", field="description")
        if kind == "schema_established":
            _require_passed(
                evidence,
                missing=f"schema '{schema_id}': trial -> established needs its measured evidence (retrieval lift, "
                "anticipation, compression; lca schema evidence shows them)",
                failed=f"schema '{schema_id}' stays on trial: evidence gates failed: ",
            )
        if kind == "schema_deprecated" and not (reason and reason.strip()):
            raise RecordFormatError("deprecating a schema needs a reason", field="reason")
        if details is not None and kind not in ("schema_proposed", "schema_revised"):
            raise RecordFormatError(f"{kind} takes no details", field="details")
        data: dict[str, Any] = {
            k: v
            for k, v in {"description": description, "approver": approver, "reason": reason}.items()
            if v is not None
        }
        data.update({k: v for k, v in (details or {}).items() if k in ("members", "features", "insight")})
        if evidence is not None and kind in ("schema_established", "schema_trial"):
            data["evidence"] = evidence.to_dict()
        self.append(kind, schema_id, data)
        return self.state().schemas[schema_id]


def _require_passed(evidence: SchemaEvidence | None, *, missing: str, failed: str) -> None:
    """Refuse a gated transition without evidence (``missing``) or with a failed gate (``failed`` and each one)."""
    if evidence is None:
        raise EvidenceRequired(missing)
    if not evidence.passed:
        raise EvidenceRequired(failed + "; ".join(evidence.failed))


def _forget_records(state: LearnedState, records: frozenset[str]) -> None:
    """Forgetting is recorded, not rewritten: the earlier events stay, and from here on no hypothesis or schema
    counts a forgotten record among its members (a hypothesis names it ``record:<id>``, a schema by its id)."""
    named = frozenset("record:" + r for r in records)  # a bare word among a fact's key terms is not the record
    for h in state.hypotheses.values():
        h.members = h.members - named
    for s in state.schemas.values():
        s.members = tuple(m for m in s.members if m not in records)
    for record in records:
        state.memories.pop(record, None)


def apply_event(state: LearnedState, event: LedgerEvent) -> None:
    """One step of the replay. Unknown kinds are an error: a log is never half-understood."""
    state.events += 1
    d = dict(event.data)
    entry = {"kind": event.kind, "at": event.at, **d}
    kind, subject = event.kind, event.subject
    if kind == "hypothesis_proposed":
        h = state.hypotheses.get(subject)
        if h is None:
            h = state.hypotheses[subject] = Hypothesis(
                subject, d["claim"], d.get("type", "fact"), frozenset(d.get("members") or ())
            )
        else:
            h.members = h.members | frozenset(d.get("members") or ())
            if h.status == "dormant":  # proposed again with new evidence: back under review
                h.status = "resurfaced"
        h.history.append(entry)
    elif kind in HYPOTHESIS_EVENTS:
        h = state.hypotheses.get(subject)
        if h is None:
            raise RecordFormatError(f"ledger event {kind} for unknown hypothesis {subject}")
        h.history.append(entry)
        if kind in ("hypothesis_observed", "hypothesis_resurfaced"):  # a later sighting may bring new members
            h.members = h.members | frozenset(d.get("members") or ())
        if kind == "hypothesis_refuted":
            h.status = "dormant"
            h.refutations.append({"at": event.at, "reason": d.get("reason", ""), "cycle": d.get("cycle")})
        elif kind == "hypothesis_resurfaced":
            h.status = "resurfaced"
        elif kind == "hypothesis_promoted":
            h.status = "promoted"
            h.memory_id = d.get("memory_id")
        elif kind == "hypothesis_held":
            h.status = "held"
    elif kind in SCHEMA_EVENTS:
        s = state.schemas.get(subject)
        if kind == "schema_proposed":
            s = state.schemas[subject] = Schema(subject, d.get("description", ""))
        elif s is None:
            raise RecordFormatError(f"ledger event {kind} for unknown schema {subject}")
        elif kind == "schema_revised":
            s.version += 1
            s.description = d.get("description", s.description)
            s.approver = None
        if kind in ("schema_proposed", "schema_revised"):
            s.proposed_at = event.at
            if "members" in d:
                s.members = tuple(d["members"])
                s.features = tuple(d.get("features") or ())
                s.insight = d.get("insight")
        if kind == "schema_established":
            s.approver = d.get("approver")
        s.state = _SCHEMA_STATE_AFTER[kind]
        s.history.append(entry)
    elif kind == "memory_written":
        state.memories[subject] = d
    elif kind == "memory_superseded":
        state.memories.setdefault(subject, {})["superseded_by"] = d.get("by")
    elif kind == "proposal_held":
        state.proposals[subject] = d
    elif kind == "proposal_resolved":
        state.proposals.pop(subject, None)
    elif kind == "identity_written":
        state.identity[subject] = d
    elif kind == "cycle_completed":
        state.cycles.append({"cycle": subject, "at": event.at, **d})
    elif kind in ("event_inferred", "event_confirmed", "event_rejected"):
        state.replacement_events.setdefault(subject, []).append(entry)
    elif kind == "records_forgotten":
        _forget_records(state, frozenset(d.get("records") or ()))
    else:
        raise RecordFormatError(f"unknown ledger event {kind!r}")
