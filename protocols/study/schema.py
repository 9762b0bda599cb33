"""The study document (``preregistration/<id>.yaml``): what a study commits to before it runs.

A pre-registration is only worth its lock if it cannot say something incoherent: a prediction about a measure
nobody defined, an equivalence test without a margin, a judged measure without raters. Every rule is checked
when the document loads, and every refusal names the file and the field (``RecordFormatError``). Rules that
read only the document live on :class:`Study`; rules that need the repository (registered protocols, their
scorers and parameters, condition names, model roles) are :func:`check_registered`, which ``load_study`` runs
too. docs/preregistration.md describes the fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, StringConstraints, ValidationError, model_validator

from lca.errors import LCAError, RecordFormatError
from protocols.evals.registry import ProtocolRegistry
from protocols.harness.planning import RUN_ROLES
from protocols.harness.variants import parse_variant, variant_params
from protocols.study.fields import RATER_PREFIX, ArgValue, Label, RoleName, Text
from protocols.study.fields import Strict as _Strict
from protocols.study.panel import (
    CalibrationSetRef,
    JudgedMeasure,
    RaterPanel,
    RaterSettings,
    calibration_problems,
    judged_problems,
    repeats,
)
from protocols.study.rubrics import rubric_problems

SCHEMA_VERSION = 1
_STUDY_ID = r"^[a-z0-9_]+$"
__all__ = [
    "RATER_PREFIX",
    "SCHEMA_VERSION",
    "ArgValue",
    "CalibrationSetRef",
    "ComputedMeasure",
    "Hypothesis",
    "JudgedMeasure",
    "Label",
    "Prediction",
    "ProtocolRun",
    "RaterPanel",
    "RaterSettings",
    "RoleName",
    "Study",
    "Text",
    "check_registered",
    "load_study",
    "registry_problems",
    "study_problems",
]


class Hypothesis(_Strict):
    id: Label
    statement: Text


class Models(_Strict):
    """The agent model and the models of the other roles (summarizer, reviewer, grader, ``rater_*``)."""

    agent: Text
    roles: dict[RoleName, Text] = Field(default_factory=dict)


class ProtocolRun(_Strict):
    """One registered protocol in the study: the study's conditions it runs (default all), task arguments
    (plain values), how many samples per condition (``limit``), whether the samples are shuffled (seeded from
    the study's first seed, the same order for every condition, so ``limit`` takes a random slice rather than
    the file's first items) and whether it reads downloaded data."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]*$")]
    conditions: tuple[Text, ...] | None = Field(default=None, min_length=1)
    args: dict[Text, ArgValue] = Field(default_factory=dict)
    limit: int | None = Field(default=None, ge=1)
    shuffle: bool = False
    requires_data: bool = False


class ComputedMeasure(_Strict):
    """A measure a scorer computes: ``metric`` is the score's name in the task log (the protocol's eval.yaml
    measure name), read per sample for the paired tests."""

    id: Label
    protocol: Text
    kind: Literal["computed"]
    scorer: Text
    metric: Text
    computation: Text
    scale: Literal["binary", "continuous", "count"]
    direction: Literal["higher", "lower"] = "higher"  # which direction is better
    description: str = ""


Measure = Annotated[ComputedMeasure | JudgedMeasure, Field(discriminator="kind")]


class Prediction(_Strict):
    """Superiority (``better`` beats ``than`` by at least ``min_effect`` in the measure's better direction) or
    equivalence (the two ``conditions`` differ by less than ``margin``, tested by TOST). With ``against``, the two
    arms are two measures of one condition (``within``) on the same samples: ``measure`` beats, or is equivalent
    to, ``against``. Primary predictions
    form the family the correction runs over; secondary ones are reported beside them, corrected separately."""

    id: Label
    hypothesis: Label
    measure: Label
    kind: Literal["superiority", "equivalence"]
    better: str | None = None
    than: str | None = None
    min_effect: float | None = None
    conditions: tuple[str, ...] | None = None
    margin: float | None = None
    # equivalence only: when both conditions' means lie at or below ``floor`` (or at or above ``ceiling``), parity
    # says nothing about the conditions (neither can do the task), and the verdict is "uninformative"
    floor: float | None = None
    ceiling: float | None = None
    # within one condition: ``measure`` against the measure ``against``, paired by sample (before/after designs,
    # such as a migration's fidelity before and after the move); ``within`` is the condition, and superiority then
    # names no better/than, equivalence no conditions
    within: str | None = None
    against: Label | None = None
    role: Literal["primary", "secondary"] = "primary"
    rationale: str = ""


class Power(_Strict):
    test: Text
    alpha: float = Field(gt=0, lt=1)
    power: float = Field(gt=0, lt=1)
    effect: float = Field(gt=0)
    required_n: int | None = Field(default=None, ge=1)  # the n the stated effect would need


class SampleSize(_Strict):
    unit: Text
    n_per_condition: int = Field(ge=1)
    reasoning: Text
    power: Power


class Bootstrap(_Strict):
    resamples: int = Field(default=2000, ge=100)
    seed: int = 0


class Analysis(_Strict):
    model: Literal["mixed", "cluster_robust"]
    groups: tuple[Text, ...] = Field(min_length=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    correction: Literal["holm", "bonferroni", "none"] = "holm"
    bootstrap: Bootstrap = Field(default_factory=Bootstrap)
    paired: bool = True
    rules: tuple[Text, ...] = ()  # decision rules in words (floor effects, what a failed check means)


class Study(_Strict):
    schema_version: Literal[1]
    id: Annotated[str, StringConstraints(pattern=_STUDY_ID)]
    title: Text
    version: Text
    authors: tuple[Text, ...] = Field(min_length=1)
    hypotheses: tuple[Hypothesis, ...] = Field(min_length=1)
    conditions: tuple[Text, ...] = Field(min_length=1)
    models: Models
    protocols: tuple[ProtocolRun, ...] = Field(min_length=1)
    measures: tuple[Measure, ...] = Field(min_length=1)
    predictions: tuple[Prediction, ...] = Field(min_length=1)
    sample_size: SampleSize
    analysis: Analysis
    exclusions: tuple[Text, ...] = ()
    seeds: tuple[int, ...] = Field(min_length=1)
    embedder: Text = "minilm"  # the conditions' stores' embedder: a registered name or a model folder

    @model_validator(mode="after")
    def _coherent(self) -> Study:
        problems = study_problems(self)
        if problems:
            raise _problems_error(problems)
        return self

    # ---- look-ups -----------------------------------------------------------------------------------
    def measure(self, measure_id: str) -> ComputedMeasure | JudgedMeasure:
        return _find(self.measures, measure_id, "measure")

    def hypothesis(self, hypothesis_id: str) -> Hypothesis:
        return _find(self.hypotheses, hypothesis_id, "hypothesis")

    def prediction(self, prediction_id: str) -> Prediction:
        return _find(self.predictions, prediction_id, "prediction")

    def protocol(self, name: str) -> ProtocolRun:
        for run in self.protocols:
            if run.name == name:
                return run
        raise LCAError(f"study '{self.id}' runs no protocol '{name}'; it runs: {', '.join(self.protocol_names)}")

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.protocols)

    def protocol_conditions(self, name: str) -> tuple[str, ...]:
        """The conditions a protocol runs: its own list, else all of the study's."""
        run = self.protocol(name)
        return run.conditions if run.conditions is not None else self.conditions

    def judged_measures(self) -> tuple[JudgedMeasure, ...]:
        return tuple(m for m in self.measures if isinstance(m, JudgedMeasure))

    def predictions_for(self, measure_id: str) -> tuple[Prediction, ...]:
        return tuple(p for p in self.predictions if p.measure == measure_id)

    def prediction_conditions(self, prediction: Prediction) -> tuple[str, ...]:
        """The labels of the two arms a prediction compares, in its order (better first for superiority): two
        conditions, or for a within-condition prediction ``condition:measure`` twice."""
        arms = self.prediction_arms(prediction)
        if prediction.against:
            return tuple(f"{condition}:{measure}" for condition, measure in arms)
        return tuple(condition for condition, _ in arms)

    def prediction_arms(self, prediction: Prediction) -> tuple[tuple[str, str], ...]:
        """The two arms as (condition, measure id), in the prediction's order."""
        if prediction.against:
            return ((prediction.within or "", prediction.measure), (prediction.within or "", prediction.against))
        if prediction.kind == "superiority":
            return ((prediction.better or "", prediction.measure), (prediction.than or "", prediction.measure))
        return tuple((c, prediction.measure) for c in prediction.conditions or ())


def _find(items, key: str, what: str):
    for item in items:
        if item.id == key:
            return item
    raise LCAError(f"no {what} '{key}'; known: {', '.join(i.id for i in items)}")


def study_problems(study: Study) -> list[tuple[str, str]]:
    """Every broken rule that reads only the document, as (field, message), in document order."""
    problems: list[tuple[str, str]] = []
    add = lambda field, message: problems.append((field, message))  # noqa: E731

    for field, values in (
        ("hypotheses", [h.id for h in study.hypotheses]),
        ("conditions", list(study.conditions)),
        ("protocols", [p.name for p in study.protocols]),
        ("measures", [m.id for m in study.measures]),
        ("predictions", [p.id for p in study.predictions]),
    ):
        for value in repeats(values):
            add(field, f"'{value}' appears more than once")

    conditions = set(study.conditions)
    protocols = {p.name: p for p in study.protocols}
    for i, run in enumerate(study.protocols):
        for condition in run.conditions or ():
            if condition not in conditions:
                add(f"protocols.{i}.conditions", f"'{condition}' is not among the study's conditions")
        if "condition" in run.args:
            add(f"protocols.{i}.args.condition", "conditions come from the study's condition lists, not from args")

    for i, measure in enumerate(study.measures):
        where = f"measures.{i}"
        if measure.protocol not in protocols:
            add(
                f"{where}.protocol",
                f"measure '{measure.id}' names protocol '{measure.protocol}', which the study does "
                f"not run (it runs: {', '.join(protocols)})",
            )
        if isinstance(measure, JudgedMeasure):
            problems.extend(judged_problems(dict(study.models.roles), measure, where))

    hypotheses = {h.id for h in study.hypotheses}
    measures = {m.id: m for m in study.measures}
    for i, prediction in enumerate(study.predictions):
        problems.extend(_prediction_problems(study, prediction, f"predictions.{i}", hypotheses, measures))
    tested = {p.hypothesis for p in study.predictions}
    for i, hypothesis in enumerate(study.hypotheses):
        if hypothesis.id not in tested:
            add(f"hypotheses.{i}.id", f"hypothesis '{hypothesis.id}' has no prediction, so nothing could refute it")
    for field, listed in (("seeds", study.seeds), ("analysis.groups", study.analysis.groups)):
        for value in repeats(listed):
            add(field, f"'{value}' appears more than once")
    return problems


def _prediction_problems(study, prediction, where, hypotheses, measures) -> list[tuple[str, str]]:
    problems = []
    add = lambda field, message: problems.append((f"{where}.{field}", f"prediction '{prediction.id}': {message}"))  # noqa: E731
    if prediction.hypothesis not in hypotheses:
        add("hypothesis", f"no hypothesis '{prediction.hypothesis}' (known: {', '.join(sorted(hypotheses))})")
    measure = measures.get(prediction.measure)
    if measure is None:
        add("measure", f"no measure '{prediction.measure}' (known: {', '.join(measures)})")
    if prediction.against is not None or prediction.within is not None:
        _within_problems(study, prediction, add, measure, measures)
        return problems
    if prediction.kind == "superiority":
        for field in ("better", "than", "min_effect"):
            if getattr(prediction, field) is None:
                add(field, f"a superiority prediction needs {field}")
        if prediction.min_effect is not None and prediction.min_effect < 0:
            add("min_effect", f"min_effect must be >= 0, got {prediction.min_effect}")
        if prediction.better is not None and prediction.better == prediction.than:
            add("than", f"compares '{prediction.better}' with itself")
        for field in ("conditions", "margin", "floor", "ceiling"):
            if getattr(prediction, field) is not None:
                add(field, f"{field} belongs to an equivalence prediction; a superiority one names better and than")
        compared = [("better", prediction.better), ("than", prediction.than)]
    else:
        if prediction.margin is None or prediction.margin <= 0:
            add("margin", f"an equivalence prediction needs margin > 0, got {prediction.margin}")
        if prediction.conditions is None or len(prediction.conditions) != 2:
            got = "none" if prediction.conditions is None else len(prediction.conditions)
            add("conditions", f"an equivalence prediction names exactly two conditions, got {got}")
        elif prediction.conditions[0] == prediction.conditions[1]:
            add("conditions", f"compares '{prediction.conditions[0]}' with itself")
        if prediction.floor is not None and prediction.ceiling is not None and prediction.floor >= prediction.ceiling:
            add("ceiling", f"ceiling {prediction.ceiling} must lie above floor {prediction.floor}")
        for field in ("better", "than", "min_effect"):
            if getattr(prediction, field) is not None:
                add(
                    field,
                    f"{field} belongs to a superiority prediction; an equivalence one names conditions and margin",
                )
        compared = [("conditions", c) for c in prediction.conditions or ()]
    for field, condition in compared:
        if condition is None:
            continue
        if condition not in study.conditions:
            add(field, f"'{condition}' is not among the study's conditions")
        elif measure is not None and measure.protocol in study.protocol_names:
            if condition not in study.protocol_conditions(measure.protocol):
                add(field, f"'{condition}' is not run on protocol '{measure.protocol}' (measure '{measure.id}')")
    return problems


def _within_problems(study, prediction, add, measure, measures) -> None:
    """The rules of a within-condition prediction (``within`` and ``against``), each broken one given to ``add``."""
    if prediction.within is None or prediction.against is None:
        add(
            "against" if prediction.against is None else "within",
            "a within-condition prediction names both within and against",
        )
    other = measures.get(prediction.against) if prediction.against else None
    if prediction.against is not None and other is None:
        add("against", f"no measure '{prediction.against}' (known: {', '.join(measures)})")
    if prediction.against is not None and prediction.against == prediction.measure:
        add("against", f"compares measure '{prediction.measure}' with itself")
    if measure is not None and other is not None and other.protocol != measure.protocol:
        add(
            "against",
            f"'{other.id}' is a measure of protocol '{other.protocol}', '{measure.id}' of '{measure.protocol}'; the arms pair samples of one protocol",
        )
    for field in ("better", "than", "conditions"):
        if getattr(prediction, field) is not None:
            add(
                field,
                f"a within-condition prediction compares two measures of '{prediction.within}'; {field} does not apply",
            )
    if prediction.kind == "superiority":
        if prediction.min_effect is None or prediction.min_effect < 0:
            add("min_effect", f"a superiority prediction needs min_effect >= 0, got {prediction.min_effect}")
        for field in ("margin", "floor", "ceiling"):
            if getattr(prediction, field) is not None:
                add(field, f"{field} belongs to an equivalence prediction")
    else:
        if prediction.margin is None or prediction.margin <= 0:
            add("margin", f"an equivalence prediction needs margin > 0, got {prediction.margin}")
        if prediction.min_effect is not None:
            add("min_effect", "min_effect belongs to a superiority prediction")
    if prediction.within is not None:
        if prediction.within not in study.conditions:
            add("within", f"'{prediction.within}' is not among the study's conditions")
        elif measure is not None and measure.protocol in study.protocol_names:
            if prediction.within not in study.protocol_conditions(measure.protocol):
                add(
                    "within",
                    f"'{prediction.within}' is not run on protocol '{measure.protocol}' (measure '{measure.id}')",
                )


def _problems_error(problems: list[tuple[str, str]], path: str | None = None) -> RecordFormatError:
    field, message = problems[0]
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem(s): " + "; ".join(f"{f}: {m}" for f, m in problems[1:])
        message += ")"
    return RecordFormatError(message, path=path, field=field)


def registry_problems(study: Study) -> list[tuple[str, str]]:
    """Broken rules against the repository: protocols registered, conditions registered (names or variant
    labels), task arguments the protocol takes, each computed measure's scorer and metric declared by its
    protocol's eval.yaml, model roles known to the harness."""
    problems: list[tuple[str, str]] = []
    for i, condition in enumerate(study.conditions):
        try:
            variant_params(parse_variant(condition))
        except LCAError as exc:
            problems.append((f"conditions.{i}", str(exc)))
    registry = ProtocolRegistry()
    known = registry.available()
    metadata = {}
    for i, run in enumerate(study.protocols):
        if run.name not in known:
            problems.append((f"protocols.{i}.name", f"unknown protocol '{run.name}'; known: {', '.join(known)}"))
            continue
        metadata[run.name] = registered = registry.metadata(run.name)
        for arg in run.args:
            if arg not in registered.config:
                problems.append(
                    (
                        f"protocols.{i}.args.{arg}",
                        f"protocol '{run.name}' takes no parameter '{arg}'; it takes: {', '.join(registered.config)}",
                    )
                )
    for i, measure in enumerate(study.measures):
        if isinstance(measure, JudgedMeasure):
            problems.extend(calibration_problems(measure, f"measures.{i}"))
            problems.extend(rubric_problems(measure, metadata.get(measure.protocol), f"measures.{i}"))
            continue
        meta = metadata.get(measure.protocol)
        if meta is None:
            continue
        scorers = sorted({m.scorer for m in meta.measures})
        if measure.scorer not in scorers:
            problems.append(
                (
                    f"measures.{i}.scorer",
                    f"protocol '{meta.name}' has no scorer '{measure.scorer}'; its scorers: {', '.join(scorers)}",
                )
            )
            continue
        metrics = [m.name for m in meta.measures if m.scorer == measure.scorer and m.reported]
        if measure.metric not in metrics:
            problems.append(
                (
                    f"measures.{i}.metric",
                    f"scorer '{measure.scorer}' of protocol '{meta.name}' reports "
                    f"no '{measure.metric}'; it reports: {', '.join(metrics)}",
                )
            )
    from lca.index.embedder_choice import embedder_source  # the registry alone: no model is loaded

    try:
        embedder_source(study.embedder)
    except LCAError as exc:
        problems.append(("embedder", str(exc)))
    agent_roles = set(RUN_ROLES)  # the conditions' roles and the migrated agent of the migration protocol
    for role in study.models.roles:
        if role not in agent_roles and not role.startswith(RATER_PREFIX):
            problems.append(
                (
                    f"models.roles.{role}",
                    f"unknown role '{role}'; roles are {', '.join(sorted(agent_roles))} and any {RATER_PREFIX}<name>",
                )
            )
    return problems


def check_registered(study: Study, path: str | None = None) -> None:
    problems = registry_problems(study)
    if problems:
        raise _problems_error(problems, path)


def load_study(path: str | Path, *, registered: bool = True) -> Study:
    """The validated study document at ``path``; its id must equal the file's stem. ``registered=False``
    skips the checks against the repository (a document read outside it)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RecordFormatError(f"not valid YAML: {exc}", path=str(path)) from None
    if not isinstance(data, dict):
        raise RecordFormatError("expected a mapping of fields", path=str(path))
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        raise RecordFormatError.from_validation(exc, path=str(path)) from None
    except RecordFormatError as exc:
        raise RecordFormatError(exc.reason, path=str(path), field=exc.field) from None
    if study.id != path.stem:
        raise RecordFormatError(
            f"id '{study.id}' differs from the file's stem '{path.stem}'", path=str(path), field="id"
        )
    if registered:
        check_registered(study, str(path))
    return study
