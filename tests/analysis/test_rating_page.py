"""The offline rating page: self-contained and blind; its script run under Node (no DOM: the CSV it saves is the
sheet's CSV byte for byte, the keys it maps); and the whole page run in jsdom, a DOM library, by a rater at the
keyboard, whose saved CSV ``lca raters import`` reads. No headless browser is installed here; jsdom (pinned in
tests/js/package-lock.json) is installed by scripts/setup.sh into .venv/js."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import protocols.cli as cli
from protocols.analysis.raters import RatingItem, export_rating_sheet, page_path_for
from protocols.analysis.rating_page import DATA_ID, PageSheet, inline_script

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "js" / "rating_page_dom.js"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(
    NODE is None and not os.environ.get("LCA_REQUIRE_JS"),
    reason="Node.js is not installed: the rating page's script is not run",
)
HOSTILE = 'Line one, "quoted"\r\nline two\n</script><script>window.owned = 1</script><b>bold</b> @SCRIPT@ & \u2028 ok'


def jsdom_modules() -> Path | None:
    """jsdom's node_modules: $LCA_JS_MODULES, else where scripts/setup.sh puts it (.venv/js)."""
    chosen = [Path(os.environ["LCA_JS_MODULES"])] if os.environ.get("LCA_JS_MODULES") else []
    for base in (*chosen, Path(sys.prefix) / "js", REPO / ".venv" / "js"):
        modules = base if base.name == "node_modules" else base / "node_modules"
        if (modules / "jsdom" / "package.json").is_file():
            return modules
    return None


def items(n=6):
    conditions = ("full-lca", "stateless")
    return [
        RatingItem(
            f"p{i}@{conditions[i % 2]}", f"Question {i}, with a comma?", f"Answer {i}. " + HOSTILE, conditions[i % 2]
        )
        for i in range(n)
    ]


def node(program: str) -> dict:
    done = subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_is_self_contained_and_blind(tmp_path):
    sheet, key = export_rating_sheet(items(), tmp_path / "style.csv", 3, scale=[1, 2, 3, 4, 5], prompt="Rate it.")
    page = page_path_for(sheet).read_text(encoding="utf-8")
    assert "full-lca" not in page and "stateless" not in page  # the condition stays in the key
    assert not re.search(r"https?://|\bsrc=|\bhref=|<link|@import|url\(", page)  # nothing to fetch
    assert "default-src 'none'" in page  # and the browser is told to fetch nothing
    # the items travel as JSON no answer can break out of: one data element, one script, markup kept as text
    assert page.count("<script") == 2 and page.count("</script>") == 2
    data = json.loads(re.search(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>', page, re.S)[1])
    with open(sheet, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert data["columns"] == rows[0] and data["rows"] == rows[1:]
    assert data["scale"] == [1, 2, 3, 4, 5] and data["prompt"] == "Rate it." and data["file_stem"] == "style"
    assert json.loads(key.read_text())["page"] == "style.html"


def test_a_page_sheet_refuses_columns_it_does_not_have():
    with pytest.raises(Exception, match="not among the sheet's columns"):
        PageSheet("t", "p", (1, 2), ("id", "rating"), (), "id", (("answer", "Answer"),), "x")


@needs_node
def test_the_page_script_saves_the_sheet_csv_byte_for_byte_and_maps_the_keys(tmp_path):
    sheet, _ = export_rating_sheet(items(), tmp_path / "style.csv", 0, scale=[1, 2, 3, 4, 5], prompt="Rate it.")
    page = page_path_for(sheet).read_text(encoding="utf-8")
    data = json.loads(re.search(rf'id="{DATA_ID}">(.*?)</script>', page, re.S)[1])
    ids = [row[0] for row in data["rows"]]
    state = {
        "index": 0,
        "rater": "  Ana Lopez ",
        "ratings": {ids[0]: 2, ids[3]: 4},  # choices are positions on the scale: 3 and 5
        "notes": {ids[3]: 'unsure, "maybe"\nsee above', ids[5]: "a note on an unrated item"},
        "advance": True,
    }
    program = f"""
    const vm = require("vm");
    const context = {{}};
    vm.createContext(context);
    vm.runInContext({json.dumps(inline_script(page))}, context);
    const P = context.LCARatingPage, sheet = {json.dumps(data)}, state = {json.dumps(state)};
    const keys = P.digitKeys(sheet.scale), words = P.digitKeys(["yes", "no", "unsure"]);
    let s = P.initialState();
    const walk = [];
    for (const key of ["5", "j", "k", "x", "G", "3", "g", "u"]) {{
      s = P.step(sheet, s, P.keyAction(key, keys, {{}}) || {{type: "none"}});
      walk.push([s.index, JSON.stringify(s.ratings)]);
    }}
    process.stdout.write(JSON.stringify({{
      csv: P.buildCsv(sheet, state),
      blank: P.buildCsv(sheet, P.initialState()),
      name: P.fileName(sheet, state.rater),
      keys, words,
      in_field: [P.keyAction("3", keys, {{inField: true}}), P.keyAction("Escape", keys, {{inField: true}}),
                 P.keyAction("s", keys, {{inField: true, ctrl: true}})],
      plain: ["j", "ArrowDown", "k", "ArrowLeft", "x", "n", "r", "s", "?", "q"].map(k => P.keyAction(k, keys, {{}})),
      walk,
    }}));
    """
    out = node(program)
    assert out["blank"].encode("utf-8") == sheet.read_bytes()  # untouched, the page writes the sheet as exported
    expected = io.StringIO()
    writer = csv.writer(expected)
    writer.writerow(data["columns"])
    for row in data["rows"]:
        row = list(row)
        if row[0] == ids[0]:
            row[3:5] = ["3", "Ana Lopez"]
        if row[0] == ids[3]:
            row[3:6] = ["5", "Ana Lopez", state["notes"][ids[3]]]
        if row[0] == ids[5]:
            row[5] = state["notes"][ids[5]]
        writer.writerow(row)
    assert out["csv"] == expected.getvalue()  # Python's csv quoting, CRLF, byte for byte
    assert out["name"] == "style.Ana-Lopez.csv"
    assert out["keys"] == ["1", "2", "3", "4", "5"] and out["words"] == ["1", "2", "3"]
    assert out["in_field"] == [None, {"type": "leave"}, {"type": "save"}]  # typing a digit in a field is typing
    assert [a and a["type"] for a in out["plain"]] == [
        "move", "move", "move", "move", "clear", "focus", "focus", "save", "help", None,
    ]  # fmt: skip
    first, second = ids[0], ids[-1]
    assert out["walk"] == [
        [1, json.dumps({first: 4}, separators=(",", ":"))],  # 5 rates the first item and moves on
        [2, json.dumps({first: 4}, separators=(",", ":"))],
        [1, json.dumps({first: 4}, separators=(",", ":"))],
        [1, json.dumps({first: 4}, separators=(",", ":"))],  # x clears item 2, which had no rating
        [5, json.dumps({first: 4}, separators=(",", ":"))],  # G: the last item
        [5, json.dumps({first: 4, second: 2}, separators=(",", ":"))],  # rated; the last item stays put
        [0, json.dumps({first: 4, second: 2}, separators=(",", ":"))],
        [1, json.dumps({first: 4, second: 2}, separators=(",", ":"))],  # u: the next unrated item
    ]


@needs_node
def test_a_rater_at_the_keyboard_fills_the_page_in_a_dom_and_the_saved_csv_imports(tmp_path, capsys):
    modules = jsdom_modules()
    if modules is None:
        message = "jsdom is not installed: `bash scripts/setup.sh test` installs it with npm into .venv/js"
        if os.environ.get("LCA_REQUIRE_JS"):  # CI: the page's DOM test must run, never skip quietly
            pytest.fail(message + " (LCA_REQUIRE_JS is set)")
        pytest.skip(message)
    sheet, key = export_rating_sheet(
        items(4), tmp_path / "audit.csv", 1, scale=["yes", "no", "unsure"], prompt="Did it help?"
    )
    steps = [
        {"key": "s"},  # no name yet: the page asks for one and saves nothing
        {"key": "r"},
        {"type": "ben"},
        {"key": "1"},  # typed in the name field: not a rating
        {"key": "Escape"},
        {"key": "1"},  # yes, and on to item 2
        {"key": "3"},  # unsure, and on to item 3
        {"key": "n"},
        {"type": 'not sure, "really"'},  # a note on item 3
        {"key": "Escape"},
        {"click_scale": 1},  # no, by mouse, and on to item 4
        {"key": "?"},
        {"reload": True},  # the page opened again keeps the work
        {"key": "k"},
        {"key": "1"},  # item 3 changed to yes; item 4 is left unrated
        {"key": "s", "ctrl": True},
    ]
    (tmp_path / "steps.json").write_text(json.dumps(steps), encoding="utf-8")
    done = subprocess.run(
        [NODE, str(DRIVER), str(page_path_for(sheet)), str(tmp_path / "steps.json")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
    )
    assert done.returncode == 0, done.stderr + done.stdout
    run = json.loads(done.stdout)
    assert run["errors"] == []
    shots = run["snapshots"]
    assert "Type your name" in shots[1]["status"] and shots[1]["offered"] == 0
    assert shots[2]["active"] == "rater" and shots[4]["rater"] == "ben" and shots[4]["position"].startswith("Item 1 ")
    assert shots[0]["buttons"] == ["1: yes", "2: no", "3: unsure"] and shots[0]["labels"] == ["Question", "Answer"]
    assert shots[0]["bold"] == 0 and shots[0]["scripts"] == 2 and "</script>" in shots[0]["shown"][1]  # text only
    assert shots[6]["position"].startswith("Item 2 ") and shots[7]["position"].startswith("Item 3 ")
    assert shots[9]["notes"] == 'not sure, "really"' and shots[10]["active"] == "BODY"
    assert shots[12]["help_hidden"] is False
    assert shots[13]["rater"] == "ben" and shots[13]["position"] == "Item 4 of 4 (s004); rated 3 of 4"  # kept
    assert shots[14]["position"].startswith("Item 3 ") and shots[14]["chosen"] == 1  # no, kept
    assert shots[14]["notes"] == 'not sure, "really"'
    assert "Saved audit.ben.csv: 3 rated, 1 not rated" in shots[16]["status"]
    (download,) = run["downloads"]
    assert download["name"] == "audit.ben.csv"
    filled = tmp_path / download["name"]
    filled.write_bytes(download["text"].encode("utf-8"))
    rows = list(csv.DictReader(io.StringIO(download["text"], newline="")))
    assert [(r["rating"], r["rater"]) for r in rows] == [("yes", "ben"), ("unsure", "ben"), ("yes", "ben"), ("", "")]
    with open(sheet, newline="", encoding="utf-8") as handle:
        exported = list(csv.DictReader(handle))
    assert [r["answer"] for r in rows] == [r["answer"] for r in exported]  # hostile text survives the trip
    assert [r["notes"] for r in rows] == ["", "", 'not sure, "really"', ""]
    capsys.readouterr()
    code = cli.main(["raters", "import", str(filled), "--key", str(key), "--resamples", "0"])
    assert code == 1  # one rater: alpha is undefined and the gate refuses, but the sheet imported
    out = capsys.readouterr().out
    assert "ben (3)" in out and "REFUSED" in out
    record = json.loads((tmp_path / "audit.agreement.json").read_text())
    assert record["n_ratings"] == 3 and record["raters"] == {"ben": {"kind": "person", "ratings": 3}}
