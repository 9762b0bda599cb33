"""The rater panel: blinding, LLM raters (scripted fakes) parsed strictly, the human CSV round trip with
errors that name the line, and ``rater_*`` roles accepted by ``lca run``."""

from __future__ import annotations

import csv
import json
import math

import pytest

import protocols.cli as cli
from lca.errors import LCAError
from lca.params import ParameterError
from protocols.analysis.agreement import agreement
from protocols.analysis.raters import (
    RaterPanel,
    RatingItem,
    blind_items,
    export_rating_sheet,
    import_ratings,
    is_rater_role,
    parse_rating,
    rate_with_models,
)
from protocols.analysis.sheets import SheetRefused
from protocols.cli.run import parse_roles
from tests.fakes import FakeSchemalessGenerator, FakeScriptedGenerator

CONDITIONS = ("full-lca", "summary", "stateless")


def items(n=9):
    return [
        RatingItem(
            f"{CONDITIONS[i % 3]}/p{i}",
            f"What did we decide about topic {i}?",
            f"Answer number {i}.",
            CONDITIONS[i % 3],
        )
        for i in range(n)
    ]


def panel(**kw):
    args = {
        "raters": ["rater_a", "rater_b"],
        "prompt": "Rate the continuity of the answer.",
        "scale": [1, 2, 3, 4, 5],
        "level": "ordinal",
    }
    return RaterPanel(**{**args, **kw})


def shown_text(generator):
    return "\n".join(m["content"] for call in generator.calls for m in call)


# ---- blinding ---------------------------------------------------------------------------------------
def test_blinding_removes_the_condition_and_orders_items_deterministically_per_seed():
    blind = blind_items(items(), seed=3)
    for item in blind.items:
        assert set(vars(item)) == {"blind_id", "probe", "answer"}
        assert not any(c in item.blind_id for c in CONDITIONS) and "/p" not in item.blind_id
    assert sorted(blind.unblind(b.blind_id) for b in blind.items) == sorted((i.item_id, i.condition) for i in items())
    again, other = blind_items(items(), seed=3), blind_items(items(), seed=4)
    assert blind.items == again.items and dict(blind.key) == dict(again.key)
    assert [b.probe for b in blind.items] != [b.probe for b in other.items]
    assert [b.probe for b in blind.items] != [i.probe for i in items()]  # not the run's order
    assert blind.order_for("rater_a") == again.order_for("rater_a")
    assert blind.order_for("rater_a") != blind.order_for("rater_b")
    assert sorted(blind.order_for("rater_b"), key=lambda b: b.blind_id) == sorted(blind.items, key=lambda b: b.blind_id)
    with pytest.raises(LCAError, match="unknown blind id"):
        blind.unblind("nope")


def test_duplicate_item_ids_are_refused():
    with pytest.raises(LCAError, match="appears twice"):
        blind_items([*items(2), items(2)[0]], seed=0)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"raters": ["rater_a", "judge"]}, "'judge' is not a rater role"),
        ({"raters": ["rater_a"]}, "at least two distinct raters"),
        ({"raters": ["rater_a", "rater_a"]}, "at least two distinct raters"),
        ({"scale": ["low", "high"]}, "takes numbers"),
        ({"scale": [1]}, "two distinct values"),
        ({"level": "ratio"}, "level 'ratio'"),
        ({"prompt": "  "}, "prompt is empty"),
    ],
)
def test_a_bad_panel_is_refused(kw, message):
    with pytest.raises(LCAError, match=message):
        panel(**kw)


def test_rater_role_names():
    assert is_rater_role("rater_a") and is_rater_role("rater_gpt4o_2")
    assert not any(map(is_rater_role, ["rater_", "rater", "grader", "rater_A", "rater-a", "xrater_a"]))


# ---- LLM raters -------------------------------------------------------------------------------------
def test_llm_raters_never_see_the_condition_and_each_rates_in_its_own_order():
    def rate(messages):
        return json.dumps({"rating": 1 + len(messages[-1]["content"]) % 5})

    a, b = FakeScriptedGenerator(rate), FakeScriptedGenerator(rate)
    ratings = rate_with_models(panel(), items(), {"rater_a": a, "rater_b": b, "agent": None}, seed=5)
    for generator in (a, b):
        text = shown_text(generator)
        assert not any(c in text for c in CONDITIONS) and "/p" not in text
        assert "Rate the continuity of the answer." in text and "1, 2, 3, 4, 5" in text
        assert generator.schemas[0]["properties"]["rating"]["enum"] == [1, 2, 3, 4, 5]
    order = [[call[-1]["content"] for call in g.calls] for g in (a, b)]
    assert order[0] != order[1] and sorted(order[0]) == sorted(order[1])
    assert len(ratings) == 18 and ratings["value"].notna().all()
    # the condition is joined back after rating, by the key
    by_item = {i.item_id: i.condition for i in items()}
    assert all(by_item[i] == c for i, c in zip(ratings["item"], ratings["condition"]))
    assert set(ratings["rater"]) == {"rater_a", "rater_b"}


def test_an_unreadable_rating_is_missing_with_its_raw_text_never_guessed():
    replies = iter(['{"rating": 4}', "I would say 4 out of 5.", '{"rating": 9}', '```json\n{"rating": 2}\n```'])
    a = FakeScriptedGenerator(lambda _m: next(replies))
    b = FakeScriptedGenerator(lambda _m: RuntimeError("server down"))
    ratings = rate_with_models(panel(), items(4), {"rater_a": a, "rater_b": b})
    mine = ratings[ratings["rater"] == "rater_a"]
    assert sorted(v for v in mine["value"] if not math.isnan(v)) == [2, 4]
    prose = mine[mine["raw"] == "I would say 4 out of 5."].iloc[0]
    assert math.isnan(prose["value"]) and prose["problem"] == "not a JSON object"
    assert "not on the scale" in mine[mine["raw"] == '{"rating": 9}'].iloc[0]["problem"]
    theirs = ratings[ratings["rater"] == "rater_b"]
    assert theirs["value"].isna().all() and theirs["problem"].str.contains("server down").all()
    assert agreement(ratings, "ordinal", resamples=0).n_missing == 6


@pytest.mark.parametrize(
    "reply, value",
    [
        ('{"rating": 3}', 3),
        ('{"rating": 3.0}', 3),
        ('{"rating": "3"}', None),
        ('{"rating": true}', None),
        ('{"rating": 3, "why": "x"}', None),
        ("3", None),
        ("", None),
    ],
)
def test_parse_rating_is_strict(reply, value):
    assert parse_rating(reply, [1, 2, 3])[0] == value


def test_a_generator_without_the_schema_keyword_is_asked_without_it_and_a_missing_rater_is_named():
    a = FakeSchemalessGenerator(lambda _m: '{"rating": 1}')
    b = FakeScriptedGenerator(lambda _m: '{"rating": 1}')
    ratings = rate_with_models(panel(), items(3), {"rater_a": a, "rater_b": b})
    assert ratings["value"].notna().all() and a.schemas == [None, None, None]
    with pytest.raises(LCAError, match="no model for rater role.*rater_b"):
        rate_with_models(panel(), items(3), {"rater_a": a})


# ---- human raters -----------------------------------------------------------------------------------
def fill(sheet, out, rows_by_rater, extra=()):
    """A filled copy of the sheet: ``rows_by_rater`` maps a rater to {blind id: rating}; ``extra`` rows appended."""
    with open(sheet, newline="", encoding="utf-8") as handle:
        template = list(csv.DictReader(handle))
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sheet_item_id", "probe", "answer", "rating", "rater", "notes"])
        for rater, given in rows_by_rater.items():
            for row in template:
                rating = given.get(row["sheet_item_id"], "")
                writer.writerow(
                    [row["sheet_item_id"], row["probe"], row["answer"], rating, rater if rating else "", ""]
                )
        for row in extra:
            writer.writerow(row)


def test_the_rating_sheet_is_blinded_and_round_trips(tmp_path):
    sheet, key = export_rating_sheet(items(6), tmp_path / "sheets" / "style.csv", seed=1, scale=[1, 2, 3, 4, 5])
    assert key.name == "style.key.json" and key.parent == sheet.parent
    text = sheet.read_text(encoding="utf-8")
    assert not any(c in text for c in CONDITIONS)
    with open(sheet, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["sheet_item_id", "probe", "answer", "rating", "rater", "notes"]
    assert all(r[3:] == ["", "", ""] for r in rows[1:]) and len(rows) == 7
    ids = [r[0] for r in rows[1:]]
    filled = tmp_path / "filled.csv"
    fill(sheet, filled, {"ana": {i: 3 for i in ids}, "ben": {i: "4.0" for i in ids[:4]}})
    ratings = import_ratings(filled, key)
    assert len(ratings) == 10 and set(ratings["rater"]) == {"ana", "ben"}
    assert set(ratings["value"]) == {3, 4}
    by_item = {i.item_id: i.condition for i in items(6)}
    assert all(by_item[i] == c for i, c in zip(ratings["item"], ratings["condition"]))


def test_import_errors_name_the_csv_line(tmp_path):
    many_lines = [RatingItem("x1", "probe", "line one\nline two\nline three", "full-lca"), *items(3)]
    sheet, key = export_rating_sheet(many_lines, tmp_path / "s.csv", seed=0, scale=[1, 2, 3])
    ids = [row["sheet_item_id"] for row in csv.DictReader(open(sheet, newline="", encoding="utf-8"))]
    filled = tmp_path / "filled.csv"
    # 4 items, one answer spanning 3 physical lines: the sheet's records start at lines 2..7 (data ends at 7)
    x1 = next(b for b, entry in json.loads(key.read_text())["items"].items() if entry["item_id"] == "x1")
    fill(
        sheet,
        filled,
        {"ana": {i: (9 if i == x1 else 2) for i in ids}},
        extra=[
            ["s999", "p", "a", "2", "ana", ""],  # unknown id: line 8
            [ids[1], "p", "a", "7", "ben", ""],  # off the scale: line 9
            [ids[2], "p", "a", "1", "ana", ""],  # ana again on the same item: line 10
            [ids[3], "p", "a", "1", "", ""],  # no rater: line 11
        ],
    )
    physical = filled.read_text(encoding="utf-8").splitlines()
    assert physical[7].startswith("s999")
    with pytest.raises(SheetRefused) as caught:
        import_ratings(filled, key)
    lines = caught.value.lines()  # one line per problem: the file, the line (and row), the field
    assert len(lines) == 5 and all(line.startswith(f"{filled}, ") for line in lines)
    # the multi-line record is named by the line it starts on (every record before it is one line)
    assert f"line {2 + ids.index(x1)}, field 'rating': rating '9' of '{x1}' is not on the scale" in lines[0]
    # records after the 3-line answer: the spreadsheet row differs from the line, and both are named
    assert lines[1] == f"{filled}, row 6, line 8, field 'sheet_item_id': unknown sheet_item_id 's999' (not in the key)"
    assert "row 7, line 9, field 'rating': rating '7'" in lines[2] and "not on the scale" in lines[2]
    assert "row 8, line 10, field 'rater': rater 'ana' rated" in lines[3] and "(first at" in lines[3]
    assert "row 9, line 11, field 'rater': the rating of" in lines[4] and "names no rater" in lines[4]
    assert str(caught.value).startswith(f"rating sheet refused: {lines[0]} (and 4 more: ")


def test_duplicate_ratings_name_both_lines_across_files(tmp_path):
    sheet, key = export_rating_sheet(items(3), tmp_path / "s.csv", seed=0, scale=["no", "yes"])
    ids = [row["sheet_item_id"] for row in csv.DictReader(open(sheet, newline="", encoding="utf-8"))]
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    fill(sheet, one, {"ana": {ids[0]: "yes"}})
    fill(sheet, two, {"ana": {ids[0]: "no"}})
    with pytest.raises(
        LCAError,
        match=rf"two.csv, line 2, field 'rater': rater 'ana' rated '{ids[0]}' again \(first at .*one.csv, line 2\)",
    ):
        import_ratings([one, two], key)


def test_a_sheet_missing_a_column_or_a_bad_key_is_refused(tmp_path):
    sheet, key = export_rating_sheet(items(2), tmp_path / "s.csv", seed=0, scale=[0, 1])
    bad = tmp_path / "bad.csv"
    bad.write_text("sheet_item_id,probe,answer,rating,notes\n", encoding="utf-8")
    with pytest.raises(LCAError, match=r"line 1, field 'rater': missing column\(s\)"):
        import_ratings(bad, key)
    (tmp_path / "k.json").write_text("{}", encoding="utf-8")
    with pytest.raises(LCAError, match="not a rating key"):
        import_ratings(sheet, tmp_path / "k.json")
    with pytest.raises(LCAError, match="needs the measure's scale"):
        export_rating_sheet(items(2), tmp_path / "t.csv", seed=0)


# ---- rater roles in lca run -------------------------------------------------------------------------
def test_any_number_of_rater_roles_is_accepted_and_other_names_refused():
    roles = parse_roles(["grader=x/y", "rater_a=m/1", "rater-b=m/2", "rater_gpt_3=m/3"])
    assert roles == {"grader": "x/y", "rater_a": "m/1", "rater_b": "m/2", "rater_gpt_3": "m/3"}
    with pytest.raises(
        ParameterError, match="unknown name 'judge'; known: grader, migrated, reviewer, summarizer, or any"
    ):
        parse_roles(["rater_a=m/1", "judge=x/y"])
    with pytest.raises(ParameterError, match="'rater_a' is given twice"):
        parse_roles(["rater_a=m/1", "rater_a=m/2"])


def test_lca_run_accepts_rater_roles_and_conditions_never_get_them(capsys, tmp_path):
    from conditions import ROLES

    # the role passes; the run then stops at the next check (-T), before anything loads
    argv = [
        "run",
        "continuity",
        "--conditions",
        "full-lca",
        "--model",
        "x/y",
        "--log-dir",
        str(tmp_path / "l"),
        "--role",
        "rater_a=x/y",
        "--role",
        "rater_b=x/z",
        "-T",
        "seed=soon",
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "-T 'seed=soon'" in err and "--role" not in err
    assert not any(is_rater_role(role) for role in ROLES)  # a condition's generators are built from ROLES only
