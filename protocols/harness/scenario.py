"""Scenario files: multi-session histories with probes and gold targets (docs/scenario-format.md).

JSONL, one scenario a line, ``schema_version`` 1. Each probe becomes one inspect Sample whose
metadata carries the history; the gold answer is the Sample's target and the gold evidence
sits in metadata under ``gold`` where only scorers read it (conditions get a ``Probe``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lca.errors import RecordFormatError
from lca.types import EntryKind, TranscriptEntry

SCHEMA_VERSION = 1


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)
    at: str | None = None  # ISO 8601; default: the session start plus one minute a turn


class ScenarioSession(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    started_at: str
    turns: tuple[Turn, ...] = Field(min_length=1)


class EvidenceRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    session: str
    turn: int = Field(ge=1)


class ScenarioProbe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    evidence: tuple[EvidenceRef, ...] = ()
    asked_at: str | None = None
    category: str = "recall"


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    description: str = ""
    identity: dict[Literal["identity", "user", "instructions"], str] = Field(default_factory=dict)
    sessions: tuple[ScenarioSession, ...] = Field(min_length=1)
    probes: tuple[ScenarioProbe, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _evidence_points_into_the_history(self) -> Scenario:
        turns = {s.id: len(s.turns) for s in self.sessions}
        if len(turns) != len(self.sessions):
            raise ValueError("session ids repeat")
        for probe in self.probes:
            for ref in probe.evidence:
                if ref.session not in turns or ref.turn > turns[ref.session]:
                    raise ValueError(
                        f"probe '{probe.id}': evidence {ref.session} turn {ref.turn} is not in the history"
                    )
        return self

    # -- the history as authoritative transcript entries
    def session_id(self, session: str) -> str:
        return f"{self.id}.{session}"

    def entry_id(self, session: str, turn: int) -> str:
        return f"{self.id}.{session}:{turn}"

    def entries(self, session: ScenarioSession) -> tuple[TranscriptEntry, ...]:
        from datetime import datetime, timedelta

        start = datetime.fromisoformat(session.started_at)
        out = []
        for n, turn in enumerate(session.turns, 1):
            at = turn.at or (start + timedelta(minutes=n - 1)).isoformat()
            out.append(
                TranscriptEntry(
                    id=self.entry_id(session.id, n),
                    session_id=self.session_id(session.id),
                    agent_id="agent",
                    kind=EntryKind.USER_TURN if turn.role == "user" else EntryKind.ASSISTANT_TURN,
                    timestamp=at,
                    content=turn.content,
                )
            )
        return tuple(out)

    def evidence_pointers(self, probe: ScenarioProbe) -> list[str]:
        return [f"{self.session_id(r.session)}#{self.entry_id(r.session, r.turn)}" for r in probe.evidence]

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


def scenario_samples(path: Path | str, *, limit: int | None = None) -> tuple[list[Any], str]:
    """One inspect Sample per probe; the history in metadata, gold answer as target."""
    from inspect_ai.dataset import Sample

    scenarios, digest = load_scenarios(path)
    samples = []
    for scenario in scenarios:
        history = {
            "identity": dict(scenario.identity),
            "sessions": [
                {"id": scenario.session_id(s.id), "entries": [_entry_dict(e) for e in scenario.entries(s)]}
                for s in scenario.sessions
            ],
        }
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
                        "history": history,
                        "gold": {
                            "evidence": scenario.evidence_pointers(probe),
                            "evidence_texts": scenario.evidence_texts(probe),
                        },
                        "dataset_sha256": digest,
                    },
                )
            )
    return samples[:limit] if limit else samples, digest


def _entry_dict(entry: TranscriptEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "session_id": entry.session_id,
        "agent_id": entry.agent_id,
        "kind": entry.kind.value,
        "timestamp": entry.timestamp,
        "content": entry.content,
    }


def entry_from_dict(data: dict[str, Any]) -> TranscriptEntry:
    return TranscriptEntry(
        id=data["id"],
        session_id=data["session_id"],
        agent_id=data["agent_id"],
        kind=EntryKind(data["kind"]),
        timestamp=data["timestamp"],
        content=data["content"],
    )
