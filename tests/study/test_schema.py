"""The study document: the shipped pilot loads, and every rule refuses a broken document naming the file and
the field at fault."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from lca.errors import LCAError, RecordFormatError
from protocols.evals.registry import protocol_metadata
from protocols.study import ComputedMeasure, JudgedMeasure, Study, load_study

REPO = Path(__file__).resolve().parents[2]
PILOT = REPO / "preregistration" / "hollow_copy_pilot.yaml"
BASE = yaml.safe_load(PILOT.read_text(encoding="utf-8"))


def index(section: str, key: str, value: str) -> int:
    return next(i for i, item in enumerate(BASE[section]) if item[key] == value)


JUDGED = index("measures", "id", "style_continuity")
NEEDED_TEXT = index("measures", "id", "needed_text")
F1 = index("measures", "id", "f1_locomo")
LOCOMO = index("protocols", "name", "locomo")
P1 = index("predictions", "id", "P1")
P8 = index("predictions", "id", "P8")


def write(tmp_path: Path, data: dict, name: str = "hollow_copy_pilot") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_the_shipped_pilot_loads_with_real_scorers_and_metrics():
    study = load_study(PILOT)
    assert isinstance(study, Study) and study.id == "hollow_copy_pilot"
    assert study.conditions == ("stateless", "summary", "transcript-recall", "full-lca")
    assert study.protocol_conditions("hollow_copy") == study.conditions
    assert study.protocol_conditions("locomo") == ("summary", "transcript-recall")
    for measure in study.measures:
        if isinstance(measure, ComputedMeasure):
            declared = {(m.scorer, m.name) for m in protocol_metadata(measure.protocol).measures}
            assert (measure.scorer, measure.metric) in declared, measure.id
    judged = study.judged_measures()
    assert [m.id for m in judged] == ["style_continuity"]
    assert isinstance(judged[0], JudgedMeasure) and judged[0].level == "ordinal"
    assert judged[0].rater_panel.raters == ("rater_a", "rater_b") and judged[0].agreement_threshold == 0.667
    # two distinct raters (one model, two prompts and settings) held against a committed calibration set
    settings = judged[0].rater_panel.settings
    assert settings["rater_a"].temperature == 0 and settings["rater_b"].temperature > 0 and settings["rater_b"].prompt
    assert judged[0].calibration_set.path == "data/calibration/style_continuity-v1.jsonl"
    assert judged[0].reference_threshold == 0.667
    kinds = {p.kind for p in study.predictions}
    assert kinds == {"superiority", "equivalence"}
    assert study.prediction_conditions(study.prediction("P8")) == ("summary", "transcript-recall")
    assert study.prediction_conditions(study.prediction("P1")) == ("full-lca", "summary")
    assert {p.hypothesis for p in study.predictions} == {h.id for h in study.hypotheses}
    assert study.sample_size.power.required_n and study.sample_size.power.required_n > study.sample_size.n_per_condition


def test_study_is_frozen_and_lookups_name_what_is_missing():
    study = load_study(PILOT)
    with pytest.raises(ValidationError, match="frozen"):
        study.id = "other"  # type: ignore[misc]
    with pytest.raises(LCAError, match="no measure 'nope'; known: needed_in"):
        study.measure("nope")
    assert study.measure("f1_locomo").metric == "locomo_qa"


def _set(path: tuple, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


_DELETE = object()


def _dup_measure(data):
    data["measures"].append(copy.deepcopy(data["measures"][0]))


def _rename_locomo(data):
    data["protocols"][LOCOMO]["name"] = "locomo2"
    for measure in data["measures"]:
        if measure["protocol"] == "locomo":
            measure["protocol"] = "locomo2"


def _orphan_hypothesis(data):
    data["hypotheses"].append({"id": "H9", "statement": "never tested"})


CASES = [
    # (name, change, field, part of the message)
    ("measure ids unique", _dup_measure, "measures", "'needed_in' appears more than once"),
    (
        "prediction names a measure",
        _set(("predictions", P1, "measure"), "nope"),
        f"predictions.{P1}.measure",
        "no measure 'nope'",
    ),
    (
        "prediction names a hypothesis",
        _set(("predictions", P1, "hypothesis"), "H7"),
        f"predictions.{P1}.hypothesis",
        "no hypothesis 'H7'",
    ),
    (
        "prediction names a study condition",
        _set(("predictions", P1, "better"), "identity-only"),
        f"predictions.{P1}.better",
        "not among the study's conditions",
    ),
    (
        "prediction's conditions run on its protocol",
        _set(("predictions", P8, "conditions"), ["summary", "full-lca"]),
        f"predictions.{P8}.conditions",
        "not run on protocol 'locomo'",
    ),
    (
        "judged needs two raters",
        _set(("measures", JUDGED, "rater_panel", "raters"), ["rater_a"]),
        f"measures.{JUDGED}.rater_panel.raters",
        "at least 2 raters",
    ),
    (
        "raters are rater_ roles",
        _set(("measures", JUDGED, "rater_panel", "raters"), ["rater_a", "grader"]),
        f"measures.{JUDGED}.rater_panel.raters",
        "must be a role named rater_*",
    ),
    (
        "raters have models",
        _set(("measures", JUDGED, "rater_panel", "raters"), ["rater_a", "rater_c"]),
        f"measures.{JUDGED}.rater_panel.raters",
        "'rater_c' has no model in models.roles",
    ),
    (
        "min_raters within the panel",
        _set(("measures", JUDGED, "rater_panel", "min_raters"), 3),
        f"measures.{JUDGED}.rater_panel.min_raters",
        "exceeds",
    ),
    (
        "judged needs a rater panel",
        _set(("measures", JUDGED, "rater_panel"), _DELETE),
        f"measures.{JUDGED}.judged.rater_panel",
        "Field required",
    ),
    (
        "an ordinal scale is numeric",
        _set(("measures", JUDGED, "scale"), ["low", "mid", "high"]),
        f"measures.{JUDGED}.scale",
        "holds numbers",
    ),
    (
        "agreement threshold in (0, 1]",
        _set(("measures", JUDGED, "agreement_threshold"), 1.5),
        f"measures.{JUDGED}.judged.agreement_threshold",
        "less than or equal to 1",
    ),
    (
        "rater settings name a rater of the panel",
        _set(("measures", JUDGED, "rater_panel", "settings", "rater_c"), {"temperature": 0.5}),
        f"measures.{JUDGED}.rater_panel.settings.rater_c",
        "settings for 'rater_c', which is not on the panel",
    ),
    (
        "a rater's temperature is in [0, 2]",
        _set(("measures", JUDGED, "rater_panel", "settings", "rater_b", "temperature"), 5),
        f"measures.{JUDGED}.judged.rater_panel.settings.rater_b.temperature",
        "less than or equal to 2",
    ),
    (
        "a rater's settings are known ones",
        _set(("measures", JUDGED, "rater_panel", "settings", "rater_b", "top_p"), 0.9),
        f"measures.{JUDGED}.judged.rater_panel.settings.rater_b.top_p",
        "Extra inputs are not permitted",
    ),
    (
        "a calibration set is rated whole",
        _set(("measures", JUDGED, "calibration_items"), 20),
        f"measures.{JUDGED}.calibration_items",
        "a calibration set is rated whole",
    ),
    (
        "reference_threshold needs a calibration set",
        _set(("measures", JUDGED, "calibration_set"), _DELETE),
        f"measures.{JUDGED}.reference_threshold",
        "only a calibration_set has",
    ),
    (
        "the calibration set is the one the study hashed",
        _set(("measures", JUDGED, "calibration_set", "sha256"), "0" * 64),
        f"measures.{JUDGED}.calibration_set.sha256",
        "the file changed since the study named it",
    ),
    (
        "the calibration set exists",
        _set(("measures", JUDGED, "calibration_set", "path"), "data/calibration/nope.jsonl"),
        f"measures.{JUDGED}.calibration_set.path",
        "does not exist",
    ),
    (
        "computed needs a metric",
        _set(("measures", NEEDED_TEXT, "metric"), _DELETE),
        f"measures.{NEEDED_TEXT}.computed.metric",
        "Field required",
    ),
    (
        "computed needs a computation",
        _set(("measures", NEEDED_TEXT, "computation"), _DELETE),
        f"measures.{NEEDED_TEXT}.computed.computation",
        "Field required",
    ),
    (
        "computed needs a scorer",
        _set(("measures", NEEDED_TEXT, "scorer"), _DELETE),
        f"measures.{NEEDED_TEXT}.computed.scorer",
        "Field required",
    ),
    (
        "a measure's protocol is run",
        _set(("measures", NEEDED_TEXT, "protocol"), "compaction"),
        f"measures.{NEEDED_TEXT}.protocol",
        "which the study does not run",
    ),
    (
        "equivalence needs margin > 0",
        _set(("predictions", P8, "margin"), 0),
        f"predictions.{P8}.margin",
        "needs margin > 0",
    ),
    (
        "equivalence needs a margin",
        _set(("predictions", P8, "margin"), _DELETE),
        f"predictions.{P8}.margin",
        "needs margin > 0, got None",
    ),
    (
        "equivalence names two conditions",
        _set(("predictions", P8, "conditions"), ["summary"]),
        f"predictions.{P8}.conditions",
        "exactly two conditions, got 1",
    ),
    (
        "equivalence takes no better",
        _set(("predictions", P8, "better"), "summary"),
        f"predictions.{P8}.better",
        "belongs to a superiority prediction",
    ),
    ("superiority needs than", _set(("predictions", P1, "than"), _DELETE), f"predictions.{P1}.than", "needs than"),
    (
        "superiority needs min_effect >= 0",
        _set(("predictions", P1, "min_effect"), -0.1),
        f"predictions.{P1}.min_effect",
        "must be >= 0",
    ),
    (
        "superiority takes no margin",
        _set(("predictions", P1, "margin"), 0.1),
        f"predictions.{P1}.margin",
        "belongs to an equivalence prediction",
    ),
    (
        "a protocol's conditions are the study's",
        _set(("protocols", LOCOMO, "conditions"), ["summary", "oracle"]),
        f"protocols.{LOCOMO}.conditions",
        "'oracle' is not among the study's conditions",
    ),
    (
        "conditions come from the study",
        _set(("protocols", LOCOMO, "args"), {"condition": "summary"}),
        f"protocols.{LOCOMO}.args.condition",
        "not from args",
    ),
    ("every hypothesis is tested", _orphan_hypothesis, "hypotheses.3.id", "has no prediction"),
    ("unknown fields are refused", _set(("analysis", "modle"), "mixed"), "analysis.modle", "Extra inputs"),
    ("schema version", _set(("schema_version",), 2), "schema_version", "Input should be 1"),
    ("power effect > 0", _set(("sample_size", "power", "effect"), 0), "sample_size.power.effect", "greater than 0"),
    # against the repository
    (
        "protocol registered",
        _rename_locomo,
        f"protocols.{LOCOMO}.name",
        "unknown protocol 'locomo2'",
    ),
    (
        "protocol takes the argument",
        _set(("protocols", LOCOMO, "args"), {"dataa": "x"}),
        f"protocols.{LOCOMO}.args.dataa",
        "takes no parameter 'dataa'",
    ),
    (
        "scorer declared by the protocol",
        _set(("measures", F1, "scorer"), "answer_match"),
        f"measures.{F1}.scorer",
        "has no scorer 'answer_match'",
    ),
    (
        "metric reported by the scorer",
        _set(("measures", F1, "metric"), "f1"),
        f"measures.{F1}.metric",
        "reports no 'f1'; it reports: locomo_qa",
    ),
    (
        "condition registered",
        _set(("conditions",), ["stateless", "summary", "transcript-recall", "full-lca", "full-lcaa"]),
        "conditions.4",
        "unknown condition 'full-lcaa'",
    ),
    (
        "a variant's parameters are typed",
        _set(("conditions",), ["stateless", "summary", "transcript-recall", "full-lca", "full-lca[nonesuch=1]"]),
        "conditions.4",
        "nonesuch",
    ),
    (
        "role known",
        _set(("models", "roles", "critic"), "lca-local/smollm2"),
        "models.roles.critic",
        "unknown role 'critic'",
    ),
]


@pytest.mark.parametrize(("change", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_rule_refuses_naming_the_file_and_field(tmp_path, change, field, message):
    data = copy.deepcopy(BASE)
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(RecordFormatError) as caught:
        load_study(path)
    assert caught.value.field == field, str(caught.value)
    assert caught.value.path == str(path)
    assert message in str(caught.value)
    assert f"field '{field}'" in str(caught.value)


def test_the_id_must_equal_the_file_stem(tmp_path):
    path = write(tmp_path, copy.deepcopy(BASE), name="other_name")
    with pytest.raises(RecordFormatError, match="id 'hollow_copy_pilot' differs from the file's stem 'other_name'"):
        load_study(path)


def test_several_problems_are_all_listed(tmp_path):
    data = copy.deepcopy(BASE)
    data["predictions"][P8]["margin"] = 0
    data["predictions"][P1]["measure"] = "nope"
    with pytest.raises(RecordFormatError) as caught:
        load_study(write(tmp_path, data))
    assert caught.value.field == f"predictions.{P1}.measure"
    assert f"and 1 more problem(s): predictions.{P8}.margin" in str(caught.value)


def test_not_yaml_or_not_a_mapping_is_refused(tmp_path):
    bad = tmp_path / "hollow_copy_pilot.yaml"
    bad.write_text("id: [unclosed\n", encoding="utf-8")
    with pytest.raises(RecordFormatError, match="not valid YAML"):
        load_study(bad)
    bad.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(RecordFormatError, match="expected a mapping"):
        load_study(bad)


def test_registry_checks_can_be_skipped_for_a_document_read_elsewhere(tmp_path):
    data = copy.deepcopy(BASE)
    _rename_locomo(data)
    study = load_study(write(tmp_path, data), registered=False)
    assert "locomo2" in study.protocol_names
