"""A schema's evidence gates: what a schema on trial must show before a person may establish it.

Each gate is a measure with a declared threshold (``SchemaGateConfig``), counted only over what happened after this
version of the schema was proposed (a held-out period: the records it was built from are not its evidence):

- **retrieval lift** (``retrieval_lift``), from the retrieval log and the experience log: the recalls after the
  proposal that injected one of the schema's records against those that injected only other memories, each recall
  counted useful when a memory it injected was then used (an experience event ``used`` or ``prevented_mistake``
  within ``use_window_s``). The lift is the ratio of the two rates, each smoothed by one success and one failure
  (Laplace), so a handful of recalls cannot make it large; each side needs ``min_recalls`` recalls.
- **anticipation** (``anticipation``), from the records written after the proposal: the schema's relations are its
  cue, the rest of its features (variables, loops, thresholds, dynamics) its prediction. A later record whose
  signature shares at least ``cue_share`` of the cue is one the schema speaks to; the prediction is correct when the
  record's signature holds at least ``predict_share`` of it. The gate counts the correct against the wrong.
- **compression** (``compression``), an MDL comparison over its member records' signatures: each signature is a set
  of features from the store's vocabulary of features, a symbol costing ``log2(|V| + 1)`` bits (one more for the
  end of a set). Without the schema each member spells its set out; with it, the schema is spelled out once and each
  member pays one bit and the features it differs from the schema by. The gate is the share of bits saved.

``SchemaEvidenceReport`` is what the ledger's state machine checks (``lca.ledger.SchemaEvidence``) and records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from lca.activation import Access
from lca.errors import RecordFormatError
from lca.experience import ExperienceEvent

GATES = ("retrieval_lift", "anticipation", "compression")
USE_KINDS = ("used", "prevented_mistake")  # the experience events that say an injected memory helped
CUE_PARTS = ("relations",)  # the schema's features a later record is recognized by; the others are its prediction


@dataclass(frozen=True)
class SchemaGateConfig:
    """Every gate's threshold and how its measure is read; each a declared number, checked."""

    min_lift: float = 1.2
    min_recalls: int = 5  # recalls on each side (with and without the schema's records)
    recall_gap_s: float = 1.0  # accesses of one query shape this close together are one recall
    use_window_s: float = 7 * 86400.0  # a use counts for the recalls in the window before it
    cue_share: float = 0.5
    predict_share: float = 0.5
    min_anticipated: int = 2  # correct anticipations
    min_anticipation: float = 0.6  # correct over correct and wrong
    min_compression: float = 0.1  # bits saved over bits without the schema

    def __post_init__(self) -> None:
        check_thresholds(self, shares=("cue_share", "predict_share", "min_anticipation", "min_compression"))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SchemaGateConfig:
        """Typed fields from a mapping (a parsed YAML file or ``name=value`` items); an unknown name is refused."""
        return thresholds_from_mapping(cls, values, "gate")


def check_thresholds(config: Any, *, shares: Iterable[str] = ()) -> None:
    """A gate config's fields are finite numbers >= 0 (an ``int`` field an integer), each of ``shares`` at most 1:
    the checks every gate config (these, the trial gates') makes of its declared thresholds."""
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RecordFormatError(f"must be a number, got {value!r}", field=f.name)
        if f.type == "int" and not isinstance(value, int):
            raise RecordFormatError(f"must be an integer, got {value!r}", field=f.name)
        if value < 0:
            raise RecordFormatError(f"must be >= 0, got {value!r}", field=f.name)
    for name in shares:
        if getattr(config, name) > 1.0:
            raise RecordFormatError(f"must lie in [0, 1], got {getattr(config, name)!r}", field=name)


def thresholds_from_mapping(cls: Any, values: Mapping[str, Any], what: str) -> Any:
    """``cls`` built from a mapping of its fields; an unknown name is refused, naming the known ones."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise RecordFormatError(
            f"unknown {what} setting {unknown[0]!r}; known: {', '.join(sorted(known))}", field=unknown[0]
        )
    return cls(**dict(values))


@dataclass(frozen=True)
class GateResult:
    """One gate: its measure, its threshold, whether it passed, and what it counted."""

    gate: str
    passed: bool
    value: float | None  # None: not measurable (what is missing is in ``detail``)
    threshold: float
    detail: str
    counts: Mapping[str, int | float]


@dataclass(frozen=True)
class SchemaEvidenceReport:
    """A schema's gates as measured at one time (``lca.ledger.SchemaEvidence``)."""

    schema: str
    version: int
    since: float | None  # the proposal of this version: evidence counts after it
    measured_at: float
    gates: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return bool(self.gates) and all(g.passed for g in self.gates)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(f"{g.gate}: {g.detail}" for g in self.gates if not g.passed)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["passed"] = self.passed
        return out


# ---- retrieval lift ---------------------------------------------------------------------------------------------
def recalls(accesses: Iterable[Access], *, since: float, gap_s: float) -> list[tuple[float, frozenset[str]]]:
    """The retrieval log's accesses at or after ``since`` as recalls: (time, the memory ids injected). One recall logs
    each item it injected a moment apart with its query's shape; an access of another shape, or one more than
    ``gap_s`` after the last, starts the next. A recall that injected no memory is left out (only a memory's use is
    recorded, so it could never count as useful)."""
    out: list[tuple[float, set[str]]] = []
    last: Access | None = None
    for access in sorted((a for a in accesses if a.at >= since), key=lambda a: (a.at, a.shape, a.target)):
        if last is None or access.shape != last.shape or access.at - last.at > gap_s:
            out.append((access.at, set()))
        if access.target.startswith("memory:"):
            out[-1][1].add(access.target[len("memory:") :].split("[", 1)[0])
        last = access
    return [(at, frozenset(ids)) for at, ids in out if ids]


def retrieval_lift(
    members: Iterable[str],
    accesses: Iterable[Access],
    uses: Iterable[ExperienceEvent],
    *,
    since: float,
    config: SchemaGateConfig,
) -> GateResult:
    """The retrieval-lift gate (see the module docstring)."""
    members = set(members)
    used_at: dict[str, list[float]] = {}
    for event in uses:
        if event.kind in USE_KINDS and event.target.startswith("memory:"):
            used_at.setdefault(event.target[len("memory:") :], []).append(event.at)

    def useful(at: float, ids: frozenset[str]) -> bool:
        return any(at <= u <= at + config.use_window_s for m in ids for u in used_at.get(m, ()))

    counts = {"with": 0, "with_useful": 0, "without": 0, "without_useful": 0}
    for at, ids in recalls(accesses, since=since, gap_s=config.recall_gap_s):
        side = "with" if ids & members else "without"
        counts[side] += 1
        counts[f"{side}_useful"] += useful(at, ids)
    short = [side for side in ("with", "without") if counts[side] < config.min_recalls]
    rate_with = (counts["with_useful"] + 1) / (counts["with"] + 2)
    rate_without = (counts["without_useful"] + 1) / (counts["without"] + 2)
    lift = rate_with / rate_without
    if short:
        detail = (
            f"too few recalls since the proposal: {counts['with']} with its records, {counts['without']} without "
            f"(at least {config.min_recalls} each)"
        )
        return GateResult("retrieval_lift", False, round(lift, 6), config.min_lift, detail, counts)
    detail = (
        f"lift {lift:.2f} (useful {counts['with_useful']}/{counts['with']} recalls with its records, "
        f"{counts['without_useful']}/{counts['without']} without; at least {config.min_lift:g})"
    )
    return GateResult("retrieval_lift", lift >= config.min_lift, round(lift, 6), config.min_lift, detail, counts)


# ---- anticipation -----------------------------------------------------------------------------------------------
def split_features(features: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """A schema's features as (cue, prediction): its relations, and the rest."""
    features = frozenset(features)
    cue = frozenset(f for f in features if f.split(":", 1)[0] in CUE_PARTS)
    return cue, features - cue


def prediction_for(
    features: Iterable[str], record_features: frozenset[str], *, config: SchemaGateConfig
) -> bool | None:
    """What a schema says of one record: None when the record does not fit its cue (it speaks to other records),
    else whether the record holds its prediction. Anticipation counts these; a taxonomy tag marks the True ones."""
    cue, prediction = split_features(features)
    if not cue or not prediction or len(cue & record_features) / len(cue) < config.cue_share:
        return None
    return len(prediction & record_features) / len(prediction) >= config.predict_share


def anticipation(
    features: Iterable[str], later: Mapping[str, frozenset[str] | None], *, config: SchemaGateConfig
) -> GateResult:
    """The anticipation gate over ``later``: the records written after the proposal (not its members), each with its
    signature's features (None: not signed yet)."""
    cue, prediction = split_features(features)
    counts = {"later": len(later), "unsigned": 0, "in_scope": 0, "correct": 0, "wrong": 0}
    if not cue or not prediction:
        detail = "the schema has no relations to recognize a record by, or nothing beyond them to predict"
        return GateResult("anticipation", False, None, config.min_anticipation, detail, counts)
    for record_features in later.values():
        if record_features is None:
            counts["unsigned"] += 1
            continue
        said = prediction_for(features, record_features, config=config)
        if said is not None:
            counts["in_scope"] += 1
            counts["correct" if said else "wrong"] += 1
    if not counts["in_scope"]:
        detail = f"no record written since the proposal fits its cue ({counts['later']} later, {counts['unsigned']} unsigned)"
        return GateResult("anticipation", False, None, config.min_anticipation, detail, counts)
    rate = counts["correct"] / counts["in_scope"]
    passed = rate >= config.min_anticipation and counts["correct"] >= config.min_anticipated
    detail = (
        f"anticipated {counts['correct']} of {counts['in_scope']} later record(s) it speaks to ({rate:.2f}; at least "
        f"{config.min_anticipated} and {config.min_anticipation:g})"
    )
    return GateResult("anticipation", passed, round(rate, 6), config.min_anticipation, detail, counts)


# ---- compression ------------------------------------------------------------------------------------------------
def description_bits(
    schema: frozenset[str], members: Sequence[frozenset[str]], vocabulary: frozenset[str]
) -> tuple[float, float]:
    """Bits to encode the members' feature sets without the schema and with it (the module docstring's code)."""
    symbol = math.log2(len(vocabulary | schema) + 1)
    without = sum((len(m) + 1) * symbol for m in members)
    with_schema = (len(schema) + 1) * symbol + sum(1 + (len(m ^ schema) + 1) * symbol for m in members)
    return without, with_schema


def compression(
    features: Iterable[str],
    members: Mapping[str, frozenset[str] | None],
    vocabulary: frozenset[str],
    *,
    config: SchemaGateConfig,
) -> GateResult:
    """The compression gate over its members' signatures (None: a member with no current signature)."""
    signed = [f for f in members.values() if f is not None]
    counts: dict[str, int | float] = {"members": len(members), "signed": len(signed)}
    if len(signed) < 2:
        detail = f"{len(signed)} of its {len(members)} record(s) have a current signature: nothing to compress"
        return GateResult("compression", False, None, config.min_compression, detail, counts)
    without, with_schema = description_bits(frozenset(features), signed, vocabulary)
    saved = (without - with_schema) / without
    counts.update({"bits_without": round(without, 3), "bits_with": round(with_schema, 3)})
    detail = (
        f"{without:.1f} bits without the schema, {with_schema:.1f} with it: saves {saved:.2f} "
        f"(at least {config.min_compression:g})"
    )
    return GateResult(
        "compression", saved >= config.min_compression, round(saved, 6), config.min_compression, detail, counts
    )
