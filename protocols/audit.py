"""Blind-rating exports of what the substrate claims about itself, and the audit report from the ratings.

``lca audit prevented --sample N`` draws prevented-mistake events (each cites the transcript
span of the action it changed) and mixes them with control pairs (a memory and an assistant
action with no such claim), shuffled under a seed. Raters see only the memory, the turn before
the action and the action (``items.csv``, and the same sheet as an offline page, ``items.html``);
which items are claims is in a separate key file. ``lca audit import SHEET...`` reads the filled
sheets back (every problem one line naming file, line and field; nothing imported until there are
none) and writes the experiential-weight audit report (``report.json``, ``report.md``): the share
of claims raters confirm (a strict majority of the item's raters answered yes) with its Wilson
95% interval, set against the share they "confirm" on controls, the difference with Newcombe's
interval, and Krippendorff's alpha among the raters. The claims' excess over the controls is what
the experiential term's prevented-mistake increments are worth.
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lca.errors import LCAError, RecordFormatError
from lca.fileio import numbered_json_lines
from lca.ledger import Ledger
from lca.provenance import code_version
from lca.recall import EXPERIENCE_EVENT_WEIGHTS
from lca.types import EntryKind
from protocols.analysis.rating_page import PageSheet, write_page
from protocols.analysis.sheets import SheetColumns, read_filled
from protocols.study.manifest import write_json

QUESTION = (
    "Did the memory change what the assistant did in ACTION (compared with what it would likely have "
    "done without it)? Answer yes, no or unsure."
)
SCALE = ("yes", "no", "unsure")
CONFIRMS = "yes"
AUDIT_KIND = "prevented_mistake"
ITEM_COLUMNS = ("item", "memory", "before", "action", "question", "rating", "rater", "notes")
REPORT_FORMAT = "lca-experiential-weight-audit"


@dataclass(frozen=True)
class AuditItem:
    item: str
    memory_text: str
    before: str
    action: str


def _memory_texts(substrate) -> dict[str, str]:
    """Memory bodies by id: the file on disk, else the last version the ledger recorded."""
    texts = {mid: f.body.strip() for mid, f in substrate.memory_files().items()}
    for mid, data in Ledger(substrate.home).state().memories.items():
        if mid not in texts and data.get("file"):
            texts[mid] = data["file"].split("\n---\n", 1)[-1].strip()
    return texts


def export_prevented_audit(
    substrate, *, sample: int, out_dir: Path, seed: int = 0, controls: float = 0.5
) -> dict[str, Any]:
    if sample < 1:
        raise LCAError("--sample must be at least 1")
    if not 0 <= controls < 1:
        raise LCAError("--controls must be in [0, 1)")
    rng = random.Random(seed)
    events = []
    if substrate.experience.path.exists():
        for line in substrate.experience.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                event = json.loads(line)
                if event["kind"] == "prevented_mistake":
                    events.append(event)
    if not events:
        raise LCAError(f"no prevented-mistake events in {substrate.experience.path}; nothing to audit")
    memories = _memory_texts(substrate)
    entries: dict[tuple[str, str], tuple[str, str]] = {}  # (session, entry) -> (previous turn, this turn)
    actions: list[tuple[str, str]] = []
    for session in substrate.transcript.session_ids():
        previous = ""
        for entry in substrate.transcript.read(session).entries:
            entries[(session, entry.id)] = (previous, entry.content)
            if entry.kind is EntryKind.ASSISTANT_TURN:
                actions.append((session, entry.id))
            if entry.kind not in (EntryKind.CHECKPOINT, EntryKind.HANDOFF):
                previous = entry.content
    claimed = rng.sample(events, min(sample, len(events)))
    rows, key = [], []
    for event in claimed:
        memory_id = event["target"].split(":", 1)[1]
        session, _, entry_id = event["span"].partition("#")
        if memory_id not in memories or (session, entry_id) not in entries:
            key.append({"event": event, "status": "unresolvable: memory or span no longer found"})
            continue
        before, action = entries[(session, entry_id)]
        rows.append(("claim", memory_id, session, entry_id, memories[memory_id], before, action, event))
    claimed_pairs = {(e["target"], e["span"]) for e in events}
    n_controls = round(len(rows) * controls / (1 - controls)) if controls else 0
    pool = [
        (mid, s, e)
        for mid in sorted(memories)
        for s, e in actions
        if (f"memory:{mid}", f"{s}#{e}") not in claimed_pairs
    ]
    for mid, session, entry_id in rng.sample(pool, min(n_controls, len(pool))):
        before, action = entries[(session, entry_id)]
        rows.append(("control", mid, session, entry_id, memories[mid], before, action, None))
    rng.shuffle(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = []
    for number, (kind, mid, session, entry_id, text, before, action, event) in enumerate(rows, 1):
        item = f"item-{number:03d}"
        items.append(AuditItem(item, text, before, action))
        key.append({"item": item, "kind": kind, "memory": mid, "span": f"{session}#{entry_id}", "event": event})
    sheet_rows = tuple((it.item, it.memory_text, it.before, it.action, QUESTION, "", "", "") for it in items)
    with open(out_dir / "items.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(ITEM_COLUMNS)
        writer.writerows(sheet_rows)
    _write_page(out_dir / "items.html", sheet_rows)
    with open(out_dir / "key.jsonl", "w", encoding="utf-8") as handle:
        for row in key:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    manifest = {
        "audit": AUDIT_KIND,
        "store": str(substrate.home),
        "code_version": code_version(),
        "seed": seed,
        "events_available": len(events),
        "claims": sum(1 for r in rows if r[0] == "claim"),
        "controls": sum(1 for r in rows if r[0] == "control"),
        "unresolvable": sum(1 for k in key if "status" in k),
        "question": QUESTION,
        "scale": list(SCALE),
        "files": {
            "items": "items.csv (give to raters)",
            "page": "items.html (the same sheet as an offline page; saves the CSV)",
            "key": "key.jsonl (keep from raters)",
        },
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def _write_page(path: Path, rows: tuple[tuple[str, ...], ...]) -> None:
    sheet = PageSheet(
        title="Audit: did the memory change the action?",
        prompt=QUESTION,
        scale=SCALE,
        columns=ITEM_COLUMNS,
        rows=rows,
        id_column="item",
        shown=(("memory", "Memory"), ("before", "The turn before"), ("action", "Action")),
        file_stem="items",
    )
    write_page(sheet, path)


# ---- the ratings back: the experiential-weight audit report ------------------------------------------
def _audit_value(text: str, scale) -> str | None:
    """yes, no or unsure, in any case."""
    word = text.strip().lower()
    return word if word in scale else None


def read_audit_key(out_dir: Path) -> tuple[dict[str, dict[str, Any]], int, dict[str, Any]]:
    """The rated items of an audit folder by id (kind, memory, span), the count of unresolvable claims, and
    the export's manifest."""
    key_path, manifest_path = out_dir / "key.jsonl", out_dir / "manifest.json"
    if not key_path.is_file():
        raise LCAError(f"no key.jsonl in {out_dir}: give the folder `lca audit prevented` wrote (--dir)")
    items: dict[str, dict[str, Any]] = {}
    unresolvable = 0
    for n, row in numbered_json_lines(key_path.read_text(encoding="utf-8"), str(key_path)):
        if "status" in row:
            unresolvable += 1
        elif row.get("kind") in ("claim", "control") and row.get("item"):
            items[str(row["item"])] = row
        else:
            raise RecordFormatError("expected an item with kind claim or control", path=str(key_path), line=n)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    return items, unresolvable, manifest


def import_prevented_audit(
    out_dir: Path,
    sheets: list[str | Path],
    *,
    threshold: float | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The experiential-weight audit report from filled sheets of ``out_dir``'s export, written there as
    ``report.json`` and ``report.md``. Any problem in a sheet refuses the import (``SheetRefused``, one problem
    per file, line and field) and nothing is written."""
    # the statistics (krippendorff, scipy, statsmodels) are slow to load: only the import side needs them
    from protocols.analysis.agreement import DEFAULT_THRESHOLD, agreement
    from protocols.analysis.stats import proportion_difference_interval

    out_dir = Path(out_dir)
    items, unresolvable, manifest = read_audit_key(out_dir)
    filled = read_filled(sheets, columns=SheetColumns(item="item"), known=items, scale=SCALE, value_of=_audit_value)
    frame = pd.DataFrame(
        [{"item": r.item, "rater": r.rater, "value": r.value, "condition": items[r.item]["kind"]} for r in filled],
        columns=["item", "rater", "value", "condition"],
    )
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    report = agreement(frame, "nominal", threshold, resamples, seed, measure=AUDIT_KIND, scale=SCALE)
    weight = EXPERIENCE_EVENT_WEIGHTS.get(AUDIT_KIND)
    claims, controls = _confirmed(frame, "claim"), _confirmed(frame, "control")
    low, high = proportion_difference_interval(
        claims["confirmed"], claims["rated"], controls["confirmed"], controls["rated"]
    )
    excess = claims["fraction"] - controls["fraction"] if claims["rated"] and controls["rated"] else math.nan
    raters = frame.groupby("rater").size().to_dict() if len(frame) else {}
    record = {
        "format": REPORT_FORMAT,
        "audit": manifest.get("audit", AUDIT_KIND),
        "question": QUESTION,
        "scale": list(SCALE),
        "confirmed_means": "a strict majority of the item's raters answered yes (unsure is not yes)",
        "claims": claims,
        "controls": controls,
        "excess": {"difference": excess, "ci": [low, high], "method": "Newcombe hybrid score, 95%"},
        "agreement": {**report.to_dict(), "refused": not report.passes},
        "raters": {name: {"kind": "person", "ratings": int(n)} for name, n in sorted(raters.items())},
        "items_in_sheet": len(items),
        "unresolvable_claims": unresolvable,
        "experience_weight": weight,
        "export": {k: manifest.get(k) for k in ("store", "seed", "code_version", "events_available")},
        "sheets": [str(s) for s in sheets],
        "code_version": code_version(),
    }
    record["verdict"] = _verdict(record)
    record["files"] = {"json": str(out_dir / "report.json"), "markdown": str(out_dir / "report.md")}
    write_json(out_dir / "report.json", record)
    (out_dir / "report.md").write_text(audit_markdown(record), encoding="utf-8")
    return record


def _confirmed(frame: pd.DataFrame, kind: str) -> dict[str, Any]:
    """Of one kind's items rated by anyone: how many a strict majority of their raters confirmed, the share
    with its Wilson interval, the unanimous ones, and the pooled share of yes among the ratings."""
    from protocols.analysis.stats import proportion_interval

    rows = frame[frame["condition"] == kind]
    confirmed = unanimous = 0
    by_item = rows.groupby("item")["value"]
    for _, values in by_item:
        yes = int((values == CONFIRMS).sum())
        confirmed += yes * 2 > len(values)
        unanimous += yes == len(values)
    rated = int(by_item.ngroups) if len(rows) else 0
    low, high = proportion_interval(confirmed, rated)
    return {
        "rated": rated,
        "confirmed": confirmed,
        "fraction": confirmed / rated if rated else math.nan,
        "ci": [low, high],
        "method": "Wilson score, 95%",
        "unanimous": unanimous,
        "ratings": int(len(rows)),
        "yes_share_of_ratings": float((rows["value"] == CONFIRMS).mean()) if len(rows) else math.nan,
        "raters_per_item": float(by_item.size().mean()) if len(rows) else math.nan,
    }


def _verdict(record: dict[str, Any]) -> str:
    claims, controls, agree = record["claims"], record["controls"], record["agreement"]
    if not claims["rated"]:
        return "no claim was rated: the audit says nothing yet"
    parts = [
        f"raters confirm {_pct(claims['fraction'])} of prevented-mistake claims "
        f"({claims['confirmed']} of {claims['rated']}; 95% CI {_pct(claims['ci'][0])} to {_pct(claims['ci'][1])})"
    ]
    if controls["rated"]:
        parts.append(
            f"against {_pct(controls['fraction'])} of controls ({controls['confirmed']} of {controls['rated']})"
        )
    if agree["refused"]:
        parts.append(
            f"but the raters' agreement does not reach the threshold (alpha {_num(agree['alpha'])}, "
            f"threshold {agree['threshold']:g}): the confirmations are not a reliable measure"
        )
    else:
        parts.append(f"with agreement alpha {_num(agree['alpha'])} (threshold {agree['threshold']:g})")
    return "; ".join(parts)


def _pct(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3f}"


def audit_markdown(record: dict[str, Any]) -> str:
    """The report as markdown: the question, the fractions with intervals, the excess, the agreement."""
    agree = record["agreement"]
    low, high = agree["alpha_ci"]
    lines = [
        "# Experiential-weight audit: prevented mistakes",
        "",
        f"Question put to raters (blind to which items are claims): *{record['question']}*",
        "",
        f"**{record['verdict']}.**",
        "",
        "| items | rated | confirmed | share | 95% CI (Wilson) | unanimous yes | yes among ratings |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("claims", "controls"):
        row = record[name]
        lines.append(
            f"| {name} | {row['rated']} | {row['confirmed']} | {_pct(row['fraction'])} | {_pct(row['ci'][0])} to "
            f"{_pct(row['ci'][1])} | {row['unanimous']} | {_pct(row['yes_share_of_ratings'])} |"
        )
    excess = record["excess"]
    lines += [
        "",
        f"Claims minus controls: {_pct(excess['difference'])} (95% CI {_pct(excess['ci'][0])} to "
        f"{_pct(excess['ci'][1])}, {excess['method']}). Each prevented-mistake event adds "
        f"{record['experience_weight']:g} to a memory's experience evidence (E); this excess is what that increment "
        "is worth.",
        "",
        f"Agreement among raters: Krippendorff's alpha {_num(agree['alpha'])} (95% CI {_num(low)} to {_num(high)}, "
        f"nominal, {agree['n_items']} items rated by two or more, {agree['n_raters']} raters); raw agreement "
        f"{_num(agree['raw_agreement'])} against {_num(agree['expected_agreement'])} by chance; "
        + ("**below the threshold**" if agree["refused"] else "meets the threshold")
        + f" {agree['threshold']:g}.",
        "",
        "Raters: "
        + (", ".join(f"{n} ({r['ratings']} ratings)" for n, r in record["raters"].items()) or "none")
        + f". Items in the sheet: {record['items_in_sheet']}; claims that could not be shown "
        f"(memory or span gone): {record['unresolvable_claims']}.",
        "",
        f"Export: store {record['export']['store']}, seed {record['export']['seed']}, code "
        f"{record['export']['code_version']}; this report: code {record['code_version']}.",
        "",
    ]
    return "\n".join(lines)
