"""Scenario files: multi-session histories with probes and gold targets (docs/scenario-format.md).

JSONL, one scenario a line, ``schema_version`` 1 or 2 (2 adds channels, projects, roles, tool turns,
explicit events, memories and program-checked gold). Each probe becomes one inspect Sample whose
metadata carries the history; the gold answer is the Sample's target and the gold evidence sits in
metadata under ``gold`` where only scorers read it (conditions get a ``Probe``: the question and what a
host knows when it is asked, never the gold).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from lca.errors import RecordFormatError
from lca.memory import Authority, Conflict, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.types import AGENT_SPEAKERS, EntryKind, TranscriptEntry
from protocols.scenarios.labels import REPLACING_TYPES, unlabel

SCHEMA_VERSION = 2  # the version this code writes; version 1 files still load
_NAME = r"^[A-Za-z0-9._-]+$"
TURN_KINDS = {
    "user": EntryKind.USER_TURN,
    "assistant": EntryKind.ASSISTANT_TURN,
    "tool_call": EntryKind.TOOL_CALL,
    "tool_result": EntryKind.TOOL_RESULT,
    "peer_agent": EntryKind.PEER_AGENT_TURN,  # another agent's message: an observation, never an instruction
}
EVENT_TYPES = ("correction", "approval", "interruption", "supersedes")
VISIBILITIES = ("private", "team", "public")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceRef(_Record):
    session: str
    turn: int = Field(ge=1)


class TurnEvent(_Record):
    """An explicit event a turn records: a user correction of an earlier turn (and what is right), an approval
    of one, an interruption (the context is cut after this turn), a decision that supersedes an earlier one."""

    type: Literal["correction", "approval", "interruption", "supersedes"]
    of: EvidenceRef | None = None
    right: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> TurnEvent:
        if self.type == "interruption":
            if self.of is not None or self.right is not None:
                raise ValueError("an interruption refers to no turn: give neither 'of' nor 'right'")
        elif self.of is None:
            raise ValueError(f"a {self.type} names the earlier turn it is about in 'of'")
        if self.type == "correction" and not (self.right or "").strip():
            raise ValueError("a correction says what is right in 'right'")
        if self.type not in ("correction",) and self.right is not None:
            raise ValueError(f"only a correction takes 'right', not a {self.type}")
        return self


class GoldEvent(_Record):
    """A correction or supersession that happened in the history but that no turn labels: what a host that sends
    no event markers leaves the substrate to find. ``by`` is the turn that corrects or replaces, ``of`` the earlier
    turn it is about. Only scorers and benchmarks read these (the inferred events' precision and recall, and
    which turns a marker must accompany); conditions never see them."""

    type: Literal["correction", "supersedes"]
    of: EvidenceRef
    by: EvidenceRef
    right: str | None = None


class Turn(_Record):
    role: Literal["user", "assistant", "tool_call", "tool_result", "peer_agent"]
    content: str = Field(min_length=1)
    # v2: the peer agent a ``peer_agent`` turn came from; its entry's author, so recall and handoffs can say who
    author: str | None = Field(default=None, min_length=1, validate_default=True)
    at: str | None = None  # ISO 8601; default: the session start plus one minute a turn
    event: TurnEvent | None = None

    @field_validator("author")
    @classmethod
    def _author_of_a_peer(cls, author: str | None, info: ValidationInfo) -> str | None:
        """Checked on the field, so a refusal names ``author``: a peer's words without a sender could not be
        weighed as whose observation they are."""
        role = info.data.get("role")
        if role == "peer_agent" and author is None:
            raise ValueError("a peer_agent turn names the agent that sent it in 'author'")
        if (
            role == "peer_agent"
            and author is not None
            and (not author.strip() or author.strip().lower() in AGENT_SPEAKERS)
        ):
            raise ValueError(f"a peer agent is neither the user nor this agent, got {author!r}: name the peer")
        if role != "peer_agent" and author is not None:
            raise ValueError(f"only a peer_agent turn takes 'author', not a {role} turn")
        return author


class ScenarioSession(_Record):
    id: str = Field(min_length=1, pattern=_NAME)
    started_at: str
    turns: tuple[Turn, ...] = Field(min_length=1)
    channel: Literal["private", "team", "public"] | None = None  # who can see the session (v2)
    project: str | None = Field(default=None, min_length=1)  # the project it belongs to (v2)
    role: str | None = Field(default=None, min_length=1)  # the agent's role in it (v2)


class ScenarioMemory(_Record):
    """A memory file the agent already holds once the session it last cites has ended (written by an earlier
    consolidation the scenario does not replay); conditions with structured memory load it then, through the
    one write API. Its sources must be turns of the history."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
    type: Literal["fact", "decision", "lesson", "preference", "procedure", "runbook", "failure"] = "fact"
    body: str = Field(min_length=1)
    authority: Literal["approved", "reviewed", "unreviewed", "inferred"] = "reviewed"
    privacy: Literal["public", "private", "secret"] = "private"
    projects: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    critical: bool = False
    conflicts_with: tuple[str, ...] = ()  # memories the verifier left an unresolved contradiction with
    sources: tuple[EvidenceRef, ...] = Field(min_length=1)


class ScenarioProbe(_Record):
    id: str = Field(min_length=1, pattern=_NAME)
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    evidence: tuple[EvidenceRef, ...] = ()
    asked_at: str | None = None
    category: str = "recall"
    # v2: where it is asked, and gold a program checks
    channel: Literal["private", "team", "public"] | None = None
    project: str | None = Field(default=None, min_length=1)
    role: str | None = Field(default=None, min_length=1)
    continues: bool = False  # asked in the last session before it ends (a follow-up), not in a new one
    forbidden: tuple[EvidenceRef, ...] = ()  # turns that must not be injected
    required_mentions: tuple[str, ...] = ()
    forbidden_mentions: tuple[str, ...] = ()
    source_type: Literal["transcript", "memory", "handoff", "identity"] | None = None
    abstain: bool = False  # the history does not support an answer: the agent should say so


V2_FIELDS = {
    "session": ("channel", "project", "role"),
    "probe": (
        "channel",
        "project",
        "role",
        "continues",
        "forbidden",
        "required_mentions",
        "forbidden_mentions",
        "source_type",
        "abstain",
    ),
}


class Scenario(_Record):
    schema_version: Literal[1, 2]
    id: str = Field(min_length=1, pattern=_NAME)
    description: str = ""
    identity: dict[Literal["identity", "user", "instructions"], str] = Field(default_factory=dict)
    sessions: tuple[ScenarioSession, ...] = Field(min_length=1)
    memories: tuple[ScenarioMemory, ...] = ()
    probes: tuple[ScenarioProbe, ...] = Field(min_length=1)
    gold_events: tuple[GoldEvent, ...] = ()  # v2: corrections and supersessions no turn labels

    @model_validator(mode="after")
    def _references_point_into_the_history(self) -> Scenario:
        turns = {s.id: len(s.turns) for s in self.sessions}
        if len(turns) != len(self.sessions):
            raise ValueError("session ids repeat")
        if self.schema_version == 1:
            self._v1_only()
        order = {s.id: n for n, s in enumerate(self.sessions)}

        def check(ref: EvidenceRef, what: str) -> None:
            if ref.session not in turns or ref.turn > turns[ref.session]:
                raise ValueError(f"{what}: {ref.session} turn {ref.turn} is not in the history")

        for session in self.sessions:
            for n, turn in enumerate(session.turns, 1):
                if turn.event is not None and turn.event.of is not None:
                    ref = turn.event.of
                    check(ref, f"session '{session.id}' turn {n}: {turn.event.type} of")
                    if (order[ref.session], ref.turn) >= (order[session.id], n):
                        raise ValueError(
                            f"session '{session.id}' turn {n}: a {turn.event.type} is of an earlier turn, "
                            f"not {ref.session} turn {ref.turn}"
                        )
        labelled = {(s.id, n) for s in self.sessions for n, t in enumerate(s.turns, 1) if t.event is not None}
        for number, gold in enumerate(self.gold_events, 1):
            what = f"gold_events[{number}] ({gold.type})"
            check(gold.of, f"{what}: of")
            check(gold.by, f"{what}: by")
            if (order[gold.of.session], gold.of.turn) >= (order[gold.by.session], gold.by.turn):
                raise ValueError(f"{what}: 'by' ({gold.by.session} turn {gold.by.turn}) must come after 'of'")
            if (gold.by.session, gold.by.turn) in labelled:
                raise ValueError(f"{what}: {gold.by.session} turn {gold.by.turn} already labels an event")
        ids = [m.id for m in self.memories]
        if len(set(ids)) != len(ids):
            raise ValueError("memory ids repeat")
        for memory in self.memories:
            for ref in memory.sources:
                check(ref, f"memory '{memory.id}': source")
            for other in memory.conflicts_with:
                if other not in ids or other == memory.id:
                    raise ValueError(f"memory '{memory.id}': conflicts_with '{other}' names no other memory")
        for probe in self.probes:
            for ref in probe.evidence:
                check(ref, f"probe '{probe.id}': evidence")
            for ref in probe.forbidden:
                check(ref, f"probe '{probe.id}': forbidden")
        return self

    def _v1_only(self) -> None:
        """A version 1 file holds none of version 2's fields: each is refused by name, so a file never means
        more than its declared version says."""
        for session in self.sessions:
            for name in V2_FIELDS["session"]:
                if getattr(session, name) is not None:
                    raise ValueError(f"session '{session.id}': '{name}' needs schema_version 2")
            for turn in session.turns:
                if turn.role not in ("user", "assistant") or turn.event is not None:
                    raise ValueError(
                        f"session '{session.id}': tool and peer_agent turns and events need schema_version 2"
                    )
        if self.memories:
            raise ValueError("'memories' needs schema_version 2")
        if self.gold_events:
            raise ValueError("'gold_events' needs schema_version 2")
        defaults = ScenarioProbe(id="x", question="x", answer="x")
        for probe in self.probes:
            for name in V2_FIELDS["probe"]:
                if getattr(probe, name) != getattr(defaults, name):
                    raise ValueError(f"probe '{probe.id}': '{name}' needs schema_version 2")

    # -- the history as authoritative transcript entries
    def session_id(self, session: str) -> str:
        return f"{self.id}.{session}"

    def entry_id(self, session: str, turn: int) -> str:
        return f"{self.id}.{session}:{turn}"

    def pointer(self, ref: EvidenceRef) -> str:
        """A turn as the source pointer key the substrate uses: ``<session id>#<entry id>``."""
        return f"{self.session_id(ref.session)}#{self.entry_id(ref.session, ref.turn)}"

    def entries(self, session: ScenarioSession) -> tuple[TranscriptEntry, ...]:
        """The session's turns as transcript entries: its channel, project and role in each entry's ``meta``
        (``visibility``, ``project``, ``role``), a turn's event under ``meta["event"]`` with ``of`` as the
        referred turn's source pointer key."""
        start = datetime.fromisoformat(session.started_at)
        scope = {
            key: value
            for key, value in (("visibility", session.channel), ("project", session.project), ("role", session.role))
            if value is not None
        }
        out = []
        for n, turn in enumerate(session.turns, 1):
            at = turn.at or (start + timedelta(minutes=n - 1)).isoformat()
            meta: dict[str, Any] = dict(scope)
            if turn.event is not None:
                event: dict[str, Any] = {"type": turn.event.type}
                if turn.event.of is not None:
                    event["of"] = self.pointer(turn.event.of)
                if turn.event.right is not None:
                    event["right"] = turn.event.right
                meta["event"] = event
            out.append(
                TranscriptEntry(
                    id=self.entry_id(session.id, n),
                    session_id=self.session_id(session.id),
                    agent_id="agent",
                    kind=TURN_KINDS[turn.role],
                    timestamp=at,
                    content=turn.content,
                    meta=meta,
                    author=turn.author,
                )
            )
        return tuple(out)

    def memories_after(self, session: ScenarioSession) -> list[ScenarioMemory]:
        """The memories that exist once ``session`` has ended: those whose latest source is in it."""
        order = {s.id: n for n, s in enumerate(self.sessions)}
        return [m for m in self.memories if max(order[r.session] for r in m.sources) == order[session.id]]

    def memory_dict(self, memory: ScenarioMemory) -> dict[str, Any]:
        """A memory as the history in a sample's metadata carries it (plain JSON; ``memory_from_dict`` reads it)."""
        by_session: dict[str, list[str]] = {}
        for ref in memory.sources:
            by_session.setdefault(self.session_id(ref.session), []).append(self.entry_id(ref.session, ref.turn))
        sessions = {s.id: s for s in self.sessions}
        created = max(self.entries(sessions[r.session])[r.turn - 1].timestamp for r in memory.sources)
        return {
            "id": memory.id,
            "type": memory.type,
            "body": memory.body,
            "authority": memory.authority,
            "privacy": memory.privacy,
            "projects": list(memory.projects),
            "roles": list(memory.roles),
            "tags": list(memory.tags),
            "critical": memory.critical,
            "conflicts_with": list(memory.conflicts_with),
            "created": created,
            "sources": [{"session": sid, "entries": ids} for sid, ids in by_session.items()],
        }

    def replacement_events(self) -> list[dict[str, Any]]:
        """Every correction and supersession of the history, labelled on a turn or only in ``gold_events``, as
        pointers: ``{"type", "of", "by", "labelled"}`` in the order of the turn that made it."""
        order = {s.id: n for n, s in enumerate(self.sessions)}
        found: list[tuple[tuple[int, int], dict[str, Any]]] = []
        for session in self.sessions:
            for n, turn in enumerate(session.turns, 1):
                if turn.event is not None and turn.event.type in REPLACING_TYPES and turn.event.of is not None:
                    by = EvidenceRef(session=session.id, turn=n)
                    event: dict[str, Any] = {
                        "type": turn.event.type,
                        "of": self.pointer(turn.event.of),
                        "by": self.pointer(by),
                    }
                    found.append(((order[session.id], n), {**event, "labelled": True}))
        for gold in self.gold_events:
            event = {"type": gold.type, "of": self.pointer(gold.of), "by": self.pointer(gold.by), "labelled": False}
            found.append(((order[gold.by.session], gold.by.turn), event))
        return [event for _, event in sorted(found, key=lambda pair: pair[0])]

    def evidence_pointers(self, probe: ScenarioProbe) -> list[str]:
        return [self.pointer(r) for r in probe.evidence]

    def evidence_texts(self, probe: ScenarioProbe) -> list[str]:
        by_session = {s.id: s for s in self.sessions}
        return [by_session[r.session].turns[r.turn - 1].content for r in probe.evidence]


def load_scenarios(path: Path | str) -> tuple[list[Scenario], str]:
    """All scenarios of a file and the file's sha256; the first bad line is refused by file, line and field."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no scenario file at {path}")
    raw = path.read_bytes()
    scenarios: list[Scenario] = []
    seen: set[str] = set()
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"not JSON: {exc.msg}", path=str(path), line=number) from None
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError as exc:
            raise RecordFormatError.from_validation(exc, path=str(path), line=number) from None
        if scenario.id in seen:
            raise RecordFormatError(f"scenario id '{scenario.id}' repeats", path=str(path), line=number, field="id")
        seen.add(scenario.id)
        scenarios.append(scenario)
    if not scenarios:
        raise RecordFormatError("no scenarios", path=str(path))
    return scenarios, hashlib.sha256(raw).hexdigest()


def scenario_history(scenario: Scenario) -> dict[str, Any]:
    """The history a sample's metadata carries: identity texts, each session's entries and the memories that
    exist once it has ended."""
    return {
        "identity": dict(scenario.identity),
        "sessions": [
            {
                "id": scenario.session_id(s.id),
                "entries": [_entry_dict(e) for e in scenario.entries(s)],
                "memories": [scenario.memory_dict(m) for m in scenario.memories_after(s)],
            }
            for s in scenario.sessions
        ],
    }


def probe_context(scenario: Scenario, probe: ScenarioProbe) -> dict[str, Any]:
    """What a host knows when the probe is asked: where (channel, project, the agent's role) and whether it
    continues the last session. No gold."""
    return {"channel": probe.channel, "project": probe.project, "role": probe.role, "continues": probe.continues}


def probe_gold(scenario: Scenario, probe: ScenarioProbe) -> dict[str, Any]:
    """What only scorers read: evidence and forbidden turns as pointers, the mentions a program checks, the
    expected source type and abstention."""
    return {
        "evidence": scenario.evidence_pointers(probe),
        "evidence_texts": scenario.evidence_texts(probe),
        "forbidden": [scenario.pointer(r) for r in probe.forbidden],
        "required_mentions": list(probe.required_mentions),
        "forbidden_mentions": list(probe.forbidden_mentions),
        "source_type": probe.source_type,
        "abstain": probe.abstain,
        "events": scenario.replacement_events(),
    }


def without_labels(scenario: Scenario, labels: str = "none", *, seed: int = 0) -> Scenario:
    """The same history and gold with its corrections and supersessions left unlabelled
    (``protocols.scenarios.labels.unlabel``: ``all``, ``none`` or ``mixed``)."""
    if labels == "all":
        return scenario
    data = unlabel(scenario.model_dump(mode="json", exclude_none=True), labels, seed=seed)
    return Scenario.model_validate(data)


def scenario_samples(path: Path | str, *, limit: int | None = None) -> tuple[list[Any], str]:
    """One inspect Sample per probe; the history in metadata, gold answer as target."""
    from inspect_ai.dataset import Sample

    scenarios, digest = load_scenarios(path)
    samples = []
    for scenario in scenarios:
        history = scenario_history(scenario)
        for probe in scenario.probes:
            samples.append(
                Sample(
                    id=f"{scenario.id}:{probe.id}",
                    input=probe.question,
                    target=probe.answer,
                    metadata={
                        "scenario": scenario.id,
                        "probe": probe.id,
                        "asked_at": probe.asked_at,
                        "category": probe.category,
                        "probe_context": probe_context(scenario, probe),
                        "history": history,
                        "gold": probe_gold(scenario, probe),
                        "dataset_sha256": digest,
                    },
                )
            )
    return samples[:limit] if limit else samples, digest


def scenario_task_samples(path: Path | str, *, limit: int | None = None) -> tuple[list[Any], str, dict[str, Any]]:
    """A protocol task's ``load`` over a scenario file: the samples, the file's sha256 and no extra task
    metadata (``protocols.harness.tasks.Loaded``)."""
    samples, digest = scenario_samples(path, limit=limit)
    return samples, digest, {}


def _entry_dict(entry: TranscriptEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": entry.id,
        "session_id": entry.session_id,
        "agent_id": entry.agent_id,
        "kind": entry.kind.value,
        "timestamp": entry.timestamp,
        "content": entry.content,
    }
    if entry.meta:
        out["meta"] = dict(entry.meta)
    if entry.author is not None:
        out["author"] = entry.author
    return out


def entry_from_dict(data: dict[str, Any]) -> TranscriptEntry:
    return TranscriptEntry(
        id=data["id"],
        session_id=data["session_id"],
        agent_id=data["agent_id"],
        kind=EntryKind(data["kind"]),
        timestamp=data["timestamp"],
        content=data["content"],
        meta=dict(data.get("meta") or {}),
        author=data.get("author"),
    )


def memory_from_dict(data: dict[str, Any]):
    """A history's memory (``Scenario.memory_dict``) as the record and body the one write API takes."""
    conflicts = tuple(
        Conflict(id=other, reason="an unresolved contradiction the verifier left")
        for other in data.get("conflicts_with", ())
    )
    record = MemoryRecord(
        id=data["id"],
        type=MemoryType(data["type"]),
        tags=tuple(data.get("tags", ())),
        projects=tuple(data.get("projects", ())),
        created=data["created"],
        authority=Authority(data["authority"]),
        privacy=Privacy(data["privacy"]),
        critical=bool(data.get("critical", False)),
        sources=tuple(TranscriptSpan(session=s["session"], entries=tuple(s["entries"])) for s in data["sources"]),
        roles=tuple(data.get("roles", ())),
        conflicts=conflicts,
    )
    return record, str(data["body"])
