"""The one interface every experimental condition implements, its records, and the registry.

Conventions follow scikit-learn: a constructor only stores its parameters (plain strings and
numbers, so inspect's ``eval_set`` can identify tasks by them); ``get_params``/``set_params``/``clone``
read, change and copy them; heavy resources (the embedder, the generators for each role, a working
folder) arrive through ``attach(runtime)``; ``reset()`` starts a fresh history. A condition never
sees a probe's gold answer or evidence: ``Probe`` has no field for them. ``conditions.checks``
verifies all of this for any condition.
"""

from __future__ import annotations

import inspect as pyinspect
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from lca.continuation import ContinuationSignals
from lca.errors import LCAError
from lca.memory import MemoryRecord
from lca.ports import Embedder, TextGenerator
from lca.retrieval import RetrievalConfig
from lca.types import TranscriptEntry

ROLES = ("agent", "summarizer", "reviewer", "grader")


# ---- records ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    """One past session of a history, as authoritative transcript entries, and the memory files the agent
    holds once it has ended (``(record, body)`` pairs a scenario gives; conditions with structured memory
    write them through the one write API, the others ignore them)."""

    id: str
    entries: tuple[TranscriptEntry, ...]
    memories: tuple[tuple[MemoryRecord, str], ...] = ()


@dataclass(frozen=True)
class Probe:
    """What the agent is asked after the history, and what a host knows when it is asked: where (the
    channel's visibility, the project, the agent's role), whether it continues the last session (which then
    has not ended) and the continuation signals read off the conversation (``lca.continuation``).
    Deliberately no answer and no evidence."""

    id: str
    question: str
    asked_at: str | None = None
    channel: str | None = None  # private | team | public
    project: str | None = None
    role: str | None = None
    continues: bool = False
    signals: ContinuationSignals = field(default_factory=ContinuationSignals)


@dataclass(frozen=True)
class InjectedItem:
    """One piece of context a condition put in front of the model, and where it came from."""

    kind: str  # identity | summary | memory | transcript | handoff | critical
    source: str  # a source pointer key, a file name, or a summary id
    text: str
    tokens: int
    authority: str | None = None
    score: float | None = None
    pointers: tuple[str, ...] = ()  # transcript entries it rests on, as "session#entry"
    label: str | None = None  # the header recall rendered it under (``lca.recall.shown.item_label``); None: the kind's
    marker: str | None = None  # what replaced the turn it shows, as its header says it ("superseded ... by ..."); None:
    # no later turn replaced it that this condition knows of


@dataclass(frozen=True)
class ContextPacket:
    """The messages to send and an account of what was injected."""

    condition: str
    messages: tuple[dict[str, str], ...]
    items: tuple[InjectedItem, ...]
    injected_tokens: int
    budget_tokens: int
    recall_latency_ms: float = 0.0
    notes: Mapping[str, Any] = field(default_factory=dict)

    def injected_text(self) -> str:
        return "\n".join(item.text for item in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "injected_tokens": self.injected_tokens,
            "budget_tokens": self.budget_tokens,
            "recall_latency_ms": round(self.recall_latency_ms, 3),
            "items": [
                {
                    "kind": i.kind,
                    "source": i.source,
                    "tokens": i.tokens,
                    "authority": i.authority,
                    "score": i.score,
                    "pointers": list(i.pointers),
                    "marker": i.marker,
                    "text": i.text[:2000],
                }
                for i in self.items
            ],
            "notes": dict(self.notes),
        }


# ---- the runtime a condition is attached to -----------------------------------------------------
@dataclass
class ConditionRuntime:
    """What a condition may use: a working folder, the embedder, and a generator per role.
    A role without its own generator uses the agent's (inspect's model-role convention)."""

    workdir: Path
    embedder: Embedder | None = None
    generators: Mapping[str, TextGenerator] = field(default_factory=dict)
    seed: int = 0
    token_counter: Callable[[str], int] | None = None
    identity: Mapping[str, str] = field(default_factory=dict)  # identity / user / instructions texts
    retrieval: RetrievalConfig | None = None  # the ranking a substrate condition's store uses (a protocol's
    # retrieval.yaml); None: the store's own
    recall_weights: Mapping[str, float] = field(default_factory=dict)  # a protocol's recall-weights.yaml: resonance
    # weights full-lca starts from (its own ``weights`` parameter wins)

    def generator(self, role: str) -> TextGenerator:
        if role in self.generators:
            return self.generators[role]
        if "agent" in self.generators:
            return self.generators["agent"]
        raise LCAError(f"no generator for role '{role}' (nor an agent model to fall back on)")

    def optional_generator(self, role: str) -> TextGenerator | None:
        """The role's generator, or None where the runtime has none (a substrate-level replay without models):
        the caller then does without it, and says so."""
        try:
            return self.generator(role)
        except LCAError:
            return None

    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        if self.token_counter is not None:
            return int(self.token_counter(text))
        if self.embedder is not None:
            return max(0, self.embedder.count_tokens([text])[0] - 2)
        return len(text.split())

    @classmethod
    def temporary(cls, **kw: Any) -> ConditionRuntime:
        return cls(workdir=Path(tempfile.mkdtemp(prefix="lca-condition-")), **kw)


# ---- the interface ----------------------------------------------------------------------------
class Condition:
    """Base class: parameters stored as given; ``get_params`` reads them back from the signature."""

    name: ClassVar[str] = ""
    uses_roles: ClassVar[tuple[str, ...]] = ()
    home_name: str  # optional: the working folder's name when it is not ``name`` (unset by default)

    def __init__(self, budget_tokens: int = 1200) -> None:
        self.budget_tokens = budget_tokens

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in pyinspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Self:
        """Change parameters by name (validated like ``build_condition``: every name is checked before
        anything is set); they take effect at the next ``reset()``. Returns the condition itself."""
        check_params(type(self), params)
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def attach(self, runtime: ConditionRuntime) -> Self:
        self.runtime = runtime
        return self

    @property
    def home(self) -> Path:
        return self.runtime.workdir / getattr(self, "home_name", self.name)

    def reset(self) -> None:
        """Forget every history: a fresh working folder."""
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True, exist_ok=True)

    def ingest(self, session: Session) -> None:
        """Take in one past session (the default keeps nothing)."""

    def end_session(self) -> None:
        """The session just ingested is over (summaries, consolidation, handoffs happen here)."""

    def build_context(self, probe: Probe) -> ContextPacket:
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``attach`` and ``reset`` opened (stores, indexes)."""

    def replaced_turns(self) -> Mapping[str, str]:
        """The turns ("session#entry") this condition holds back (``held``) or marks (``marked``) as replaced by a
        later turn, labelled or inferred: what a false hold is counted against. The default knows of none."""
        return {}

    def replacement_events(self) -> Sequence[Any]:
        """The replacement events this condition's store holds (``lca.events.ReplacementEvent``), labelled and
        inferred; the default keeps none."""
        return ()

    # -- helpers shared by the conditions
    def _packet(
        self,
        probe: Probe,
        items: Sequence[InjectedItem],
        *,
        latency_ms: float = 0.0,
        notes: Mapping[str, Any] | None = None,
    ) -> ContextPacket:
        """Render the items the same way for every condition and hold them to the budget: the
        injected count is of the rendered text itself; items are dropped from the end (the lowest
        priority) until it fits, and the drops are noted."""
        items = list(items)
        dropped = []
        while True:
            system = render_items(items)
            tokens = self.runtime.count_tokens(system)
            if tokens <= self.budget_tokens or not items:
                break
            dropped.append(items.pop().source)
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": probe.question}
        ]
        notes = dict(notes or {})
        if dropped:
            notes["dropped_for_budget"] = dropped
        return ContextPacket(
            self.name, tuple(messages), tuple(items), tokens if items else 0, self.budget_tokens, latency_ms, notes
        )

    def _fit(self, text: str, budget: int | None = None) -> str:
        """The longest prefix of whole lines within ``budget`` (default the condition's), then whole
        words for a lone long line."""
        count = self.runtime.count_tokens
        budget = self.budget_tokens if budget is None else budget
        if count(text) <= budget:
            return text
        kept: list[str] = []
        for line in text.splitlines():
            if count("\n".join(kept + [line])) > budget:
                if not kept:
                    words: list[str] = []
                    for word in line.split():
                        if count(" ".join(words + [word])) > budget:
                            break
                        words.append(word)
                    kept = [" ".join(words)]
                break
            kept.append(line)
        return "\n".join(kept)


def clone(condition: Condition) -> Condition:
    """A new, unattached condition of the same class with equal parameters (scikit-learn's ``clone``):
    nothing of the original's runtime, stores or history comes along."""
    params = condition.get_params()
    copy = type(condition)(**params)
    changed = sorted(name for name, value in params.items() if getattr(copy, name, None) is not value)
    if changed:
        raise LCAError(
            f"cannot clone condition '{condition.name}': its constructor does not store parameter(s) "
            f"{', '.join(changed)} as given"
        )
    return copy


def is_plain_parameter(value: Any) -> bool:
    """What a condition parameter may be: a string, a number, a boolean or None (task arguments are these)."""
    return value is None or isinstance(value, (str, int, float, bool))


def render_items(items: Sequence[InjectedItem]) -> str:
    """One rendering for every condition, so formatting never differs between arms of a study. A recalled item is
    shown under the header recall counted it with, as the live context manager shows it to an agent."""
    parts = []
    for item in items:
        if item.kind in ("identity", "summary", "handoff"):
            parts.append(item.text)
        elif item.label:
            parts.append(f"{item.label}\n{item.text}")
        else:
            label = f"{item.kind}: {item.source}" + (f", {item.authority}" if item.authority else "")
            parts.append(f"[{label}]\n{item.text}")
    return "\n\n".join(parts)


# ---- the registry ---------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Condition]] = {}


def register_condition(cls: type[Condition]) -> type[Condition]:
    """Class decorator; a second class under a taken name is refused."""
    if not cls.name:
        raise LCAError(f"{cls.__qualname__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise LCAError(f"a condition named '{cls.name}' is already registered ({_REGISTRY[cls.name].__qualname__})")
    for name, param in pyinspect.signature(cls.__init__).parameters.items():
        if name != "self" and param.default is pyinspect.Parameter.empty:
            raise LCAError(f"{cls.__qualname__}: parameter '{name}' needs a default (sklearn convention)")
    _REGISTRY[cls.name] = cls
    return cls


def available_conditions() -> list[str]:
    return sorted(_REGISTRY)


def condition_class(name: str) -> type[Condition]:
    if name not in _REGISTRY:
        raise LCAError(f"unknown condition '{name}'; known: {', '.join(available_conditions())}")
    return _REGISTRY[name]


def check_params(cls: type[Condition], params: Mapping[str, Any]) -> None:
    """Refuse unknown parameter names (listing the known ones) and values that are not plain."""
    known = cls._param_names()
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise LCAError(f"condition '{cls.name}' has no parameter(s) {', '.join(unknown)}; it takes: {', '.join(known)}")
    for key, value in params.items():
        if not is_plain_parameter(value):
            raise LCAError(f"condition parameter '{key}' must be a plain string or number, got {type(value).__name__}")


def build_condition(name: str, **params: Any) -> Condition:
    """A condition by name with plain parameters; unknown parameters are refused by name."""
    cls = condition_class(name)
    check_params(cls, params)
    return cls(**params)
