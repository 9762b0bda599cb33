"""The one ``name=value`` parameter language: typed values, one error format, a round trip."""

from __future__ import annotations

import pytest

from lca.errors import LCAError
from lca.params import ParameterError, coerce, format_assignments, parse_assignments, split_assignment

KNOWN = {"k": int, "floor": float, "sentences": bool, "mode": str, "weights.experience": "float"}


def test_values_are_typed_by_what_they_set():
    values = parse_assignments(
        ["k=8", "floor=0.25", "sentences=off", "mode=hybrid", "weights.experience=0"], known=KNOWN
    )
    assert values == {"k": 8, "floor": 0.25, "sentences": False, "mode": "hybrid", "weights.experience": 0.0}
    assert type(values["k"]) is int and type(values["weights.experience"]) is float


def test_without_known_names_values_stay_strings_and_dashes_become_underscores():
    assert parse_assignments([" top-k = 5 ", "note=a=b"]) == {"top_k": "5", "note": "a=b"}
    assert parse_assignments(None) == {} and parse_assignments([]) == {}


@pytest.mark.parametrize(
    "word, value",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_bool_words(word, value):
    assert coerce(word, bool) is value


def test_errors_read_flag_item_reason():
    with pytest.raises(ParameterError) as info:
        parse_assignments(["k=eight"], flag="--param", known=KNOWN)
    error = info.value
    assert str(error) == "--param 'k=eight': takes an integer, not 'eight'"
    assert (error.flag, error.item, error.reason) == ("--param", "k=eight", "takes an integer, not 'eight'")
    assert isinstance(error, LCAError)
    with pytest.raises(ParameterError, match=r"^--set 'novalue': expected NAME=VALUE$"):
        split_assignment("novalue")
    with pytest.raises(ParameterError, match=r"^-T '=3': expected NAME=VALUE$"):
        parse_assignments(["=3"], flag="-T")
    with pytest.raises(ParameterError, match=r"^--set 'sentences=maybe': takes on/off"):
        parse_assignments(["sentences=maybe"], known=KNOWN)
    with pytest.raises(ParameterError, match=r"^--set 'floor=high': takes a number, not 'high'$"):
        parse_assignments(["floor=high"], known=KNOWN)


def test_unknown_names_are_refused_with_the_known_ones_listed():
    with pytest.raises(ParameterError) as info:
        parse_assignments(["florr=0.2"], flag="--weight", known=KNOWN)
    assert str(info.value) == (
        "--weight 'florr=0.2': unknown name 'florr'; known: floor, k, mode, sentences, weights.experience"
    )


def test_a_name_given_twice_is_refused():
    with pytest.raises(ParameterError, match=r"^--set 'k=3': 'k' is given twice$"):
        parse_assignments(["k=2", "k=3"], known=KNOWN)
    with pytest.raises(ParameterError, match="given twice"):
        parse_assignments(["top-k=2", "top_k=3"])  # the same name once normalized


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN", "Infinity"])
def test_non_finite_floats_are_refused(text):
    with pytest.raises(ParameterError, match="takes a finite number"):
        parse_assignments([f"floor={text}"], known=KNOWN)


def test_format_assignments_round_trips():
    values = {"sentences": True, "k": 8, "floor": 0.25, "mode": "dense", "weights.experience": 0.0}
    items = format_assignments(values)
    assert items == ["floor=0.25", "k=8", "mode=dense", "sentences=on", "weights.experience=0.0"]
    assert parse_assignments(items, known=KNOWN) == values
    assert format_assignments({"x": False}) == ["x=off"]
