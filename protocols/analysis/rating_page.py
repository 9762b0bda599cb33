"""A rating sheet as one self-contained offline HTML page: keyboard-first, it saves the sheet's own CSV.

The page holds everything it needs inline (the items as JSON, the style, the script) and loads nothing: its
Content-Security-Policy forbids any fetch, so it works from a file on a laptop with no network. A rater types
their name, reads the rubric and the scale, rates with the digit keys, moves with j/k (or the arrows) and saves
a CSV in exactly the sheet's format (the same columns and rows, RFC 4180 quoting as Python's ``csv`` writes it,
CRLF line ends), which ``lca raters import`` (or ``lca audit import``) reads. Only rated rows carry the rater's
name; an unrated row stays blank and imports as "not rated". Progress is kept in the browser's local storage
between visits where the browser allows it.

Item text is shown with ``textContent`` only, and the JSON is escaped so no answer can close the script or
inject markup. The script's logic (CSV building, key mapping, state steps) is plain functions on
``LCARatingPage``, testable under Node without a DOM; ``mount`` wires them to the page.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError

DATA_ID = "lca-sheet"
SCRIPT_ID = "lca-rating-logic"


@dataclass(frozen=True)
class PageSheet:
    """What the page shows and how its CSV is laid out. ``rows`` are the sheet's cells exactly as its CSV holds
    them (strings, the columns in order); ``shown`` are the (column, label) pairs a rater reads for an item."""

    title: str
    prompt: str
    scale: tuple[Any, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    id_column: str
    shown: tuple[tuple[str, str], ...]
    file_stem: str
    rating_column: str = "rating"
    rater_column: str = "rater"
    notes_column: str = "notes"

    def __post_init__(self) -> None:
        for name in (self.id_column, self.rating_column, self.rater_column, *(c for c, _ in self.shown)):
            if name not in self.columns:
                raise LCAError(f"the rating page's column '{name}' is not among the sheet's columns {self.columns}")
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if bad:
            raise LCAError(
                f"row {bad[0] + 1} of the rating page has {len(self.rows[bad[0]])} cells, not {len(self.columns)}"
            )
        if len(self.scale) < 2:
            raise LCAError("the rating page needs a scale of at least two values")

    def data(self) -> dict[str, Any]:
        # names the saved progress in local storage: another sheet (other items under the same ids) starts afresh
        content = json.dumps([self.file_stem, self.prompt, list(self.scale), self.rows], ensure_ascii=False)
        digest = hashlib.sha256(content.encode()).hexdigest()[:16]
        return {
            "format": "lca-rating-page",
            "version": 1,
            "title": self.title,
            "prompt": self.prompt,
            "scale": list(self.scale),
            "columns": list(self.columns),
            "rows": [list(row) for row in self.rows],
            "id_column": self.id_column,
            "shown": [list(pair) for pair in self.shown],
            "rating_column": self.rating_column,
            "rater_column": self.rater_column,
            "notes_column": self.notes_column if self.notes_column in self.columns else None,
            "file_stem": self.file_stem,
            "sheet_id": digest,
        }


def rows_of_csv(path: str | Path) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(header, rows) of a sheet as written, for a page that shows exactly that sheet."""

    with open(path, newline="", encoding="utf-8") as handle:
        records = [tuple(r) for r in csv.reader(handle)]
    return records[0], tuple(records[1:])


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' in clear, so no text can end the element."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_page(sheet: PageSheet) -> str:
    """The page's HTML text."""
    parts = {
        "TITLE": html.escape(sheet.title),
        "STYLE": STYLE,
        "DATA": _json_for_script(sheet.data()),
        "SCRIPT": SCRIPT,
    }
    return re.sub(r"@(TITLE|STYLE|DATA|SCRIPT)@", lambda m: parts[m.group(1)], PAGE)  # one pass: data stays data


def write_page(sheet: PageSheet, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(sheet), encoding="utf-8")
    return path


def inline_script(page: str) -> str:
    """The page's logic script (what a test runs under Node)."""
    start = page.index(f'<script id="{SCRIPT_ID}">') + len(f'<script id="{SCRIPT_ID}">')
    return page[start : page.index("</script>", start)]


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>@TITLE@</title>
<style>@STYLE@</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <label>Rater <input id="rater" autocomplete="off" placeholder="your name or initials"></label>
  <label><input type="checkbox" id="advance" checked> next item after rating</label>
  <button id="save" type="button">Save CSV (s)</button>
</header>
<section id="rubric"><h2>What to rate</h2><div id="prompt"></div><div id="scale-legend"></div></section>
<main>
  <div id="position"></div>
  <div id="fields"></div>
  <div id="scale"></div>
  <label for="notes">Notes (n)</label>
  <textarea id="notes" rows="2"></textarea>
</main>
<div id="status" role="status"></div>
<section id="help" hidden>
  <h2>Keys</h2>
  <ul>
    <li><kbd>digit</kbd> rate the item (the key is shown on each value)</li>
    <li><kbd>j</kbd> / <kbd>&darr;</kbd> / <kbd>&rarr;</kbd> next item; <kbd>k</kbd> / <kbd>&uarr;</kbd> / <kbd>&larr;</kbd> previous</li>
    <li><kbd>u</kbd> next unrated item; <kbd>g</kbd> first; <kbd>G</kbd> last</li>
    <li><kbd>x</kbd> / <kbd>Backspace</kbd> clear the rating</li>
    <li><kbd>n</kbd> write a note; <kbd>r</kbd> your name; <kbd>Esc</kbd> back to rating</li>
    <li><kbd>s</kbd> or <kbd>Ctrl</kbd>+<kbd>S</kbd> save the CSV; <kbd>?</kbd> this help</li>
  </ul>
  <p>Unrated items are saved blank and count as not rated. Send the saved CSV back as it is.</p>
</section>
<footer>Press <kbd>?</kbd> for the keys. This page works offline and sends nothing anywhere.</footer>
<script type="application/json" id="lca-sheet">@DATA@</script>
<script id="lca-rating-logic">@SCRIPT@</script>
</body>
</html>
"""

STYLE = """
body { font: 16px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 0 1rem 3rem; color: #1b1b1b; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; padding: .75rem 0;
  border-bottom: 1px solid #ccc; position: sticky; top: 0; background: #fff; }
h1 { font-size: 1.2rem; margin: 0; flex-basis: 100%; }
h2 { font-size: 1rem; margin: .5rem 0; }
#rubric { background: #f4f4f0; padding: .25rem .9rem .6rem; margin: .8rem 0; border-radius: 4px; }
#prompt, .field-text { white-space: pre-wrap; }
#position { color: #555; margin: .6rem 0; }
.field { margin: .6rem 0; }
.field-label { font-weight: 600; font-size: .85rem; text-transform: uppercase; color: #555; }
.field-text { border-left: 3px solid #bbb; padding: .3rem .7rem; background: #fafafa; }
#scale { display: flex; flex-wrap: wrap; gap: .4rem; margin: 1rem 0; }
#scale button { font: inherit; padding: .35rem .8rem; border: 1px solid #888; border-radius: 4px; background: #fff; }
#scale button.chosen { background: #1f5fbf; color: #fff; border-color: #1f5fbf; }
kbd { font: .85em ui-monospace, monospace; border: 1px solid #aaa; border-radius: 3px; padding: 0 .25em; }
textarea { width: 100%; font: inherit; }
#status { min-height: 1.4em; margin: .6rem 0; color: #1f5f1f; }
#status.warn { color: #a0330f; }
footer { color: #666; font-size: .85rem; margin-top: 2rem; }
"""

SCRIPT = r"""
(function (root) {
  "use strict";
  var QUOTE = /[",\r\n]/;

  // One CSV field as Python's csv writer (QUOTE_MINIMAL) writes it.
  function csvField(value) {
    var text = value === null || value === undefined ? "" : String(value);
    return QUOTE.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function csvLine(cells) {
    return cells.map(csvField).join(",") + "\r\n";
  }

  function column(sheet, name) {
    return name === null || name === undefined ? -1 : sheet.columns.indexOf(name);
  }

  function itemId(sheet, index) {
    return sheet.rows[index][column(sheet, sheet.id_column)];
  }

  // The sheet's CSV with this rater's ratings and notes: the header and every row in the sheet's order; a rated
  // row gets the scale value and the rater's name, an unrated one stays as the sheet had it (not rated).
  function buildCsv(sheet, state) {
    var ratingAt = column(sheet, sheet.rating_column);
    var raterAt = column(sheet, sheet.rater_column);
    var notesAt = column(sheet, sheet.notes_column);
    var rater = (state.rater || "").trim();
    var out = csvLine(sheet.columns);
    sheet.rows.forEach(function (cells, index) {
      var row = cells.slice();
      var id = itemId(sheet, index);
      var choice = state.ratings[id];
      if (choice !== undefined && choice !== null) {
        row[ratingAt] = String(sheet.scale[choice]);
        row[raterAt] = rater;
      }
      if (notesAt >= 0 && state.notes[id]) {
        row[notesAt] = state.notes[id];
      }
      out += csvLine(row);
    });
    return out;
  }

  // The key that rates each value: the value itself when every value is a whole number from 0 to 9, else its
  // position (1 to 9, then 0 for the tenth); a longer scale's later values are rated by clicking.
  function digitKeys(scale) {
    var direct = scale.every(function (v) {
      return typeof v === "number" && v % 1 === 0 && v >= 0 && v <= 9;
    });
    return scale.map(function (v, i) {
      if (direct) return String(v);
      if (i < 9) return String(i + 1);
      return i === 9 ? "0" : null;
    });
  }

  // What a key does. In a text field only Escape (leave it) and Ctrl+S (save) act; typing stays typing.
  function keyAction(key, keys, ctx) {
    ctx = ctx || {};
    if ((ctx.ctrl || ctx.meta) && (key === "s" || key === "S")) return { type: "save" };
    if (ctx.inField) return key === "Escape" ? { type: "leave" } : null;
    if (ctx.ctrl || ctx.meta || ctx.alt) return null;
    var at = keys.indexOf(key);
    if (at >= 0) return { type: "rate", choice: at };
    switch (key) {
      case "j": case "ArrowDown": case "ArrowRight": return { type: "move", by: 1 };
      case "k": case "ArrowUp": case "ArrowLeft": return { type: "move", by: -1 };
      case "g": case "Home": return { type: "go", to: 0 };
      case "G": case "End": return { type: "go", to: -1 };
      case "u": return { type: "unrated" };
      case "x": case "Backspace": case "Delete": return { type: "clear" };
      case "n": return { type: "focus", field: "notes" };
      case "r": return { type: "focus", field: "rater" };
      case "s": return { type: "save" };
      case "?": return { type: "help" };
    }
    return null;
  }

  function initialState() {
    return { index: 0, rater: "", ratings: {}, notes: {}, advance: true };
  }

  function copyState(state) {
    var ratings = {}, notes = {}, k;
    for (k in state.ratings) ratings[k] = state.ratings[k];
    for (k in state.notes) notes[k] = state.notes[k];
    return { index: state.index, rater: state.rater, ratings: ratings, notes: notes, advance: state.advance };
  }

  function clamp(index, n) {
    return Math.max(0, Math.min(n - 1, index));
  }

  // The state after an action (rate, clear, move, go, unrated); other actions leave it as it is.
  function step(sheet, state, action) {
    var next = copyState(state);
    var n = sheet.rows.length;
    var id = n ? itemId(sheet, state.index) : null;
    if (action.type === "rate" && id !== null) {
      next.ratings[id] = action.choice;
      if (state.advance) next.index = clamp(state.index + 1, n);
    } else if (action.type === "clear" && id !== null) {
      delete next.ratings[id];
    } else if (action.type === "move") {
      next.index = clamp(state.index + action.by, n);
    } else if (action.type === "go") {
      next.index = action.to < 0 ? n - 1 : clamp(action.to, n);
    } else if (action.type === "unrated") {
      for (var k = 1; k <= n; k++) {
        var at = (state.index + k) % n;
        if (next.ratings[itemId(sheet, at)] === undefined) { next.index = at; break; }
      }
    }
    return next;
  }

  function ratedCount(sheet, state) {
    var count = 0;
    for (var i = 0; i < sheet.rows.length; i++) if (state.ratings[itemId(sheet, i)] !== undefined) count++;
    return count;
  }

  // The saved file's name: the sheet's name and the rater's, in letters, digits, '-' and '_' only.
  function fileName(sheet, rater) {
    var slug = (rater || "").trim().replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "");
    return sheet.file_stem + (slug ? "." + slug : "") + ".csv";
  }

  function mount(doc, win, sheet) {
    var keys = digitKeys(sheet.scale);
    var storeKey = "lca-rating-page:" + sheet.sheet_id;
    var state = initialState();
    var el = function (id) { return doc.getElementById(id); };
    var status = el("status");

    function storage() {
      try { return win.localStorage; } catch (e) { return null; }
    }
    function persist() {
      var s = storage();
      if (s) { try { s.setItem(storeKey, JSON.stringify(state)); } catch (e) { /* full or refused: keep going */ } }
    }
    (function restore() {
      var s = storage(), saved = null;
      if (s) { try { saved = JSON.parse(s.getItem(storeKey) || "null"); } catch (e) { saved = null; } }
      if (saved && typeof saved === "object") {
        state.rater = String(saved.rater || "");
        state.advance = saved.advance !== false;
        for (var k in saved.ratings || {}) {
          var c = saved.ratings[k];
          if (typeof c === "number" && c >= 0 && c < sheet.scale.length) state.ratings[k] = c;
        }
        for (var j in saved.notes || {}) state.notes[j] = String(saved.notes[j]);
        state.index = clamp(Number(saved.index) || 0, sheet.rows.length);
      }
    })();

    function say(text, warn) {
      status.textContent = text;
      status.className = warn ? "warn" : "";
    }

    el("title").textContent = sheet.title;
    el("prompt").textContent = sheet.prompt;
    el("rater").value = state.rater;
    el("advance").checked = state.advance;
    var legend = el("scale-legend");
    // a value's label: the value, with its key in front when the key is not the value itself
    function label(i, after) {
      var v = String(sheet.scale[i]);
      return keys[i] !== null && keys[i] !== v ? keys[i] + after + v : v;
    }
    legend.textContent = "Scale (press the key to rate): " + sheet.scale.map(function (v, i) {
      return keys[i] === null ? String(v) + " (click)" : label(i, " = ");
    }).join(", ");
    var buttons = sheet.scale.map(function (v, i) {
      var b = doc.createElement("button");
      b.type = "button";
      b.textContent = label(i, ": ");
      b.addEventListener("click", function () { perform({ type: "rate", choice: i }); });
      el("scale").appendChild(b);
      return b;
    });

    function render() {
      var n = sheet.rows.length;
      if (!n) { el("position").textContent = "This sheet has no items."; return; }
      var row = sheet.rows[state.index];
      var id = itemId(sheet, state.index);
      el("position").textContent = "Item " + (state.index + 1) + " of " + n + " (" + id + "); rated " +
        ratedCount(sheet, state) + " of " + n;
      var fields = el("fields");
      while (fields.firstChild) fields.removeChild(fields.firstChild);
      sheet.shown.forEach(function (pair) {
        var box = doc.createElement("div"), label = doc.createElement("div"), text = doc.createElement("div");
        box.className = "field"; label.className = "field-label"; text.className = "field-text";
        label.textContent = pair[1];
        text.textContent = row[column(sheet, pair[0])];
        box.appendChild(label); box.appendChild(text); fields.appendChild(box);
      });
      buttons.forEach(function (b, i) { b.className = state.ratings[id] === i ? "chosen" : ""; });
      el("notes").value = state.notes[id] || "";
    }

    function save() {
      if (!state.rater.trim()) {
        say("Type your name in the Rater field first (press r), then save again.", true);
        el("rater").focus();
        return;
      }
      var text = buildCsv(sheet, state);
      var name = fileName(sheet, state.rater);
      var blob = new win.Blob([text], { type: "text/csv;charset=utf-8" });
      var url = win.URL.createObjectURL(blob);
      var a = doc.createElement("a");
      a.href = url;
      a.download = name;
      doc.body.appendChild(a);
      a.click();
      doc.body.removeChild(a);
      win.setTimeout(function () { if (win.URL.revokeObjectURL) win.URL.revokeObjectURL(url); }, 1000);
      var rated = ratedCount(sheet, state), left = sheet.rows.length - rated;
      say("Saved " + name + ": " + rated + " rated" + (left ? ", " + left + " not rated (saved blank)" : "") + ".",
        left > 0);
    }

    function perform(action) {
      if (action.type === "save") { save(); return; }
      if (action.type === "leave") { doc.activeElement && doc.activeElement.blur(); return; }
      if (action.type === "help") { el("help").hidden = !el("help").hidden; return; }
      if (action.type === "focus") { el(action.field).focus(); return; }
      state = step(sheet, state, action);
      persist();
      render();
    }

    doc.addEventListener("keydown", function (ev) {
      var t = ev.target || {};
      var tag = (t.tagName || "").toUpperCase();
      var inField = tag === "TEXTAREA" || (tag === "INPUT" && t.type !== "checkbox");
      var action = keyAction(ev.key, keys, { ctrl: ev.ctrlKey, meta: ev.metaKey, alt: ev.altKey, inField: inField });
      if (!action) return;
      ev.preventDefault();
      perform(action);
    });
    el("rater").addEventListener("input", function () { state.rater = el("rater").value; persist(); });
    el("advance").addEventListener("change", function () { state.advance = el("advance").checked; persist(); });
    el("notes").addEventListener("input", function () {
      var id = itemId(sheet, state.index), value = el("notes").value;
      if (value) state.notes[id] = value; else delete state.notes[id];
      persist();
    });
    el("save").addEventListener("click", save);
    render();
    return { state: function () { return state; }, perform: perform };
  }

  var api = {
    csvField: csvField, csvLine: csvLine, buildCsv: buildCsv, digitKeys: digitKeys, keyAction: keyAction,
    initialState: initialState, step: step, fileName: fileName, mount: mount
  };
  root.LCARatingPage = api;
  if (typeof document !== "undefined" && document.getElementById("lca-sheet")) {
    api.page = mount(document, root, JSON.parse(document.getElementById("lca-sheet").textContent));
  }
})(typeof window !== "undefined" ? window : globalThis);
"""
