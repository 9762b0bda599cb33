"""The structural signature: what a record says about how things behave, with what it is about removed.

A signature names up to four variables by letter and kind, the signed relations between them, the thresholds at
which something changes, and the dynamics the whole shows. Its vocabulary is closed (the kinds, effects,
consequences and dynamics are enumerations), so two records from different domains with one skeleton get one
canonical text, whatever their words; the free ``pattern`` sentence is the one place a domain word can slip in,
and ``scrub_domain_words`` replaces each of the record's own content words there with ``X`` (counted).

Feedback loops are not asked of the signer: they are read off the relations (every simple cycle, reinforcing when
the product of its effects is positive, balancing when negative), so a signer cannot get a loop's sign wrong.

A signer's answer is never trusted: ``validate_signature`` parses it against ``StructuralSignature`` and either
returns the signature or a ``SignatureRefusal`` with a reason from ``REFUSAL_REASONS``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lca.ledger import key_terms

VariableName = Literal["A", "B", "C", "D"]
VariableKind = Literal["quantity", "rate", "resource", "capacity", "signal", "pressure", "population", "agent"]
Effect = Literal["increases", "decreases"]
ThresholdSide = Literal["above", "below"]
Consequence = Literal["collapse", "switch", "saturation", "release", "shutdown", "surge"]
Dynamic = Literal[
    "growth", "decay", "oscillation", "saturation", "tipping point", "equilibrium", "delay", "accumulation", "cascade"
]
# the closed vocabulary, read off the types the model validates with (the JSON schema is built from these)
VARIABLE_NAMES: tuple[str, ...] = get_args(VariableName)
VARIABLE_KINDS: tuple[str, ...] = get_args(VariableKind)
EFFECTS: tuple[str, ...] = get_args(Effect)
THRESHOLD_SIDES: tuple[str, ...] = get_args(ThresholdSide)
CONSEQUENCES: tuple[str, ...] = get_args(Consequence)
DYNAMICS: tuple[str, ...] = get_args(Dynamic)
MAX_VARIABLES, MAX_RELATIONS, MAX_THRESHOLDS, MAX_DYNAMICS = 4, 6, 2, 3  # small: a small model fills every slot
MAX_PATTERN_CHARS = 120
MAX_LOOP_LENGTH = 4

# Why a signer's answer was refused (counted per pass; each refusal is kept in the quarantine file).
REFUSAL_REASONS = ("generation_failed", "malformed_json", "schema_invalid", "inconsistent")

# Words of the signature's own language: never scrubbed from the pattern even when the record uses them.
STRUCTURAL_WORDS = frozenset(
    key_terms(" ".join((*VARIABLE_KINDS, *EFFECTS, *THRESHOLD_SIDES, *CONSEQUENCES, *DYNAMICS)))
    | key_terms(
        "increase decrease rise fall grow shrink drop raise lower more less higher lowest level threshold limit "
        "loop feedback reinforcing balancing cycle delay lag stock flow input output inflow outflow source sink "
        "variable amount change faster slower until when then while whole system effect cause pattern point"
    )
)


class SignatureVariable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: VariableName
    kind: VariableKind


class SignatureRelation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: VariableName
    effect: Effect
    target: VariableName


class SignatureThreshold(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    variable: VariableName
    side: ThresholdSide
    consequence: Consequence


class StructuralSignature(BaseModel):
    """A record's skeleton in the closed vocabulary; every relation and threshold names a declared variable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    variables: tuple[SignatureVariable, ...] = Field(min_length=1, max_length=MAX_VARIABLES)
    relations: tuple[SignatureRelation, ...] = Field(min_length=1, max_length=MAX_RELATIONS)
    thresholds: tuple[SignatureThreshold, ...] = Field(default=(), max_length=MAX_THRESHOLDS)
    dynamics: tuple[Dynamic, ...] = Field(min_length=1, max_length=MAX_DYNAMICS)
    pattern: str = Field(default="", max_length=MAX_PATTERN_CHARS)

    @model_validator(mode="after")
    def _consistent(self) -> StructuralSignature:
        names = [v.name for v in self.variables]
        if len(set(names)) != len(names):
            raise ValueError(f"inconsistent: a variable is declared twice ({', '.join(names)})")
        declared = set(names)
        used = {r.source for r in self.relations} | {r.target for r in self.relations}
        used |= {t.variable for t in self.thresholds}
        dangling = sorted(used - declared)
        if dangling:
            raise ValueError(f"inconsistent: {', '.join(dangling)} used but not declared")
        return self

    def kind_of(self, name: str) -> str:
        return next(v.kind for v in self.variables if v.name == name)


def _json_schema() -> dict[str, Any]:
    """The answer's JSON schema for constrained decoding, written out by hand (llama.cpp's converter takes
    plain enums and arrays; pydantic's own schema has references) and checked against the model by a test."""
    name = {"enum": list(VARIABLE_NAMES)}

    def obj(properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}

    return obj(
        {
            "variables": {
                "type": "array",
                "items": obj({"name": name, "kind": {"enum": list(VARIABLE_KINDS)}}),
                "minItems": 1,
                "maxItems": MAX_VARIABLES,
            },
            "relations": {
                "type": "array",
                "items": obj({"source": name, "effect": {"enum": list(EFFECTS)}, "target": name}),
                "minItems": 1,
                "maxItems": MAX_RELATIONS,
            },
            "thresholds": {
                "type": "array",
                "items": obj(
                    {
                        "variable": name,
                        "side": {"enum": list(THRESHOLD_SIDES)},
                        "consequence": {"enum": list(CONSEQUENCES)},
                    }
                ),
                "maxItems": MAX_THRESHOLDS,
            },
            "dynamics": {"type": "array", "items": {"enum": list(DYNAMICS)}, "minItems": 1, "maxItems": MAX_DYNAMICS},
            "pattern": {"type": "string", "maxLength": MAX_PATTERN_CHARS},
        }
    )


SIGNATURE_JSON_SCHEMA: dict[str, Any] = _json_schema()


@dataclass(frozen=True)
class FeedbackLoop:
    """A simple cycle of the relations, by its variables' kinds from the rotation that sorts first; ``sign`` +1
    reinforcing, -1 balancing."""

    kinds: tuple[str, ...]
    sign: int

    @property
    def label(self) -> str:
        polarity = "reinforcing" if self.sign > 0 else "balancing"
        return f"{polarity} loop of {' -> '.join(self.kinds)}"


def feedback_loops(signature: StructuralSignature, *, max_length: int = MAX_LOOP_LENGTH) -> list[FeedbackLoop]:
    """Every simple cycle of at most ``max_length`` relations, each once (from its smallest variable name)."""
    edges: dict[str, list[tuple[str, int]]] = {}
    for r in signature.relations:
        edges.setdefault(r.source, []).append((r.target, 1 if r.effect == "increases" else -1))
    loops: set[tuple[tuple[str, ...], int]] = set()

    def walk(start: str, node: str, path: list[str], sign: int) -> None:
        for target, effect in edges.get(node, ()):
            if target == start:
                loops.add((tuple(path), sign * effect))
            elif target > start and target not in path and len(path) < max_length:
                walk(start, target, [*path, target], sign * effect)

    for start in sorted(edges):
        walk(start, start, [start], 1)
    out = [FeedbackLoop(_least_rotation(tuple(signature.kind_of(n) for n in names)), sign) for names, sign in loops]
    return sorted(out, key=lambda loop: (loop.kinds, loop.sign))


def _least_rotation(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """A loop's kinds from the rotation that sorts first: a cycle has no start, and the letters that picked one are
    arbitrary (two signatures of one skeleton with their letters swapped read the same loop)."""
    return min(kinds[i:] + kinds[:i] for i in range(len(kinds))) if kinds else kinds


SIGNATURE_PARTS = ("variables", "relations", "loops", "thresholds", "dynamics")


def signature_parts(signature: StructuralSignature) -> dict[str, frozenset[str]]:
    """The signature's skeleton as sets, one per part of ``SIGNATURE_PARTS``, every item named by kinds (letters are
    arbitrary): what two signatures are compared by, part by part (the review's structural lens, a schema's
    evidence gates), and what ``canonical_text`` writes out."""
    kind = signature.kind_of
    return {
        "variables": frozenset(v.kind for v in signature.variables),
        "relations": frozenset(f"{kind(r.source)} {r.effect} {kind(r.target)}" for r in signature.relations),
        "loops": frozenset(loop.label for loop in feedback_loops(signature)),
        "thresholds": frozenset(
            f"{t.consequence} when {kind(t.variable)} is {t.side} a threshold" for t in signature.thresholds
        ),
        "dynamics": frozenset(signature.dynamics),
    }


def signature_features(signature: StructuralSignature) -> frozenset[str]:
    """Every item of ``signature_parts`` as one set, each prefixed by its part (``relations:rate increases ...``)."""
    return frozenset(f"{part}:{item}" for part, items in signature_parts(signature).items() for item in items)


def canonical_text(signature: StructuralSignature) -> str:
    """The signature as the text its space embeds: variables by kind only (letters are arbitrary), every part
    sorted, so two signatures with one skeleton read the same whatever their letters."""
    parts_of = signature_parts(signature)
    parts = [
        " ".join(sorted(v.kind for v in signature.variables)),  # every variable's kind, a kind twice when two share it
        *sorted(parts_of["relations"]),
        *sorted(parts_of["loops"]),
        *sorted(parts_of["thresholds"]),
        " ".join(sorted(parts_of["dynamics"])),
    ]
    if signature.pattern.strip():
        parts.append(" ".join(signature.pattern.split()))
    return "; ".join(parts)


_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def scrub_domain_words(text: str, record_text: str) -> tuple[str, int]:
    """``text`` with each of the record's content words (``lca.ledger.key_terms``) replaced by ``X``, but for the
    signature's own structural words; and how many were replaced."""
    domain = key_terms(record_text) - STRUCTURAL_WORDS
    scrubbed = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal scrubbed
        if key_terms(match.group(0)) & domain:
            scrubbed += 1
            return "X"
        return match.group(0)

    return _TOKEN.sub(replace, text), scrubbed


@dataclass(frozen=True)
class SignatureRefusal:
    """Why an answer was not accepted as a signature; ``reason`` is one of ``REFUSAL_REASONS``."""

    reason: str
    message: str


def validate_signature(
    answer: str, record_text: str
) -> tuple[StructuralSignature | None, int, SignatureRefusal | None]:
    """The signature in a signer's raw answer, its pattern scrubbed of the record's words (and how many), or the
    refusal: not one JSON object (``malformed_json``), not of the schema (``schema_invalid``), or naming a
    variable it did not declare or declaring one twice (``inconsistent``)."""
    try:  # the signer was asked under the schema (constrained decoding, or a provider's checked structured output)
        raw = json.loads(answer)
    except ValueError as exc:
        return None, 0, SignatureRefusal("malformed_json", f"not one JSON value: {exc}")
    if not isinstance(raw, dict):
        return None, 0, SignatureRefusal("malformed_json", f"a JSON {type(raw).__name__}, not an object")
    try:
        signature = StructuralSignature.model_validate(raw)
    except ValidationError as exc:
        return None, 0, _refusal(exc)
    pattern, scrubbed = scrub_domain_words(signature.pattern, record_text)
    return signature.model_copy(update={"pattern": pattern}), scrubbed, None


def _refusal(exc: ValidationError) -> SignatureRefusal:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "the answer"
    message = f"{where}: {first['msg']}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
    inconsistent = any("inconsistent:" in str(e.get("msg", "")) for e in errors)
    return SignatureRefusal("inconsistent" if inconsistent else "schema_invalid", message)


def signature_from_json(data: Any) -> StructuralSignature:
    """A stored signature read back (it was validated before it was stored; a hand-edited one fails here)."""
    return StructuralSignature.model_validate(data)


def counts_by_reason(reasons: Iterable[str], known: Sequence[str] = REFUSAL_REASONS) -> dict[str, int]:
    """Refusals by reason, every known reason present (0 when none)."""
    out = dict.fromkeys(known, 0)
    for reason in reasons:
        out[reason] = out.get(reason, 0) + 1
    return out
