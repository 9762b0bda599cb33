"""The calibration gate of a judged measure: distinct raters, their agreement, and each one against reference codes.

A panel is a set of *distinct* raters. A rater is a model with its prompt and decoding settings, or a person. Two
raters with one identity (the same model, named by its file's sha256 where it is a local GGUF, with the same
prompt, the same temperature and, above temperature 0, the same seed) rate alike by construction: their agreement
says nothing about whether the scheme can be applied, so the gate refuses to count it. ``max_tokens`` is recorded
but does not make two raters distinct (it only cuts a reply short), and at temperature 0 the seed does not either
(decoding is greedy).

The panel calibrates on a pre-registered calibration set (``read_calibration_set``: items with a probe, an answer
and a reference code, committed with a data card), separate from the study's answers. The gate passes only when
every check passes: the raters are distinct; at least ``min_raters`` give readable ratings; Krippendorff's alpha
among them reaches the threshold; and each rater, held against the reference codes, reaches the reference
threshold (alpha of the rater and the codes at the measure's level, on at least half of the set; exact and
within-one agreement are reported beside it). ``GateReport.to_dict()`` holds every input and every check.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lca.errors import LCAError, RecordFormatError
from lca.fileio import numbered_json_lines
from protocols.analysis.agreement import AgreementReport, agreement
from protocols.analysis.raters import RatingItem

CALIBRATION_CONDITION = "calibration-set"  # the hidden key's condition of a calibration-set item
ITEM_PREFIX = "cal:"  # a calibration-set item's id in a ratings frame, apart from any study answer's
REFERENCE = "reference codes"  # the reference codes as a rater in the rater-against-reference alpha
CALIBRATION_FIELDS = ("id", "probe", "answer", "code")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3f}"


# ---- who a rater is ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RaterIdentity:
    """A rater: a model (its string, its GGUF's sha256 when local, the prompt it is given, its decoding
    settings) or a person (by name). ``key()`` is what must differ between two raters of one panel."""

    rater: str
    kind: str  # "model" or "person"
    model: str | None = None
    model_sha256: str | None = None
    prompt: str = ""
    prompt_source: str = "panel"  # "panel" (the panel's prompt) or "own" (the rater's own)
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None

    def key(self) -> tuple[Any, ...]:
        if self.kind == "person":
            return ("person", self.rater)
        temperature = float(self.temperature or 0.0)
        seed = self.seed if temperature > 0 else None  # greedy decoding ignores the seed
        return ("model", self.model_sha256 or self.model, _sha256(self.prompt), temperature, seed)

    @property
    def digest(self) -> str:
        """A short name for ``key()``: two raters with one digest are one rater."""
        return _sha256(json.dumps(self.key(), default=str))[:12]

    def describe(self) -> str:
        if self.kind == "person":
            return f"person '{self.rater}'"
        seed = f"seed {self.seed}" + (" (unused: greedy at temperature 0)" if not self.temperature else "")
        return (
            f"{self.model}, {self.prompt_source} prompt (sha256 {_sha256(self.prompt)[:12]}), "
            f"temperature {self.temperature:g}, {seed}, max_tokens {self.max_tokens}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"prompt_sha256": _sha256(self.prompt), "identity": self.digest}


def model_identities(
    panel: Any, models: Mapping[str, str | None], seed: int, model_files: Mapping[str, str] | None = None
) -> dict[str, RaterIdentity]:
    """The identity of each rater of an LLM panel (``protocols.analysis.raters.RaterPanel``): its model string
    (``models``: rater -> model), the GGUF sha256 of a local model (``model_files``: model -> sha256), its
    prompt and its decoding settings, the run's ``seed`` where it names none."""
    out = {}
    for rater in panel.raters:
        decoding = panel.decoding_for(rater)
        model = models.get(rater)
        out[rater] = RaterIdentity(
            rater=rater,
            kind="model",
            model=model,
            model_sha256=(model_files or {}).get(model) if model else None,
            prompt=panel.prompt_for(rater),
            prompt_source="own" if decoding.prompt else "panel",
            temperature=float(decoding.temperature),
            seed=seed if decoding.seed is None else decoding.seed,
            max_tokens=decoding.max_tokens,
        )
    return out


def person_identity(name: str) -> RaterIdentity:
    return RaterIdentity(rater=name, kind="person")


def same_identity(identities: Mapping[str, RaterIdentity]) -> list[tuple[str, ...]]:
    """Groups of raters that are one rater (more than one name, one identity)."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for rater, identity in identities.items():
        groups.setdefault(identity.key(), []).append(rater)
    return [tuple(names) for names in groups.values() if len(names) > 1]


# ---- the calibration set --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationItem:
    item_id: str
    probe: str
    answer: str
    code: Any
    note: str = ""


@dataclass(frozen=True)
class CalibrationSet:
    """A pre-registered calibration set: items with reference codes, read from ``path`` (as the study names
    it) whose content hashes to ``sha256``."""

    path: str
    sha256: str
    items: tuple[CalibrationItem, ...]

    def codes(self) -> dict[str, Any]:
        """Reference code by the item's id in a ratings frame (``cal:<id>``)."""
        return {ITEM_PREFIX + item.item_id: item.code for item in self.items}

    def rating_items(self) -> list[Any]:

        return [RatingItem(ITEM_PREFIX + i.item_id, i.probe, i.answer, CALIBRATION_CONDITION) for i in self.items]

    def summary(self) -> dict[str, Any]:
        counts = Counter(json.dumps(item.code) for item in self.items)
        return {
            "source": "calibration set",
            "path": self.path,
            "sha256": self.sha256,
            "items": len(self.items),
            "codes": {code: counts[code] for code in sorted(counts, key=lambda c: json.loads(c))},
        }


def _code(value: Any, scale: Sequence[Any]) -> Any:
    for allowed in scale:
        if (_is_number(value) and _is_number(allowed) or type(value) is type(allowed)) and value == allowed:
            return allowed
    return None


def read_calibration_set(
    path: str | Path, scale: Sequence[Any], *, expected_sha256: str | None = None, shown: str | None = None
) -> CalibrationSet:
    """The calibration set at ``path``: one JSON object per line, ``{"id", "probe", "answer", "code"}`` (and
    an optional ``note``: why the code). Refused, naming the line and field, when a line is not such an object,
    an id repeats, a code is off ``scale``, fewer than two distinct codes are used (agreement with the codes
    would be undefined), or the content's sha256 is not ``expected_sha256``."""
    path = Path(path)
    where = shown or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordFormatError(f"cannot read the calibration set: {exc.strerror or exc}", path=where) from None
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise RecordFormatError(
            f"the calibration set's sha256 is {digest}, not the {expected_sha256} the study names: the file "
            "changed since the study named it",
            path=where,
        )
    items: list[CalibrationItem] = []
    seen: dict[str, int] = {}
    for number, record in numbered_json_lines(data.decode("utf-8"), where):
        if not isinstance(record, dict):
            raise RecordFormatError("expected a JSON object", path=where, line=number)
        for name in CALIBRATION_FIELDS:
            if name not in record:
                raise RecordFormatError("missing", path=where, line=number, field=name)
        unknown = sorted(set(record) - {*CALIBRATION_FIELDS, "note"})
        if unknown:
            raise RecordFormatError(f"unknown field(s) {', '.join(unknown)}", path=where, line=number, field=unknown[0])
        for name in ("id", "probe", "answer"):
            if not isinstance(record[name], str) or not record[name].strip():
                raise RecordFormatError("must be a non-empty string", path=where, line=number, field=name)
        item_id = record["id"]
        if item_id in seen:
            raise RecordFormatError(
                f"id '{item_id}' appears again (first on line {seen[item_id]})", path=where, line=number, field="id"
            )
        seen[item_id] = number
        code = _code(record["code"], scale)
        if code is None:
            raise RecordFormatError(
                f"code {record['code']!r} is not on the scale {list(scale)}", path=where, line=number, field="code"
            )
        items.append(CalibrationItem(item_id, record["probe"], record["answer"], code, str(record.get("note") or "")))
    if len({json.dumps(i.code) for i in items}) < 2:
        raise RecordFormatError(
            f"a calibration set needs items with at least two different codes; it has {len(items)} item(s)", path=where
        )
    return CalibrationSet(where, digest, tuple(items))


# ---- the gate ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceAgreement:
    """One rater against the reference codes: alpha of the two at the measure's level (with its bootstrap
    interval), the share of items rated exactly as the code and within one scale step of it (ordinal and
    interval), over the ``n_items`` the rater gave a readable rating (``n_missing`` not)."""

    rater: str
    n_items: int
    n_missing: int
    alpha: float
    alpha_ci: tuple[float, float]
    exact: float
    within_one: float | None
    mean_abs_difference: float | None
    threshold: float
    passes: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"alpha_ci": list(self.alpha_ci)}


@dataclass(frozen=True)
class GateCheck:
    """One check of the gate: its verdict, the figures in words (``detail``) and, when it fails, the reason in
    a few words (``brief``)."""

    name: str
    passes: bool
    detail: str
    brief: str = ""


@dataclass(frozen=True)
class GateReport:
    """Every input of a judged measure's calibration gate, every check and the verdict; ``among`` is the
    raters' agreement (None when it could not be computed), ``reference`` each rater against the codes."""

    measure: str
    level: str
    scale: tuple[Any, ...]
    threshold: float
    reference_threshold: float | None
    min_raters: int
    identities: tuple[RaterIdentity, ...]
    same_identity: tuple[tuple[str, ...], ...]
    calibration: Mapping[str, Any]
    among: AgreementReport | None
    reference: tuple[ReferenceAgreement, ...]
    checks: tuple[GateCheck, ...]
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def passes(self) -> bool:
        return all(check.passes for check in self.checks)

    @property
    def reason(self) -> str | None:
        """Every failed check, with its figures."""
        failed = [check.detail.rstrip(".") for check in self.checks if not check.passes]
        return "; ".join(failed) if failed else None

    @property
    def summary(self) -> str | None:
        """Every failed check in a few words."""
        failed = [check.brief or check.name for check in self.checks if not check.passes]
        return "; ".join(failed) if failed else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "level": self.level,
            "scale": list(self.scale),
            "threshold": self.threshold,
            "reference_threshold": self.reference_threshold,
            "min_raters": self.min_raters,
            "panel": [identity.to_dict() for identity in self.identities],
            "independent": not self.same_identity,
            "same_identity": [list(group) for group in self.same_identity],
            "calibration": dict(self.calibration),
            "counts": dict(self.counts),
            "among_raters": self.among.to_dict() if self.among is not None else None,
            "reference": [row.to_dict() for row in self.reference],
            "checks": [asdict(check) for check in self.checks],
            "passes": self.passes,
            "reason": self.reason,
            "summary": self.summary,
        }


def calibration_gate(
    frame: pd.DataFrame,
    *,
    measure: str,
    level: str,
    scale: Sequence[Any],
    threshold: float,
    min_raters: int,
    identities: Mapping[str, RaterIdentity],
    reference_codes: Mapping[str, Any] | None = None,
    reference_threshold: float | None = None,
    calibration: Mapping[str, Any] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> GateReport:
    """The gate on a calibration ratings frame (``item``, ``rater``, ``value``, optionally ``condition``; NaN is
    a missing rating). ``reference_codes`` (item -> code) holds each rater against the codes at
    ``reference_threshold`` (default ``threshold``); without them (a draw from the study's answers) only the
    raters' agreement is checked, and ``calibration`` says so."""
    scale = tuple(scale)
    reference_threshold = (reference_threshold or threshold) if reference_codes is not None else None
    groups = tuple(same_identity(identities))
    checks: list[GateCheck] = []
    if groups:
        words = [f"{' and '.join(g)} are one rater ({identities[g[0]].describe()})" for g in groups]
        checks.append(
            GateCheck(
                "independent",
                False,
                "the panel is not independent: "
                + "; ".join(words)
                + ": raters with one identity rate alike by construction, so their agreement is not counted "
                "(give them different models, prompts or decoding settings)",
                "the panel is not independent (" + "; ".join(" and ".join(g) + " are one rater" for g in groups) + ")",
            )
        )
    else:
        checks.append(GateCheck("independent", True, f"{len(identities)} distinct raters"))
    frame = frame.copy()
    if reference_codes is not None and "condition" in frame.columns:
        frame = frame.drop(columns=["condition"])  # calibration items have no condition to lean toward
    rated = frame[frame["value"].notna()]
    giving = sorted(rated["rater"].unique())
    counts = {
        "items": int(frame["item"].nunique()),
        "raters": len(identities),
        "ratings": len(frame),
        "missing": int(frame["value"].isna().sum()),
    }
    if len(giving) < min_raters:
        checks.append(
            GateCheck(
                "readable",
                False,
                f"only {len(giving)} rater(s) gave a readable rating ({', '.join(giving) or 'none'}); the panel "
                f"needs {min_raters}; {counts['missing']} of {len(frame)} calibration rating(s) are missing (the raw "
                "replies are in the ratings file)",
                f"only {len(giving)} rater(s) gave readable ratings (the panel needs {min_raters})",
            )
        )
    else:
        checks.append(GateCheck("readable", True, f"{len(giving)} rater(s) gave readable ratings"))
    among = None
    if len(giving) >= 2:
        columns = [c for c in ("item", "rater", "value", "condition") if c in frame.columns]
        try:
            among = agreement(frame[columns], level, threshold, resamples, seed, measure=measure, scale=scale)
        except LCAError as exc:
            checks.append(GateCheck("among raters", False, f"agreement among the raters cannot be computed: {exc}"))
        else:
            brief = f"alpha among the raters {_num(among.alpha)} is below the threshold {threshold:g}"
            detail = f"among the raters ({among.n_items} items, {among.n_raters} raters): {among.detail.rstrip('.')}"
            checks.append(GateCheck("among raters", among.passes, detail, "" if among.passes else brief))
    reference: list[ReferenceAgreement] = []
    if reference_codes is not None:
        for rater in identities:
            row = reference_agreement(
                frame, rater, reference_codes, level, scale, reference_threshold or threshold, resamples, seed
            )
            reference.append(row)
            if row.n_items * 2 < len(reference_codes):
                brief = f"{rater} rated too few calibration items readably ({row.n_items} of {len(reference_codes)})"
            else:
                brief = f"{rater}'s alpha with the reference codes is {_num(row.alpha)} (threshold {row.threshold:g})"
            checks.append(GateCheck(f"reference: {rater}", row.passes, row.detail, "" if row.passes else brief))
    return GateReport(
        measure=measure,
        level=level,
        scale=scale,
        threshold=threshold,
        reference_threshold=reference_threshold,
        min_raters=min_raters,
        identities=tuple(identities.values()),
        same_identity=groups,
        calibration=dict(calibration or {}),
        among=among,
        reference=tuple(reference),
        checks=tuple(checks),
        counts=counts,
    )


def reference_agreement(
    frame: pd.DataFrame,
    rater: str,
    codes: Mapping[str, Any],
    level: str,
    scale: Sequence[Any],
    threshold: float,
    resamples: int = 1000,
    seed: int = 0,
) -> ReferenceAgreement:
    """One rater against the reference codes (module docstring): it passes when its alpha with the codes
    reaches ``threshold`` and it gave readable ratings on at least half of the coded items."""
    mine = frame[(frame["rater"] == rater) & frame["item"].isin(list(codes))]
    rated = mine[mine["value"].notna()]
    n, missing = len(rated), len(codes) - len(rated)
    position = {value: i for i, value in enumerate(sorted(scale) if level != "nominal" else scale)}
    pairs = [(value, codes[item]) for item, value in zip(rated["item"], rated["value"])]
    exact = sum(a == b for a, b in pairs) / n if n else math.nan
    within = mad = None
    if level != "nominal":
        within = sum(abs(position[a] - position[b]) <= 1 for a, b in pairs) / n if n else math.nan
        mad = sum(abs(float(a) - float(b)) for a, b in pairs) / n if n else math.nan
    alpha, ci = math.nan, (math.nan, math.nan)
    if n:
        both = pd.concat(
            [
                rated[["item", "value"]].assign(rater=rater),
                pd.DataFrame(
                    {"item": list(rated["item"]), "value": [codes[i] for i in rated["item"]], "rater": REFERENCE}
                ),
            ],
            ignore_index=True,
        )
        report = agreement(both, level, threshold, resamples, seed, measure=rater, scale=scale)
        alpha, ci = report.alpha, report.alpha_ci
    enough = n * 2 >= len(codes)
    passes = bool(math.isfinite(alpha) and alpha >= threshold and enough)
    words = (
        f"{rater} against the reference codes: alpha {_num(alpha)} (95% CI {_num(ci[0])} to {_num(ci[1])}), "
        f"exact {_num(exact)}"
        + (f", within one {_num(within)}" if within is not None else "")
        + f", on {n} of {len(codes)} item(s)"
    )
    if passes:
        detail = f"{words}: meets the reference threshold {threshold:g}"
    elif not enough:
        detail = f"{words}: fails: readable ratings on fewer than half of the calibration set"
    elif not math.isfinite(alpha):
        detail = f"{words}: fails: alpha with the codes is undefined (every rating the same value)"
    else:
        detail = f"{words}: fails: below the reference threshold {threshold:g}"
    return ReferenceAgreement(rater, n, missing, alpha, ci, exact, within, mad, threshold, passes, detail)
