"""A judged measure in the study document: its rater panel, each rater's own settings, and its calibration set.

A rater is a model with its prompt and decoding settings (``rater_panel.settings.<rater>``: its own ``prompt``,
``temperature``, ``seed``, ``max_tokens``; a rater not named there is rated with the panel's prompt at
temperature 0) or a person. The calibration set (``calibration_set``: a committed file of items with reference
codes, named by its path and sha256, so the lock covers its content) is what the panel calibrates on, apart
from the study's answers; each rater must agree with its codes to ``reference_threshold``. Without a calibration
set the panel calibrates on a draw of ``calibration_items`` of the study's answers and nothing holds the raters
against known codes (the agreement record says so). ``protocols.analysis.gate`` is the gate;
docs/raters.md and docs/preregistration.md describe the fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from lca.errors import LCAError
from protocols.evals.data_paths import REPO
from protocols.study.fields import RATER_PREFIX, Label, RoleName, Strict, Text

SHA256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
DEFAULT_MAX_TOKENS = 32  # protocols.analysis.raters.RATING_MAX_TOKENS: a JSON rating needs a handful of tokens


class RaterSettings(Strict):
    """One LLM rater's own prompt (default: the panel's) and decoding settings; ``seed`` default: the study's
    first seed."""

    prompt: Text | None = None
    temperature: float = Field(default=0.0, ge=0, le=2)
    seed: int | None = Field(default=None, ge=0)
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1, le=4096)


class RaterPanel(Strict):
    raters: tuple[RoleName, ...]
    prompt: Text
    min_raters: int = Field(default=2, ge=2)
    settings: dict[RoleName, RaterSettings] = Field(default_factory=dict)


class CalibrationSetRef(Strict):
    """The pre-registered calibration set: a JSONL file of ``{id, probe, answer, code}`` (repository-relative
    or absolute) and the sha256 of its content."""

    path: Text
    sha256: SHA256


class JudgedMeasure(Strict):
    """A measure raters judge on ``scale`` at ``level``; its data are coded only when the panel's calibration
    passes: distinct raters, Krippendorff's alpha among them at least ``agreement_threshold`` and, with a
    ``calibration_set``, each rater's alpha with its reference codes at least ``reference_threshold`` (default:
    ``agreement_threshold``). Without a calibration set, the panel calibrates on ``calibration_items`` of the
    study's answers."""

    id: Label
    protocol: Text
    kind: Literal["judged"]
    level: Literal["nominal", "ordinal", "interval"]
    scale: tuple[int | float | str, ...] = Field(min_length=2)
    rater_panel: RaterPanel
    agreement_threshold: float = Field(default=0.667, gt=0, le=1)
    calibration_items: int = Field(default=20, ge=1)
    calibration_set: CalibrationSetRef | None = None
    reference_threshold: float | None = Field(default=None, gt=0, le=1)
    direction: Literal["higher", "lower"] = "higher"
    description: str = ""


def repeats(values) -> list[Any]:
    """The values that occur more than once, in order of their second occurrence."""
    seen, repeated = set(), []
    for value in values:
        if value in seen and value not in repeated:
            repeated.append(value)
        seen.add(value)
    return repeated


def judged_problems(roles: dict[str, str], measure: JudgedMeasure, where: str) -> list[tuple[str, str]]:
    """Every broken rule of a judged measure that reads only the document (``roles``: the study's model roles)."""
    problems = []
    add = lambda field, message: problems.append((f"{where}.{field}", message))  # noqa: E731
    panel = measure.rater_panel
    if len(panel.raters) < 2:
        add(
            "rater_panel.raters",
            f"judged measure '{measure.id}' needs at least 2 raters (agreement cannot be computed from one); "
            f"got {len(panel.raters)}",
        )
    for rater in repeats(panel.raters):
        add("rater_panel.raters", f"rater '{rater}' appears more than once")
    for rater in panel.raters:
        if not rater.startswith(RATER_PREFIX):
            add("rater_panel.raters", f"rater '{rater}' must be a role named {RATER_PREFIX}*")
        elif rater not in roles:
            add("rater_panel.raters", f"rater '{rater}' has no model in models.roles")
    for rater in panel.settings:
        if rater not in panel.raters:
            add(
                f"rater_panel.settings.{rater}",
                f"settings for '{rater}', which is not on the panel (raters: {', '.join(panel.raters)})",
            )
    if panel.min_raters > len(panel.raters):
        add("rater_panel.min_raters", f"min_raters {panel.min_raters} exceeds the {len(panel.raters)} rater(s) named")
    for value in repeats(measure.scale):
        add("scale", f"scale value {value!r} appears more than once")
    if measure.level in ("ordinal", "interval") and not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in measure.scale
    ):
        add("scale", f"an {measure.level} scale holds numbers, got {list(measure.scale)}")
    if measure.calibration_set is not None and "calibration_items" in measure.model_fields_set:
        add(
            "calibration_items",
            "a calibration set is rated whole; calibration_items sizes a draw from the study's answers, which a "
            "measure with a calibration_set does not take",
        )
    if measure.calibration_set is None and measure.reference_threshold is not None:
        add("reference_threshold", "holds each rater against reference codes, which only a calibration_set has")
    return problems


def calibration_path(value: str) -> Path:
    """A calibration set's file: absolute, or relative to the working directory when it is there, else to the
    repository (studies name files repository-relative)."""
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path
    return REPO / path


def load_calibration_set(measure: JudgedMeasure):
    """The measure's calibration set read and checked against its scale and sha256
    (``protocols.analysis.gate.CalibrationSet``), or None when it names none."""
    from protocols.analysis.gate import read_calibration_set  # pandas, krippendorff: not for `lca --help`

    ref = measure.calibration_set
    if ref is None:
        return None
    return read_calibration_set(
        calibration_path(ref.path), tuple(measure.scale), expected_sha256=ref.sha256, shown=ref.path
    )


def calibration_problems(measure: JudgedMeasure, where: str) -> list[tuple[str, str]]:
    """The calibration set against the repository: the file is there, its content hashes to the sha256 the
    study names, and every line is an item with a code on the scale."""
    ref = measure.calibration_set
    if ref is None:
        return []
    if not calibration_path(ref.path).is_file():
        return [(f"{where}.calibration_set.path", f"calibration set '{ref.path}' does not exist")]
    try:
        load_calibration_set(measure)
    except LCAError as exc:
        field = "sha256" if "sha256" in str(exc) else "path"
        return [(f"{where}.calibration_set.{field}", str(exc))]
    return []


def analysis_panel(measure: JudgedMeasure):
    """The measure's panel as ``protocols.analysis.raters`` rates with it: raters, prompt, scale, level, and
    each rater's own prompt and decoding settings."""
    from protocols.analysis.raters import RaterDecoding
    from protocols.analysis.raters import RaterPanel as Panel

    panel = measure.rater_panel
    decoding = {
        rater: RaterDecoding(s.prompt, float(s.temperature), s.seed, s.max_tokens)
        for rater, s in panel.settings.items()
    }
    return Panel(panel.raters, panel.prompt, tuple(measure.scale), measure.level, decoding)
