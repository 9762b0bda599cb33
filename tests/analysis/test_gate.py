"""The calibration gate: who a rater is (raters with one identity are one rater), the calibration set with its
reference codes (the shipped one loads; a broken one is refused naming the line and field), and the gate, which
can fail: raters who disagree, raters who are one rater, raters who agree with each other but not with the codes,
a rater with too few readable ratings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest

from lca.errors import RecordFormatError
from protocols.analysis.gate import (
    ITEM_PREFIX,
    CalibrationSet,
    RaterIdentity,
    calibration_gate,
    model_identities,
    person_identity,
    read_calibration_set,
    reference_agreement,
    same_identity,
)
from protocols.analysis.raters import RaterDecoding, RaterPanel, rate_with_models
from tests.fakes import FakeScriptedGenerator

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "calibration" / "style_continuity-v1.jsonl"
SCALE = (1, 2, 3, 4, 5)


def identity(rater="rater_a", **kw) -> RaterIdentity:
    args = {
        "kind": "model",
        "model": "lca-local/smollm2",
        "prompt": "Rate it.",
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 32,
    }
    return RaterIdentity(rater=rater, **{**args, **kw})


def panel(**decoding) -> RaterPanel:
    return RaterPanel(("rater_a", "rater_b"), "Rate it.", SCALE, "ordinal", decoding)


# ---- who a rater is ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "b, one",
    [
        ({}, True),  # the same model, prompt and settings
        ({"seed": 9}, True),  # greedy decoding at temperature 0 ignores the seed
        ({"max_tokens": 64}, True),  # a longer limit does not change a short reply
        ({"model": "lca-local//models/smollm2.gguf", "model_sha256": "ab" * 32}, True),  # one file, two names
        ({"temperature": 0.7}, False),
        ({"prompt": "Judge the reply."}, False),
        ({"model": "openai/gpt-4o-mini"}, False),
    ],
)
def test_raters_are_one_rater_when_model_prompt_and_settings_match(b, one):
    a = identity("rater_a", model_sha256="ab" * 32 if "model_sha256" in b else None)
    other = identity("rater_b", **b)
    assert (a.key() == other.key()) is one
    assert (same_identity({"rater_a": a, "rater_b": other}) == [("rater_a", "rater_b")]) is one


def test_above_temperature_zero_the_seed_makes_raters_distinct_and_people_are_distinct_by_name():
    assert identity(temperature=0.7, seed=1).key() != identity(temperature=0.7, seed=2).key()
    assert identity(temperature=0.7, seed=1).key() == identity("rater_b", temperature=0.7, seed=1).key()
    assert person_identity("ana").key() != person_identity("ben").key()
    assert same_identity({"ana": person_identity("ana"), "ben": person_identity("ben")}) == []


def test_model_identities_take_each_raters_own_prompt_and_settings_and_the_runs_seed_by_default():
    rated = panel(rater_b=RaterDecoding(prompt="Judge the reply.", temperature=0.7, seed=7, max_tokens=16))
    ids = model_identities(rated, {"rater_a": "lca-local/smollm2", "rater_b": "lca-local/smollm2"}, seed=3)
    a, b = ids["rater_a"], ids["rater_b"]
    assert (a.prompt, a.prompt_source, a.temperature, a.seed, a.max_tokens) == ("Rate it.", "panel", 0.0, 3, 32)
    assert (b.prompt, b.prompt_source, b.temperature, b.seed, b.max_tokens) == ("Judge the reply.", "own", 0.7, 7, 16)
    assert a.digest != b.digest and same_identity(ids) == []
    record = b.to_dict()
    assert (
        record["identity"] == b.digest and len(record["prompt_sha256"]) == 64 and record["model"] == "lca-local/smollm2"
    )
    assert "temperature 0.7, seed 7" in b.describe() and "unused" in a.describe()


def test_each_rater_is_asked_with_its_own_prompt_and_decoding_settings():
    rated = panel(rater_b=RaterDecoding(prompt="Judge the reply.", temperature=0.7, seed=7, max_tokens=16))
    a, b = (FakeScriptedGenerator(lambda _m: '{"rating": 3}') for _ in range(2))
    item = {"item_id": "x", "probe": "Q?", "answer": "A.", "condition": "c"}
    rate_with_models(rated, [item], {"rater_a": a, "rater_b": b}, seed=5)
    assert a.settings == [{"max_tokens": 32, "temperature": 0.0, "seed": 5}]
    assert b.settings == [{"max_tokens": 16, "temperature": 0.7, "seed": 7}]
    assert a.calls[0][0]["content"].startswith("Rate it.") and b.calls[0][0]["content"].startswith("Judge the reply.")
    with pytest.raises(Exception, match="decoding settings for 'rater_c', which is not on the panel"):
        panel(rater_c=RaterDecoding())


# ---- the calibration set ----------------------------------------------------------------------------------
def test_the_shipped_calibration_set_loads_and_spans_the_scale():
    calibration = read_calibration_set(SHIPPED, SCALE)
    assert len(calibration.items) == 26 and {item.code for item in calibration.items} == set(SCALE)
    assert calibration.summary()["codes"] == {"1": 5, "2": 5, "3": 5, "4": 5, "5": 6}
    assert calibration.sha256 == read_calibration_set(SHIPPED, SCALE, expected_sha256=calibration.sha256).sha256
    items = calibration.rating_items()
    assert all(i.item_id.startswith(ITEM_PREFIX) and i.condition == "calibration-set" for i in items)
    assert not any(item.note in (i.probe + i.answer) for item, i in zip(calibration.items, items))  # notes unseen
    probes = [item.probe for item in calibration.items]
    assert all(probes.count(p) == 2 for p in probes)  # every question twice, at two different codes


def _line(**kw) -> str:
    return json.dumps({"id": "a", "probe": "Q?", "answer": "A.", "code": 1} | kw)


@pytest.mark.parametrize(
    "lines, where, message",
    [
        (["{not json"], "line 1", "not valid JSON"),
        ([json.dumps({"id": "a", "probe": "Q?", "answer": "A."})], "field 'code'", "missing"),
        ([_line(code=6)], "field 'code'", "not on the scale"),
        ([_line(code="3")], "field 'code'", "not on the scale"),
        ([_line(), _line(code=2)], "line 2, field 'id'", "appears again (first on line 1)"),
        ([_line(probe="")], "field 'probe'", "non-empty string"),
        ([_line(why="x")], "field 'why'", "unknown field"),
        ([_line(), _line(id="b")], "calib.jsonl", "at least two different codes"),
    ],
)
def test_a_broken_calibration_set_is_refused_naming_the_line_and_field(tmp_path, lines, where, message):
    path = tmp_path / "calib.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordFormatError) as caught:
        read_calibration_set(path, SCALE)
    assert where in str(caught.value) and message in str(caught.value)


def test_a_calibration_set_that_changed_since_the_study_named_it_is_refused(tmp_path):
    path = tmp_path / "calib.jsonl"
    path.write_text(_line() + "\n" + _line(id="b", code=2) + "\n", encoding="utf-8")
    with pytest.raises(RecordFormatError, match="the file changed since the study named it"):
        read_calibration_set(path, SCALE, expected_sha256="0" * 64)


# ---- the gate ---------------------------------------------------------------------------------------------
CODES = {f"{ITEM_PREFIX}i{n:02d}": 1 + n % 5 for n in range(20)}


def frame(**raters) -> pd.DataFrame:
    """A calibration ratings frame: each rater's value per item from a function of the reference code (and
    the item's number), None for a missing rating."""
    rows = []
    for rater, rate in raters.items():
        for n, (item, code) in enumerate(CODES.items()):
            value = rate(code, n)
            rows.append({"item": item, "rater": rater, "value": math.nan if value is None else value})
    return pd.DataFrame(rows)


def gate(ratings: pd.DataFrame, identities=None, codes=CODES, **kw):
    identities = identities or {
        "rater_a": identity("rater_a"),
        "rater_b": identity("rater_b", temperature=0.7, seed=7, prompt="Judge the reply."),
    }
    return calibration_gate(
        ratings,
        measure="style",
        level="ordinal",
        scale=SCALE,
        threshold=0.667,
        min_raters=2,
        identities=identities,
        reference_codes=codes,
        calibration={"source": "calibration set", "path": "calib.jsonl", "sha256": "cd" * 32, "items": len(CODES)},
        resamples=200,
        **kw,
    )


def near(code, n):
    return code if n % 7 else min(5, code + 1)  # the reference code, one step off on every seventh item


def test_distinct_raters_who_agree_with_each_other_and_the_codes_pass_and_every_input_is_recorded():
    report = gate(frame(rater_a=lambda c, n: c, rater_b=near))
    assert report.passes and report.reason is None
    assert [c.name for c in report.checks] == [
        "independent",
        "readable",
        "among raters",
        "reference: rater_a",
        "reference: rater_b",
    ]
    a, b = report.reference
    assert (a.exact, a.within_one, a.n_items, a.passes) == (1.0, 1.0, 20, True) and b.exact < 1 and b.passes
    record = report.to_dict()
    for key in ("panel", "calibration", "threshold", "reference_threshold", "level", "scale", "min_raters", "counts"):
        assert record[key] not in (None, [], {}), key
    assert record["reference_threshold"] == 0.667 and record["counts"] == {
        "items": 20,
        "raters": 2,
        "ratings": 40,
        "missing": 0,
    }
    assert [r["rater"] for r in record["panel"]] == ["rater_a", "rater_b"] and record["independent"] is True
    json.dumps(record)  # the agreement file can hold it


def test_raters_who_disagree_on_the_calibration_set_are_refused():
    report = gate(frame(rater_a=lambda c, n: c, rater_b=lambda c, n: 6 - c))
    assert not report.passes
    assert "among raters" in [c.name for c in report.checks if not c.passes]
    assert "below the threshold 0.667" in report.reason and "rater_b against the reference codes" in report.reason
    assert report.among.alpha < 0 and report.summary.startswith("alpha among the raters -")
    assert "rater_b's alpha with the reference codes is -0.950 (threshold 0.667)" in report.summary


def test_a_panel_of_one_rater_twice_is_refused_as_not_independent_whatever_its_agreement():
    twice = {"rater_a": identity("rater_a"), "rater_b": identity("rater_b", seed=5)}  # the seed is unused at 0
    report = gate(frame(rater_a=lambda c, n: c, rater_b=lambda c, n: c), identities=twice)
    assert report.among.alpha == pytest.approx(1.0) and all(r.passes for r in report.reference)
    assert not report.passes and [c.name for c in report.checks if not c.passes] == ["independent"]
    assert "the panel is not independent: rater_a and rater_b are one rater" in report.reason
    assert "not counted" in report.reason and report.to_dict()["same_identity"] == [["rater_a", "rater_b"]]
    assert report.summary == "the panel is not independent (rater_a and rater_b are one rater)"


def test_raters_who_agree_with_each_other_but_not_with_the_codes_are_refused():
    """The paper's trap: two raters who give almost every item the same low value agree 'well' on raw
    agreement; against the codes, neither can apply the scale."""
    report = gate(frame(rater_a=lambda c, n: 1, rater_b=lambda c, n: 1 if n != 3 else 2))
    failed = [c.name for c in report.checks if not c.passes]
    assert "reference: rater_a" in failed and "reference: rater_b" in failed and not report.passes


def test_a_rater_with_readable_ratings_on_fewer_than_half_the_set_fails_its_reference_check():
    report = gate(frame(rater_a=lambda c, n: c, rater_b=lambda c, n: c if n < 8 else None))
    (failed,) = [c for c in report.checks if not c.passes]
    assert failed.name == "reference: rater_b" and "fewer than half" in failed.detail
    assert report.summary == "rater_b rated too few calibration items readably (8 of 20)"
    assert report.reference[1].n_items == 8 and report.reference[1].n_missing == 12


def test_a_raters_alpha_with_the_codes_is_krippendorffs_alpha_of_the_two():
    ratings = frame(rater_a=near, rater_b=lambda c, n: c)
    row = reference_agreement(ratings, "rater_a", CODES, "ordinal", SCALE, 0.667, resamples=0)
    values = [near(c, n) for n, c in enumerate(CODES.values())]
    expected = krippendorff.alpha(
        reliability_data=np.array([values, list(CODES.values())], dtype=float),
        level_of_measurement="ordinal",
        value_domain=[float(v) for v in SCALE],
    )
    assert row.alpha == pytest.approx(expected)
    assert row.exact == pytest.approx(sum(v == c for v, c in zip(values, CODES.values())) / 20)


def test_without_reference_codes_only_the_raters_agreement_is_checked():
    report = gate(frame(rater_a=lambda c, n: c, rater_b=near), codes=None)
    assert report.passes and report.reference == () and report.reference_threshold is None


def test_a_calibration_set_object_gives_codes_by_frame_item_id():
    calibration = CalibrationSet("x.jsonl", "ab" * 32, ())
    assert calibration.codes() == {} and calibration.rating_items() == []
