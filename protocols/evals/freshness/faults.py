"""The operational faults of protocol 5, each as a scenario over a fresh store, and the health checks at fixed steps.

A scenario runs ``steps`` steps. Every step does a host's ordinary work (a writer appends a few turns and the store
indexes them); from step ``inject_at`` on, the fault's own action runs too. After every step ``Substrate.health()``
is read and every check that is not OK is recorded. ``onset_step`` is the first step at which the fault is present
in the store (for some faults later than ``inject_at``: the critical set overflows only once enough critical
memories exist); detection is the first step at or after the onset with a check that is not OK. The same scenario
without the injection is the healthy baseline: a check that is not OK there is a false alarm.

The store is real (SQLite catalog, faiss, bm25s, the transcript and memory files); the embedder is whatever the
caller passes (the shared real embedder in the task and ``lca bench freshness``, a fake in unit tests). No model is
asked anything: the consolidation cycles of the compaction scenario run with ``max_candidates=0``, so a cycle
records its span and trigger (what health could read) and never calls a writer.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lca.consolidation import ConsolidationConfig
from lca.context import ContextWindow, LiveContextManager
from lca.errors import LCAError, RecordFormatError
from lca.ingest import record_writer
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.substrate import Substrate
from lca.types import EntryKind, HealthReport, HealthStatus, TranscriptEntry

FaultKind = Literal[
    "stale_writer", "oversize_embedder", "schema_drift", "critical_overflow", "duplicate_writers", "late_pre_compaction"
]
OK = HealthStatus.OK
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # the scenarios' clock: one step is one hour of work
TOPICS = ("parser", "scheduler", "billing", "cache", "exporter", "auth", "search", "uploader", "metrics", "planner")
ACTIONS = ("add a retry", "pin the version", "drop the flag", "split the module", "raise the timeout", "log the ids")


class FaultSpec(BaseModel):
    """One line of a fault file: which fault, how many health checks, the step it is injected at, its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    fault: FaultKind
    title: str = Field(min_length=1)
    paper: str = Field(min_length=1)  # the operational fault as the LCA paper records it
    steps: int = Field(ge=2, le=40)
    inject_at: int = Field(ge=1)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _inside(self) -> FaultSpec:
        if self.inject_at >= self.steps:
            raise ValueError(f"inject_at {self.inject_at} leaves no step to check after it (steps {self.steps})")
        return self


@dataclass(frozen=True)
class Finding:
    """One health check that was not OK at a step."""

    check: str
    status: str
    message: str


@dataclass(frozen=True)
class StepHealth:
    step: int
    fault_present: bool
    began: float  # seconds since the scenario started, when the step began
    seconds: float  # seconds since the scenario started, when its health report was complete
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class FaultRun:
    """A scenario's run: every step's findings, and when (if ever) health saw the fault."""

    fault: str
    injected: bool
    onset_step: int | None
    steps: tuple[StepHealth, ...]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def detection(self) -> StepHealth | None:
        """The first step at or after the onset whose health report holds a finding."""
        if self.onset_step is None:
            return None
        return next((s for s in self.steps if s.step >= self.onset_step and s.findings), None)

    @property
    def false_alarms(self) -> tuple[StepHealth, ...]:
        """Steps with a finding while the fault was not present (every step of a healthy run)."""
        return tuple(s for s in self.steps if s.findings and not s.fault_present)

    def summary(self) -> dict[str, Any]:
        found = self.detection
        onset = next((s for s in self.steps if s.step == self.onset_step), None)
        first = found.findings[0] if found else None
        return {
            "fault": self.fault,
            "injected": self.injected,
            "onset_step": self.onset_step,
            "detected": found is not None,
            "detection_step": found.step if found else None,
            "steps_to_detection": found.step - self.onset_step if found and self.onset_step is not None else None,
            "seconds_to_detection": round(found.seconds - onset.began, 4) if found and onset else None,
            "check": first.check if first else None,
            "status": first.status if first else None,
            "message": first.message if first else None,
            "false_alarm_steps": [s.step for s in self.false_alarms],
            "notes": self.notes,
            "steps": [asdict(s) for s in self.steps],
        }


# ---- the embedder fault ----------------------------------------------------------------------------------
class OversizeRejectingEmbedder:
    """The fault itself, not a stand-in: an embedder that declares the inner model's input limit but raises on any
    text over ``limit`` tokens (a service with a lower request limit than the model it serves). Its id is the inner
    model's, so the store sees the same embedder and only the failures tell."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.rejected = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        sizes = self.inner.count_tokens(list(texts))
        over = [n for n in sizes if n > self.limit]
        if over:
            self.rejected += len(over)
            raise LCAError(f"input of {max(over)} tokens is over this endpoint's limit of {self.limit}")
        return self.inner.embed(texts)


class _NoWriter:
    """The writer of cycles run with ``max_candidates=0``: never asked (a call is a bug, said as such)."""

    model_id = "none (max_candidates=0)"

    def generate(self, messages: Any, **kwargs: Any) -> str:
        raise LCAError("the freshness scenarios ask no writer: their cycles run with max_candidates=0")


SPAN_ONLY = ConsolidationConfig(max_candidates=0)


# ---- the scenarios -----------------------------------------------------------------------------------
class Scenario:
    """A fresh store and a host's ordinary work; subclasses add the fault. ``step`` returns whether the fault is
    present in the store after it."""

    def __init__(self, spec: FaultSpec, home: Path, embedder: Any, *, inject: bool) -> None:
        self.spec = spec
        self.home = home
        self.embedder = embedder
        self.inject = inject
        self.present = False
        self.notes: dict[str, Any] = {}
        self.store = self.open(embedder)

    def open(self, embedder: Any, **kwargs: Any) -> Substrate:
        return Substrate(self.home, embedder=embedder, lock_timeout=60.0, **kwargs)

    def turns(self, step: int, session: str = "work", *, prefix: str = "") -> list[TranscriptEntry]:
        """Two distinct turns of routine work for a step (distinct so a healthy store holds no duplicates)."""
        topic, action = TOPICS[step % len(TOPICS)], ACTIONS[step % len(ACTIONS)]
        at = START + timedelta(hours=step)
        texts = (
            (EntryKind.USER_TURN, f"Hour {step}: the {topic} job failed again on batch {step * 7 + 3}; what now?"),
            (EntryKind.ASSISTANT_TURN, f"For the {topic} job I suggest we {action} and rerun batch {step * 7 + 3}."),
        )
        return [
            TranscriptEntry(
                id=f"{prefix}{session}:{step}:{n}",
                session_id=session,
                agent_id="agent",
                kind=kind,
                timestamp=(at + timedelta(minutes=n)).isoformat(timespec="seconds"),
                content=text,
            )
            for n, (kind, text) in enumerate(texts)
        ]

    def work(self, step: int) -> None:
        self.store.append(self.turns(step))

    def health(self) -> HealthReport:
        """What `lca health` reports now: a fresh reader of the store (a long-lived writer's own index object
        would not see what another writer added since it loaded), with the store's embedder and budget."""
        reader = self.open(self.store.embedder, critical_budget=self.store.critical_budget)
        try:
            return reader.health()
        finally:
            reader.close()

    def fault(self, step: int) -> None:
        raise NotImplementedError

    def step(self, step: int) -> bool:
        self.work(step)
        if self.inject and step >= self.spec.inject_at:
            self.fault(step)
        return self.present

    def close(self) -> None:
        self.store.close()


class StaleWriter(Scenario):
    """A process still running an older build writes the store beside the current one (``last_writer``: which of
    the two wrote last in each step). The older build is the current code that then records what an older build's
    ingest records: its version as the catalog's ``last_writer_version`` and one ingest in the catalog's writer
    record (``lca.ingest.record_writer``), the writer provenance the store keeps."""

    def fault(self, step: int) -> None:
        stale_version = str(self.spec.params.get("stale_version", "0.0.1+g000000000000"))
        stale = self.open(self.embedder)
        try:
            stale.append(self.turns(step + 500, "stale-daemon"))
            with stale.writer_lock():
                stale.index.catalog_.set_meta("last_writer_version", stale_version)
                record_writer(stale.index.catalog_, stale_version)
        finally:
            stale.close()
        self.present = True
        if self.spec.params.get("last_writer", "stale") == "current":  # the current build writes after it
            self.store.append(self.turns(step + 1000, "work", prefix="late-"))


class OversizeEmbedder(Scenario):
    """Each step brings one long turn (about half the model's input limit). From the injection the store embeds
    through an endpoint that rejects inputs over ``limit_share`` of the limit: those chunks must be held back and
    counted, never dropped."""

    def work(self, step: int) -> None:
        super().work(step)
        unit = f"Log line {step}: worker {step} retried the upload of part {step} and timed out after 30 s. "
        target = max(8, self.embedder.max_input_tokens // 2)
        text = unit
        while self.embedder.count_tokens([text + unit])[0] <= target:
            text += unit
        long = TranscriptEntry(
            id=f"work:{step}:log",
            session_id="work",
            agent_id="agent",
            kind=EntryKind.TOOL_RESULT,
            timestamp=(START + timedelta(hours=step, minutes=5)).isoformat(timespec="seconds"),
            content=text.strip(),
        )
        self.store.append([long])
        if isinstance(self.store.embedder, OversizeRejectingEmbedder) and self.store.embedder.rejected:
            self.present = True
        self.notes["long_turn_tokens"] = self.embedder.count_tokens([long.content])[0]

    def fault(self, step: int) -> None:
        if step == self.spec.inject_at:  # the host switches to the endpoint; the next long turn meets it
            limit = max(4, int(self.embedder.max_input_tokens * float(self.spec.params.get("limit_share", 0.25))))
            self.store.close()
            self.store = self.open(OversizeRejectingEmbedder(self.embedder, limit))
            self.notes["endpoint_limit"] = limit

    def step(self, step: int) -> bool:
        if self.inject and step >= self.spec.inject_at:
            self.fault(step)
        self.work(step)
        return self.present


class SchemaDrift(Scenario):
    """A memory written through the write API, then one written behind it by a writer of another schema: its
    ``sources`` entries lack the nested ``session`` field."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store.memory.write(_memory("runbook-note", critical=False), "Rerun failed batches one at a time.\n")

    def fault(self, step: int) -> None:
        if step != self.spec.inject_at:
            return
        path = self.store.memory.path_for("drifted-note")
        path.write_text(
            "---\nid: drifted-note\ntype: fact\ncreated: 2026-01-05T12:00:00\nauthority: reviewed\nprivacy: private\n"
            "sources:\n- entries: [work:1:0]\n---\nThe billing job reads batches in order.\n",
            encoding="utf-8",
        )
        self.present = True


class CriticalOverflow(Scenario):
    """More critical memories than the critical budget holds: one more each step from the injection. The fault is
    present once the live context manager, with the store's budget as its window's, leaves one out
    (``WorkingSet.critical_overflow``)."""

    def open(self, embedder: Any, **kwargs: Any) -> Substrate:
        kwargs.setdefault("critical_budget", int(self.spec.params.get("critical_budget", 80)))
        return super().open(embedder, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store.memory.write(_memory("critical-0", critical=True), "Never force-push to the release branch.\n")
        self.window = ContextWindow(total_tokens=8192, critical_budget=self.store.critical_budget, reserve_output=64)
        self.notes["overflow"] = []

    def fault(self, step: int) -> None:
        body = f"Before touching the {TOPICS[step % len(TOPICS)]} job, check the on-call rota and page owner {step}."
        self.store.memory.write(_memory(f"critical-{step}", critical=True), body + "\n")

    def step(self, step: int) -> bool:
        super().step(step)
        reader = self.open(self.embedder)  # a fresh view: a long-lived one's memory cache may lag a write
        try:
            live = LiveContextManager(reader, self.window, session_id="work", agent_id="agent", identity="")
            overflow = live.build("what is the state of the jobs?").critical_overflow
        finally:
            reader.close()
        self.notes["overflow"].append(list(overflow))
        self.present = self.present or bool(overflow)
        return self.present


class DuplicateWriters(Scenario):
    """Two writers on one index without dedup: from the injection a second Substrate object on the same store
    mirrors every turn under its own session id (a second hook process), so each text is indexed twice."""

    def fault(self, step: int) -> None:
        mirror = self.open(self.embedder)
        try:
            turns = [
                TranscriptEntry(**{**asdict(t), "id": "mirror:" + t.id, "session_id": "work-mirror"})
                for t in self.turns(step)
            ]
            mirror.append(turns)
        finally:
            mirror.close()
        self.present = True


class LatePreCompaction(Scenario):
    """A live window small enough that turns leave it every step. Before the injection the host's consolidation runs
    on the manager's pre_compaction trigger (before the prune); from it, the host runs the pre_compaction cycle
    after ``build`` has pruned: the turns the cycle should have seen in the window are gone from it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        window = ContextWindow(
            total_tokens=int(self.spec.params.get("window_tokens", 160)),
            reserve_output=16,
            critical_budget=0,
            recall_budget=0,
        )
        self.live = LiveContextManager(
            self.store, window, session_id="work", agent_id="agent", identity="", consolidate=self.consolidate
        )
        self.notes["cycles"] = []

    def consolidate(self, trigger: str) -> None:
        result = self.store.checkpoint(_NoWriter(), trigger=trigger, config=SPAN_ONLY, session_id="work")
        self.notes["cycles"].append({"trigger": trigger, "failures": len(result.failures), "at": time.time()})

    def work(self, step: int) -> None:
        for turn in self.turns(step):
            self.live.add(turn)
        late = self.inject and step >= self.spec.inject_at
        self.live.consolidate = None if late else self.consolidate
        working = self.live.build(f"where does the {TOPICS[step % len(TOPICS)]} job stand?")
        if late and working.pruned:
            self.consolidate("pre_compaction")  # the trigger as the faulty host set it: after the prune
            self.present = True
        self.store.ingest()  # the host's ingest after the step: the cycle's checkpoint entry is indexed

    def fault(self, step: int) -> None:
        """The fault is in ``work``: which moment the host calls its pre_compaction cycle at."""


SCENARIOS: dict[str, type[Scenario]] = {
    "stale_writer": StaleWriter,
    "oversize_embedder": OversizeEmbedder,
    "schema_drift": SchemaDrift,
    "critical_overflow": CriticalOverflow,
    "duplicate_writers": DuplicateWriters,
    "late_pre_compaction": LatePreCompaction,
}


def _memory(memory_id: str, *, critical: bool) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        type=MemoryType.LESSON,
        created=START,
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        critical=critical,
    )


def run_fault(
    spec: FaultSpec, embedder: Any, *, inject: bool = True, workdir: Path | None = None, clock=time.perf_counter
) -> FaultRun:
    """One scenario on a fresh store under ``workdir`` (a temporary folder, removed after, by default)."""
    home = Path(tempfile.mkdtemp(prefix=f"lca-freshness-{spec.id}-", dir=workdir))
    scenario = SCENARIOS[spec.fault](spec, home / "store", embedder, inject=inject)
    started = clock()
    steps: list[StepHealth] = []
    onset: int | None = None
    try:
        for n in range(spec.steps):
            began = clock() - started
            present = scenario.step(n)
            if present and onset is None:
                onset = n
            findings = tuple(
                Finding(c.name, c.status.value, c.detail) for c in scenario.health().checks if c.status != OK
            )
            steps.append(StepHealth(n, present, round(began, 4), round(clock() - started, 4), findings))
    finally:
        scenario.close()
        shutil.rmtree(home, ignore_errors=True)
    return FaultRun(spec.id, inject, onset, tuple(steps), dict(scenario.notes))


def run_with_baseline(spec: FaultSpec, embedder: Any, **kwargs: Any) -> dict[str, Any]:
    """The fault's run and the same steps without it: what the task's scorer and the bench report."""
    faulty = run_fault(spec, embedder, inject=True, **kwargs).summary()
    healthy = run_fault(spec, embedder, inject=False, **kwargs).summary()
    return {
        "id": spec.id,
        "fault": spec.fault,
        "title": spec.title,
        **{k: v for k, v in faulty.items() if k not in ("fault", "steps")},
        "false_alarm": bool(healthy["false_alarm_steps"] or faulty["false_alarm_steps"]),
        "baseline_findings": [f for s in healthy["steps"] for f in s["findings"]],
        "steps": faulty["steps"],
    }


def load_faults(path: Path | str) -> list[FaultSpec]:
    """The fault file: one FaultSpec per JSON line; a bad line is refused naming the file, line and field."""

    path = Path(path)
    specs: list[FaultSpec] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            specs.append(FaultSpec.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"not JSON: {exc}", path=str(path), line=number) from None
        except ValidationError as exc:
            raise RecordFormatError.from_validation(exc, path=str(path), line=number) from None
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise RecordFormatError(f"fault ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}", path=str(path))
    return specs


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table the README, docs and bench print: one row per fault."""
    lines = [
        "| fault | onset step | detected | steps / seconds to detection | check (status): message | false alarm |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        when = f"{r['steps_to_detection']} / {r['seconds_to_detection']:.3f}" if r["detected"] else "-"
        found = f"{r['check']} ({r['status']}): {r['message'][:140]}" if r["detected"] else "none"
        lines.append(
            f"| {r['id']} | {r['onset_step']} | {'yes' if r['detected'] else 'NO'} | {when} | {found} | "
            f"{'YES' if r['false_alarm'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"
