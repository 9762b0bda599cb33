"""The contract every condition meets, as checks anyone can run (scikit-learn's ``check_estimator``).

``check_condition(condition_or_name, runtime_factory)`` runs every check on one condition and raises
``ConditionCheckError`` naming the check and the condition at the first failure.
``parametrize_with_checks(...)`` turns the same checks into one pytest case each, so a condition
written elsewhere is held to the contract with one line in its own test suite::

    @parametrize_with_checks([MyCondition(), "full-lca"], runtime_factory=make_runtime)
    def test_contract(condition, check):
        check()

The checks that replay a history need real or fake models: they take a ``runtime_factory(workdir)
-> ConditionRuntime`` from the caller (no model ships here) and build the history from plain texts
themselves. Every check works on clones, never on the condition it was given.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect as pyinspect
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from conditions.base import (
    ROLES,
    Condition,
    ConditionRuntime,
    ContextPacket,
    InjectedItem,
    Probe,
    Session,
    build_condition,
    clone,
    is_plain_parameter,
)
from lca.errors import LCAError
from lca.params import format_assignments
from lca.types import EntryKind, TranscriptEntry

RuntimeFactory = Callable[[Path], ConditionRuntime]
Check = Callable[..., None]

CONTRACT_HISTORY: tuple[tuple[str, ...], ...] = (
    (
        "My sister Lucia lives in Lisbon and works as a nurse.",
        "Noted: Lucia, a nurse in Lisbon.",
        "We decided the billing service moves to PostgreSQL 16.",
        "Understood, PostgreSQL 16 it is.",
    ),
    (
        "I adopted a grey cat called Pebble last week.",
        "Congratulations on Pebble!",
        "Please always answer me briefly.",
        "I will keep answers brief.",
    ),
)
CONTRACT_PROBE = Probe("p1", "Where does Lucia live and what is her job?", "2026-03-05T09:00:00")
BUDGETS = (12, 40, 400)


class ConditionCheckError(AssertionError):
    """A condition broke its contract; names the check and the condition."""

    def __init__(self, check: str, condition: str, reason: str) -> None:
        self.check, self.condition, self.reason = check, condition, reason
        super().__init__(f"{check} failed for condition {condition}: {reason}")


# ---- the history the checks replay ----------------------------------------------------------------
def contract_history(prefix: str = "h", texts: Sequence[Sequence[str]] = CONTRACT_HISTORY) -> list[Session]:
    """Sessions of alternating user and assistant turns, ids ``{prefix}{session}:{turn}``."""
    sessions = []
    for s, turns in enumerate(texts, 1):
        entries = tuple(
            TranscriptEntry(
                id=f"{prefix}{s}:{n}",
                session_id=f"{prefix}{s}",
                agent_id="agent",
                kind=EntryKind.USER_TURN if n % 2 else EntryKind.ASSISTANT_TURN,
                timestamp=f"2026-03-0{s}T10:00:{n:02d}",
                content=text,
            )
            for n, text in enumerate(turns, 1)
        )
        sessions.append(Session(f"{prefix}{s}", entries))
    return sessions


def replay(condition: Condition, sessions: Iterable[Session]) -> Condition:
    """What every protocol does with a history: reset, then ingest and end each session in order."""
    condition.reset()
    for session in sessions:
        condition.ingest(session)
        condition.end_session()
    return condition


def label(condition: Condition) -> str:
    """``name`` or ``name(param=value,...)`` with the parameters that differ from the defaults; just the
    name when the parameters cannot be read (a broken condition still gets a label)."""
    name = condition.name or type(condition).__qualname__
    try:
        defaults = {k: p.default for k, p in _signature_params(type(condition)).items()}
        changed = {
            k: v
            for k, v in condition.get_params().items()
            if k in defaults and is_plain_parameter(v) and defaults[k] != v
        }
    except Exception:  # the checks will say what is wrong with it
        return name
    return f"{name}({','.join(format_assignments(changed))})" if changed else name


def _resolve(condition_or_name: Condition | str) -> Condition:
    if isinstance(condition_or_name, str):
        return build_condition(condition_or_name)
    if isinstance(condition_or_name, Condition):
        return condition_or_name
    raise LCAError(f"expected a condition or a registered condition name, got {type(condition_or_name).__name__}")


def _other_value(value: Any) -> Any:
    """A plain value different from ``value`` and of its type, to see that the constructor stores it as given."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 0.375
    if isinstance(value, str):
        return f"{value}-check"
    return "check"


def _signature_params(cls: type[Condition]) -> dict[str, pyinspect.Parameter]:
    return {name: p for name, p in pyinspect.signature(cls.__init__).parameters.items() if name != "self"}


class _Workdirs:
    """Fresh working folders for the runtimes of one check, removed afterwards."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="lca-condition-check-")

    def __call__(self, name: str) -> Path:
        path = Path(self._tmp.name) / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def __enter__(self) -> _Workdirs:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()


def _run(
    condition: Condition,
    runtime_factory: RuntimeFactory,
    workdir: Path,
    sessions: Sequence[Session] | None = None,
    probe: Probe = CONTRACT_PROBE,
) -> ContextPacket:
    """A clone, attached to a fresh runtime, fed the history, asked the probe, closed."""
    fresh = clone(condition).attach(runtime_factory(workdir))
    try:
        replay(fresh, contract_history() if sessions is None else sessions)
        return fresh.build_context(probe)
    finally:
        fresh.close()


def _shape(packet: ContextPacket) -> tuple[Any, ...]:
    """What a packet puts in front of the model, without timings."""
    return (packet.messages, packet.injected_tokens, tuple((i.kind, i.source, i.text) for i in packet.items))


# ---- the checks ---------------------------------------------------------------------------------
def check_constructor_stores_plain_parameters(condition: Condition) -> None:
    """sklearn: every parameter has a plain default and the constructor stores what it is given, as given,
    and nothing else (nothing heavy, no runtime)."""
    cls = type(condition)
    assert isinstance(cls.name, str) and cls.name, f"{cls.__qualname__} has no name"
    assert set(cls.uses_roles) <= set(ROLES), f"uses_roles {cls.uses_roles} names a role outside {ROLES}"
    params = _signature_params(cls)
    for name, p in params.items():
        assert p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD), f"the constructor takes *{name}; name each parameter"
        assert p.default is not p.empty, f"parameter '{name}' has no default"
        assert is_plain_parameter(p.default), (
            f"parameter '{name}' defaults to a {type(p.default).__name__}, not a plain string or number"
        )
    default = cls()
    extra = sorted(set(vars(default)) - set(params))
    assert not extra, f"the constructor set attribute(s) {', '.join(extra)} besides its parameters"
    given = {name: _other_value(p.default) for name, p in params.items()}
    built = cls(**given)
    for name, value in given.items():
        stored = getattr(built, name, None)
        assert type(stored) is type(value) and stored == value, (
            f"the constructor stored parameter '{name}' as {stored!r} when given {value!r}"
        )


def check_get_params_round_trip(condition: Condition) -> None:
    """``get_params()`` names exactly the constructor's parameters, with plain values, and building the
    class from them gives equal parameters."""
    params = condition.get_params()
    names = set(_signature_params(type(condition)))
    assert set(params) == names, f"get_params() gives {sorted(params)}, the constructor takes {sorted(names)}"
    odd = sorted(k for k, v in params.items() if not is_plain_parameter(v))
    assert not odd, f"get_params() gives values that are not plain strings or numbers: {', '.join(odd)}"
    again = type(condition)(**params).get_params()
    assert again == params, f"get_params() {params} rebuilt through the constructor gives {again}"


def check_set_params(condition: Condition) -> None:
    """``set_params(**p)`` sets the named parameters and returns the condition; an unknown name is refused,
    with the known names, before anything is set."""
    target = clone(condition)
    before = target.get_params()
    assert target.set_params() is target, "set_params() with nothing to set does not return the condition"
    changed = {name: _other_value(value) for name, value in before.items()}
    returned = target.set_params(**changed)
    assert returned is target, f"set_params(...) returned {returned!r}, not the condition"
    assert target.get_params() == changed, f"after set_params({changed}) get_params() gives {target.get_params()}"
    target.set_params(**before)
    first = next(iter(before), None)
    try:
        target.set_params(no_such_parameter=1, **({first: changed[first]} if first else {}))
    except LCAError as error:
        assert "no_such_parameter" in str(error) and all(name in str(error) for name in before), (
            f"refusing an unknown name, set_params said '{error}' without naming it and the known parameters"
        )
    else:
        raise AssertionError("set_params(no_such_parameter=1) was accepted")
    assert target.get_params() == before, "a refused set_params(...) still changed parameters"


def check_clone(condition: Condition) -> None:
    """``clone`` gives a new, unattached instance of the same class with equal parameters that changes
    independently of the original."""
    original = clone(condition)
    original.attach(ConditionRuntime(workdir=Path(tempfile.gettempdir())))  # attached, never reset nor used
    copy = clone(original)
    assert copy is not original and type(copy) is type(original), "clone did not give a new instance of the class"
    assert copy.get_params() == original.get_params(), (
        f"clone has parameters {copy.get_params()}, the original {original.get_params()}"
    )
    assert not hasattr(copy, "runtime"), "clone of an attached condition is attached too"
    before = original.get_params()
    copy.set_params(**{name: _other_value(value) for name, value in before.items()})
    assert original.get_params() == before, "changing the clone's parameters changed the original's"


def check_interface_packet_and_determinism(condition: Condition, runtime_factory: RuntimeFactory) -> None:
    """The packet names the condition, ends with the probe's question as the user message, accounts for
    what it injected, and is the same on a second run of the same history."""
    with _Workdirs() as workdir:
        first = _run(condition, runtime_factory, workdir("a"))
        second = _run(condition, runtime_factory, workdir("b"))
    assert isinstance(first, ContextPacket), f"build_context returned {type(first).__name__}, not a ContextPacket"
    assert first.condition == condition.name, f"the packet names '{first.condition}', not '{condition.name}'"
    assert first.messages and first.messages[-1] == {"role": "user", "content": CONTRACT_PROBE.question}, (
        "the last message is not the probe's question from the user"
    )
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in first.messages), (
        "a message is not a {role, content} pair of strings"
    )
    assert all(isinstance(i, InjectedItem) for i in first.items), "an injected item is not an InjectedItem"
    assert first.recall_latency_ms >= 0.0, f"negative recall latency {first.recall_latency_ms}"
    assert _shape(first) == _shape(second), "two runs of the same history gave different packets"


def check_injected_tokens_within_budget(condition: Condition, runtime_factory: RuntimeFactory) -> None:
    """At every budget the packet states that budget, the injected count is of the rendered system text,
    and it never exceeds the budget."""
    assert "budget_tokens" in condition.get_params(), "the condition has no budget_tokens parameter"
    with _Workdirs() as workdir:
        for budget in BUDGETS:
            runtime = runtime_factory(workdir(str(budget)))
            fresh = clone(condition).set_params(budget_tokens=budget).attach(runtime)
            try:
                replay(fresh, contract_history())
                packet = fresh.build_context(CONTRACT_PROBE)
            finally:
                fresh.close()
            rendered = packet.messages[0]["content"] if packet.messages[0]["role"] == "system" else ""
            assert packet.budget_tokens == budget, f"the packet states budget {packet.budget_tokens}, not {budget}"
            assert runtime.count_tokens(rendered) == packet.injected_tokens, (
                f"at budget {budget} the packet claims {packet.injected_tokens} injected tokens, "
                f"the system message has {runtime.count_tokens(rendered)}"
            )
            assert packet.injected_tokens <= budget, (
                f"injected {packet.injected_tokens} tokens over a budget of {budget}"
            )


PROBE_FIELDS = {"id", "question", "asked_at", "channel", "project", "role", "continues", "signals"}
"""What a host knows when a question is asked; none of it is gold (no answer, evidence or expected source)."""


def check_no_access_to_gold(condition: Condition, runtime_factory: RuntimeFactory) -> None:
    """A probe carries no answer or evidence, and nothing the condition reports speaks of gold."""
    fields = {f.name for f in dataclasses.fields(Probe)}
    assert fields == PROBE_FIELDS, f"Probe has fields {sorted(fields)}: a condition could read gold"
    build_params = list(pyinspect.signature(condition.build_context).parameters)
    assert build_params == ["probe"], f"build_context takes {build_params}, not just the probe"
    with _Workdirs() as workdir:
        packet = _run(condition, runtime_factory, workdir("run"))
    assert "gold" not in " ".join(str(v) for v in packet.notes.values()).lower(), "the packet's notes mention gold"


def check_reset_forgets_history(condition: Condition, runtime_factory: RuntimeFactory) -> None:
    """After ``reset()`` the condition answers as one that never saw a history, and replaying the history
    again gives the packet the first replay gave."""
    with _Workdirs() as workdir:
        never = _run(condition, runtime_factory, workdir("never"), sessions=[])
        used = clone(condition).attach(runtime_factory(workdir("used")))
        try:
            replay(used, contract_history())
            remembered = used.build_context(CONTRACT_PROBE)
            used.reset()
            forgotten = used.build_context(CONTRACT_PROBE)
            replay(used, contract_history())
            again = used.build_context(CONTRACT_PROBE)
        finally:
            used.close()
    assert _shape(forgotten) == _shape(never), (
        "after reset() the packet differs from that of a condition that never saw the history"
    )
    assert _shape(again) == _shape(remembered), "replaying the history after reset() gives a different packet"


_PARAMETER_CHECKS: tuple[Callable[[Condition], None], ...] = (
    check_constructor_stores_plain_parameters,
    check_get_params_round_trip,
    check_set_params,
    check_clone,
)
_RUNTIME_CHECKS: tuple[Callable[[Condition, RuntimeFactory], None], ...] = (
    check_interface_packet_and_determinism,
    check_injected_tokens_within_budget,
    check_no_access_to_gold,
    check_reset_forgets_history,
)


# ---- running them ---------------------------------------------------------------------------------
def _named(
    check: Callable[..., None], condition: Condition, needs_runtime: bool, bound_factory: RuntimeFactory | None
) -> Check:
    """The check as a callable ``check(runtime_factory=None)`` that reports failures by check and condition."""
    who = label(condition)

    @functools.wraps(check)
    def run(runtime_factory: RuntimeFactory | None = None) -> None:
        factory = runtime_factory or bound_factory
        try:
            if not needs_runtime:
                check(condition)
            elif factory is None:
                raise AssertionError("needs a runtime_factory(workdir) -> ConditionRuntime")
            else:
                check(condition, factory)
        except ConditionCheckError:
            raise
        except Exception as error:  # any failure, assertion or crash, is the condition's
            reason = str(error) or type(error).__name__
            if not isinstance(error, AssertionError):
                reason = f"{type(error).__name__}: {reason}"
            raise ConditionCheckError(check.__name__, who, reason) from error

    return run


def condition_checks(
    condition: Condition | str, runtime_factory: RuntimeFactory | None = None
) -> Iterator[tuple[str, Check]]:
    """``(check_name, check)`` for every contract check, bound to the condition; call ``check()`` (or
    ``check(runtime_factory)`` when none was given here)."""
    resolved = _resolve(condition)
    for parameter_check in _PARAMETER_CHECKS:
        yield parameter_check.__name__, _named(parameter_check, resolved, False, runtime_factory)
    for runtime_check in _RUNTIME_CHECKS:
        yield runtime_check.__name__, _named(runtime_check, resolved, True, runtime_factory)


def check_condition(condition_or_name: Condition | str, runtime_factory: RuntimeFactory) -> None:
    """Every contract check on one condition; raises ``ConditionCheckError`` at the first failure."""
    for _, check in condition_checks(condition_or_name, runtime_factory):
        check()


def parametrize_with_checks(
    names_or_conditions: Iterable[Condition | str], runtime_factory: RuntimeFactory | None = None
) -> Any:
    """A ``pytest.mark.parametrize("condition, check", ...)`` over every check of every condition, with
    ids like ``full-lca-check_clone``; the test body calls ``check()``."""
    import pytest

    cases, ids = [], []
    for item in names_or_conditions:
        condition = _resolve(item)
        for name, check in condition_checks(condition, runtime_factory):
            cases.append((condition, check))
            ids.append(f"{label(condition)}-{name}")
    return pytest.mark.parametrize("condition, check", cases, ids=ids)
