"""``lca raters export|import``: the sheet round trip (export, fill by script, import) with alpha equal to the
``krippendorff`` package's on the same codes; every malformed sheet refused in one line naming file, line and
field, exit 2 and nothing written; the gate's refusal. The export from a study run: tests/report/test_raters_export.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import krippendorff
import numpy as np
import pytest

import protocols.cli as cli

CONDITIONS = ("full-lca", "stateless")


def write_items(path: Path, n: int = 10) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            condition = CONDITIONS[i % 2]
            record = {"item_id": f"q{i}@{condition}", "probe": f"What did we decide {i}?", "answer": f"Answer {i}"}
            handle.write(json.dumps({**record, "condition": condition}) + "\n")
    return path


def export(tmp_path: Path, *extra: str, scale: str = "1,2,3,4,5") -> tuple[Path, Path]:
    items = write_items(tmp_path / "style.jsonl")
    argv = ["raters", "export", "--items", str(items), "--scale", scale, "--prompt", "Rate continuity.", *extra]
    assert cli.main(argv) == 0
    return tmp_path / "sheets" / "style.csv", tmp_path / "sheets" / "style.key.json"


def sheet_rows(sheet: Path) -> tuple[list[str], list[list[str]]]:
    with open(sheet, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def fill(sheet: Path, out: Path, rater: str, codes: dict[str, object], extra: list[list[str]] = ()) -> Path:
    """A rater's copy of the sheet: ``codes`` by blind id (an id left out stays unrated), then ``extra`` rows."""
    header, rows = sheet_rows(sheet)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            if row[0] in codes:
                row[3], row[4] = str(codes[row[0]]), rater
            writer.writerow(row)
        writer.writerows(extra)
    return out


def test_the_sheet_round_trip_gives_krippendorffs_alpha_on_the_same_codes(tmp_path, capsys):
    sheet, key = export(tmp_path)
    html = sheet.with_suffix(".html")
    assert html.is_file() and "Rate continuity." in html.read_text(encoding="utf-8")
    printed = capsys.readouterr().out
    assert "10 item(s) from 2 condition(s)" in printed and str(key) in printed
    _, rows = sheet_rows(sheet)
    ids = [r[0] for r in rows]
    assert ids == [f"s{n:03d}" for n in range(1, 11)] and not any(c in sheet.read_text() for c in CONDITIONS)
    rng = np.random.default_rng(7)
    truth = rng.integers(1, 6, size=len(ids))
    codes = {
        "ana": {i: int(t) for i, t in zip(ids, truth)},
        "ben": {i: int(min(5, t + (n % 3 == 0))) for n, (i, t) in enumerate(zip(ids, truth))},
        "cai": {i: int(max(1, t - (n % 4 == 1))) for n, (i, t) in enumerate(zip(ids, truth)) if n != 9},  # 9 unrated
    }
    filled = [fill(sheet, tmp_path / f"{name}.csv", name, c) for name, c in codes.items()]
    assert cli.main(["raters", "import", *map(str, filled), "--key", str(key), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    record = json.loads((sheet.parent / "style.agreement.json").read_text())
    # the same codes, as a raters x items matrix (NaN: not rated), straight into the krippendorff package
    matrix = np.array([[codes[r].get(i, np.nan) for i in ids] for r in sorted(codes)], dtype=float)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    assert record["alpha"] == pytest.approx(expected, abs=1e-12)
    assert record["level"] == "ordinal" and record["threshold"] == 0.667 and record["passes"] is True
    assert record["n_items"] == 10 and record["n_raters"] == 3 and record["n_ratings"] == 29
    low, high = record["alpha_ci"]
    assert low <= record["alpha"] <= high and record["resamples"] == 200
    assert 0 <= record["raw_agreement"] <= 1 and record["expected_agreement"] > 0 and "leaning" in record
    assert record["raters"]["cai"] == {"kind": "person", "ratings": 9} and record["refused"] is False
    assert f"alpha {expected:.3f}" in out and "gate: passes" in out and "cai (9)" in out
    ratings = list(csv.DictReader(open(sheet.parent / "style.ratings.csv", encoding="utf-8")))
    assert len(ratings) == 29 and {r["condition"] for r in ratings} == set(CONDITIONS)  # unblinded after rating
    key_items = json.loads(key.read_text())["items"]
    assert all(key_items[r["sheet_item_id"]]["item_id"] == r["item"] for r in ratings)


def test_raters_who_disagree_are_refused_by_the_gate_and_the_record_says_why(tmp_path, capsys):
    sheet, key = export(tmp_path, scale="yes,no")
    ids = [r[0] for r in sheet_rows(sheet)[1]]
    one = fill(sheet, tmp_path / "ana.csv", "ana", {i: "yes" if n % 2 else "no" for n, i in enumerate(ids)})
    two = fill(sheet, tmp_path / "ben.csv", "ben", {i: "no" if n % 2 else "yes" for n, i in enumerate(ids)})
    capsys.readouterr()
    assert cli.main(["raters", "import", str(one), str(two), "--key", str(key), "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["level"] == "nominal" and record["alpha"] < 0 and record["refused"] is True
    assert "below the threshold 0.667" in record["reason"] and "coding of study data is refused" in record["reason"]
    assert json.loads((sheet.parent / "style.agreement.json").read_text())["refused"] is True


BAD_CASES = {
    "unknown item": ([["s099", "p", "a", "3", "ana", ""]], 12, "sheet_item_id", "unknown sheet_item_id 's099'"),
    "missing code": ([["s002", "p", "a", "", "ana", ""]], 12, "rating", "rater 'ana' left the rating of 's002' empty"),
    "out of scale": ([["s003", "p", "a", "6", "ben", ""]], 12, "rating", "rating '6' of 's003' is not on the scale"),
    "not a number": ([["s003", "p", "a", "good", "ben", ""]], 12, "rating", "rating 'good' of 's003' is not on"),
    "no rater": ([["s004", "p", "a", "2", "", ""]], 12, "rater", "the rating of 's004' names no rater"),
    "a rater twice": ([["s001", "p", "a", "2", "ana", ""]], 12, "rater", "rater 'ana' rated 's001' again (first at"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_each_malformed_sheet_gets_its_one_line_error_and_nothing_is_imported(tmp_path, capsys, case):
    sheet, key = export(tmp_path)
    ids = [r[0] for r in sheet_rows(sheet)[1]]
    extra, line, field, message = BAD_CASES[case]
    good = fill(sheet, tmp_path / "ben.csv", "ben", {i: 3 for i in ids})
    bad = fill(sheet, tmp_path / "ana.csv", "ana", {ids[0]: 3}, extra=extra)
    capsys.readouterr()
    assert cli.main(["raters", "import", str(good), str(bad), "--key", str(key)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines  # the problem, then "nothing imported"
    assert lines[0].startswith(f"lca: error: {bad}, line {line}, field '{field}': {message}"), lines[0]
    assert lines[1] == "lca: error: nothing imported: 1 problem(s) in the sheet(s)"
    assert not list(sheet.parent.glob("*.agreement.json")) and not list(sheet.parent.glob("*.ratings.csv"))


def test_a_rater_twice_across_files_and_broken_files_are_each_named(tmp_path, capsys):
    sheet, key = export(tmp_path)
    ids = [r[0] for r in sheet_rows(sheet)[1]]
    one = fill(sheet, tmp_path / "one.csv", "ana", {ids[0]: 1})
    two = fill(sheet, tmp_path / "two.csv", "ana", {ids[0]: 2})
    no_column = tmp_path / "cols.csv"
    no_column.write_text("sheet_item_id,probe,answer,rating,notes\ns001,p,a,3,\n", encoding="utf-8")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("sheet_item_id,probe,answer,rating,rater,notes\ns001,p,caf\xe9,3,cai,\n".encode("latin-1"))
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    files = [one, two, no_column, latin, empty, one]
    capsys.readouterr()
    assert cli.main(["raters", "import", *map(str, files), "--key", str(key)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"lca: error: {two}, line 2, field 'rater': rater 'ana' rated 's001' again (first at {one}, line 2)",
        f"lca: error: {no_column}, line 1, field 'rater': missing column(s)",
        f"lca: error: {latin}, line 2: not UTF-8 text",
        f"lca: error: {empty}, line 1: empty file: no header row",
        f"lca: error: {one}: the same file is given twice (as {one})",
        "lca: error: nothing imported: 5 problem(s) in the sheet(s)",
    ]
    assert not list(sheet.parent.glob("*.agreement.json"))


def test_export_refuses_to_replace_a_key_and_needs_one_source(tmp_path, capsys):
    sheet, key = export(tmp_path)
    before = key.read_text()
    items = tmp_path / "style.jsonl"
    again = ["raters", "export", "--items", str(items), "--scale", "1,2,3", "--prompt", "p"]
    assert cli.main(again) == 2
    assert "exists: raters may be filling sheets made with it" in capsys.readouterr().err and key.read_text() == before
    assert cli.main([*again, "--force"]) == 0 and json.loads(key.read_text())["scale"] == [1, 2, 3]
    assert cli.main(["raters", "export"]) == 2
    assert "give a study" in capsys.readouterr().err
    assert cli.main(["raters", "export", "--items", str(items), "--scale", "1,2,3"]) == 2
    assert "--prompt" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"item_id": "a", "probe": "p", "answer": "x", "condition": "c"}\n{"item_id": "b"}\n')
    assert cli.main(["raters", "export", "--items", str(broken), "--scale", "1,2", "--prompt", "p"]) == 2
    assert f"{broken}, line 2, field 'probe': missing or empty" in capsys.readouterr().err
