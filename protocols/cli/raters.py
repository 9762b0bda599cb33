"""``lca raters export|import``: people as raters of a judged measure (docs/raters.md).

``export`` writes blinded rating sheets (items shuffled under a seed, the condition hidden) as a CSV and as one
offline HTML page, with the key (blind id -> item and condition) kept apart; the items come from a study run's
judged measure (the agent's answers in the run's logs, as the run's model raters saw them) or from an items
file. ``import`` reads filled sheets back (every problem one line naming the file, line and field; exit 2 and
nothing written), then runs the same agreement gate as a study run (``protocols.analysis.agreement``) and
writes the agreement record (JSON) and the imported ratings beside the key.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import protocols.cli.common as common
from lca.errors import LCAError, RecordFormatError
from lca.fileio import numbered_json_lines
from lca.provenance import code_version
from protocols.analysis.sheets import SheetRefused
from protocols.study.manifest import json_safe, write_json
from protocols.study.rubrics import judged_items

ITEM_FIELDS = ("item_id", "probe", "answer", "condition")
HUMAN_RECORD = "lca-human-agreement"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "raters",
        help="people as raters: blinded rating sheets (CSV and offline HTML) out, filled sheets in, the agreement gate",
        description="Export blinded rating sheets for people to fill, and import the filled sheets through the "
        "same agreement gate as a study's model raters (docs/raters.md).",
    )
    raters = p.add_subparsers(dest="raters_command", required=True, metavar="COMMAND")
    e = raters.add_parser(
        "export",
        help="write NAME.csv, NAME.html (for raters) and NAME.key.json (kept from them)",
        description="Blinded rating sheets of a study run's judged measure (STUDY: the study id, its document, or "
        "a run directory) or of an items file (--items: JSONL or CSV with item_id, probe, answer, condition). "
        "Items are shuffled under the seed and shown under opaque ids; the condition is only in the key.",
    )
    e.add_argument("study", nargs="?", metavar="STUDY", help="study id, study document or run directory")
    e.add_argument("--measure", help="the judged measure (default: the study's only one)")
    e.add_argument("--run", dest="run_id", help="the run id (default: the latest)")
    e.add_argument("--studies", default="results/studies", help="where study runs are (default: results/studies)")
    e.add_argument("--items", help="an items file instead of a study run (JSONL or CSV)")
    e.add_argument("--scale", help="with --items: the scale, comma-separated (e.g. 1,2,3,4,5 or yes,no)")
    e.add_argument("--level", choices=["nominal", "ordinal", "interval"], help="with --items: the scale's level")
    e.add_argument("--prompt", help="with --items: the rubric raters read")
    e.add_argument("--prompt-file", help="with --items: the rubric, from a file")
    e.add_argument("--threshold", type=float, help="with --items: the gate's alpha threshold (default 0.667)")
    e.add_argument("--name", help="the sheet's file name (default: the measure id, or the items file's name)")
    e.add_argument("--out", help="the folder (default: RUN_DIR/sheets, or sheets/ beside the items file)")
    e.add_argument("--seed", type=int, help="the blinding seed (default: the run's seed, or 0)")
    e.add_argument("--force", action="store_true", help="replace an existing key (raters' sheets then mismatch)")
    e.set_defaults(func=cmd_export)

    i = raters.add_parser(
        "import",
        help="read filled sheets, check them, run the agreement gate (exit 1 when it refuses)",
        description="Read filled rating sheets against their key. Any problem (unknown item, a missing or "
        "out-of-scale rating, a rating without a rater, a rater twice on an item, a missing column) is printed "
        "one line each, naming file, line and field, and nothing is written (exit 2). Otherwise Krippendorff's "
        "alpha with its interval, the raw agreement and the leaning are computed as for a study's raters and "
        "written to NAME.agreement.json with the ratings (NAME.ratings.csv); exit 1 when the gate refuses.",
    )
    i.add_argument("sheets", nargs="+", metavar="SHEET", help="filled sheets (CSV), one or more")
    i.add_argument("--key", required=True, help="the sheets' key (NAME.key.json)")
    i.add_argument("--out", help="the folder for the record (default: the key's folder)")
    i.add_argument("--level", choices=["nominal", "ordinal", "interval"], help="override the key's level")
    i.add_argument("--threshold", type=float, help="override the key's threshold")
    i.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for alpha's interval")
    i.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    i.add_argument("--json", action="store_true", help="print the agreement record as JSON")
    i.set_defaults(func=cmd_import)


# ---- export -----------------------------------------------------------------------------------------
def cmd_export(args: argparse.Namespace) -> int:
    # protocols.analysis and protocols.report load pandas, pyarrow and krippendorff: imported where used
    from protocols.analysis.raters import export_rating_sheet, key_path_for, page_path_for

    if bool(args.study) == bool(args.items):
        raise LCAError("lca raters export: give a study (id, document or run directory) or --items FILE, not both")
    source = _from_items(args) if args.items else _from_run(args)
    out = Path(args.out) if args.out else source["out"]
    sheet = out / f"{source['name']}.csv"
    key = key_path_for(sheet)
    if key.exists() and not args.force:
        raise LCAError(
            f"{key} exists: raters may be filling sheets made with it; pass --force to replace it (and re-send "
            "the new sheets), or --out another folder"
        )
    if not source["items"]:
        raise LCAError(f"no items to rate in {source['origin']}")
    fields = {k: source[k] for k in ("measure", "level", "threshold", "origin", "study_id", "run_id", "protocol")}
    export_rating_sheet(
        source["items"],
        sheet,
        source["seed"],
        scale=source["scale"],
        prompt=source["prompt"],
        title=f"Rating: {source['measure']}",
        key_fields=fields,
    )
    n = len(source["items"])
    conditions = len({item.condition for item in source["items"]})
    common.show(
        f"{n} item(s) from {conditions} condition(s), shuffled (seed {source['seed']}) with the condition hidden:\n"
        f"  for raters: {sheet} and {page_path_for(sheet)} (offline page; saves the same CSV)\n"
        f"  keep from raters: {key}\n"
        f"  then: lca raters import FILLED.csv... --key {key}"
    )
    return 0


def _from_run(args: argparse.Namespace) -> dict[str, Any]:
    from protocols.report.run import load_run

    study, run_id, studies = args.study, args.run_id, args.studies
    folder = Path(study)
    if folder.is_dir() and (folder / "run.json").is_file():  # a run directory: STUDIES/STUDY/RUN_ID
        run_id, studies = folder.name, str(folder.parent.parent)
        study = json.loads((folder / "run.json").read_text(encoding="utf-8")).get("study_id") or folder.parent.name
    run = load_run(study, run_id, studies)
    judged = {m.id: m for m in run.study.judged_measures()}
    if not judged:
        raise LCAError(f"study '{run.study_id}' has no judged measure to rate")
    if args.measure is None and len(judged) > 1:
        raise LCAError(
            f"study '{run.study_id}' has several judged measures; name one with --measure: {', '.join(judged)}"
        )
    measure_id = args.measure or next(iter(judged))
    if measure_id not in judged:
        raise LCAError(f"'{measure_id}' is not a judged measure of study '{run.study_id}': {', '.join(judged)}")
    measure = judged[measure_id]
    if any(getattr(args, flag) is not None for flag in ("scale", "level", "prompt", "prompt_file", "threshold")):
        raise LCAError("--scale, --level, --prompt and --threshold are the study's own for a run; they go with --items")
    locations = [h.location for h in run.logs.get(measure.protocol, ()) if h.location]
    if not locations:
        raise LCAError(f"run {run.run_dir} has no logs of protocol '{measure.protocol}' (measure '{measure.id}')")
    items, _ = judged_items(measure, locations)  # what the model raters are shown, so the sheets match
    seed = args.seed if args.seed is not None else int(run.manifest.get("seed_used", run.study.seeds[0]))
    return {
        "items": items,
        "name": args.name or measure.id,
        "out": run.run_dir / "sheets",
        "seed": seed,
        "scale": list(measure.scale),
        "level": measure.level,
        "threshold": measure.agreement_threshold,
        "prompt": measure.rater_panel.prompt,
        "measure": measure.id,
        "origin": f"run {run.run_dir}",
        "study_id": run.study_id,
        "run_id": run.run_id,
        "protocol": measure.protocol,
    }


def _from_items(args: argparse.Namespace) -> dict[str, Any]:
    path = Path(args.items)
    if args.measure or args.run_id:
        raise LCAError("--measure and --run name a study run's measure; with --items use --name")
    if not args.scale:
        raise LCAError("--items needs --scale (comma-separated values, e.g. 1,2,3,4,5)")
    scale = [_scale_cell(v) for v in args.scale.split(",") if v.strip()]
    if len(scale) < 2 or len(set(scale)) != len(scale):
        raise LCAError(f"--scale needs at least two distinct values, got {scale}")
    numeric = all(isinstance(v, (int, float)) for v in scale)
    level = args.level or ("ordinal" if numeric else "nominal")
    if level != "nominal" and not numeric:
        raise LCAError(f"an {level} scale takes numbers, got {scale}")
    if args.prompt and args.prompt_file:
        raise LCAError("give --prompt or --prompt-file, not both")
    prompt = Path(args.prompt_file).read_text(encoding="utf-8") if args.prompt_file else (args.prompt or "")
    if not prompt.strip():
        raise LCAError("--items needs the rubric raters read: --prompt TEXT or --prompt-file FILE")
    threshold = 0.667 if args.threshold is None else args.threshold
    if not 0 < threshold <= 1:
        raise LCAError(f"--threshold {threshold} must be in (0, 1]")
    name = args.name or path.stem
    return {
        "items": read_items(path),
        "name": name,
        "out": path.parent / "sheets",
        "seed": 0 if args.seed is None else args.seed,
        "scale": scale,
        "level": level,
        "threshold": threshold,
        "prompt": prompt,
        "measure": name,
        "origin": str(path),
        "study_id": None,
        "run_id": None,
        "protocol": None,
    }


def _scale_cell(text: str) -> Any:
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_items(path: Path) -> list[Any]:
    """Rating items from a JSONL file (one object a line) or a CSV with a header; each needs item_id, probe,
    answer and condition. Errors name the file, line and field."""
    from protocols.analysis.raters import RatingItem, as_items

    records: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            line = 2
            for row in reader:
                records.append((line, row))
                line = reader.line_num + 1
    else:
        for n, record in numbered_json_lines(path.read_text(encoding="utf-8"), str(path)):
            if not isinstance(record, dict):
                raise RecordFormatError("expected a JSON object", path=str(path), line=n)
            records.append((n, record))
    items = []
    for line, record in records:
        for name in ITEM_FIELDS:
            if record.get(name) in (None, ""):
                raise RecordFormatError("missing or empty", path=str(path), line=line, field=name)
        items.append(RatingItem(*(str(record[name]) for name in ITEM_FIELDS)))
    return as_items(items)


# ---- import -----------------------------------------------------------------------------------------
def cmd_import(args: argparse.Namespace) -> int:
    try:
        record, frame = human_agreement(
            args.sheets, args.key, level=args.level, threshold=args.threshold, resamples=args.resamples, seed=args.seed
        )
    except SheetRefused as refused:
        for line in refused.lines():
            common.print_error(line)
        common.print_error(f"nothing imported: {len(refused.problems)} problem(s) in the sheet(s)")
        return common.USAGE_ERROR
    key = Path(args.key)
    stem = key.name.removesuffix(".key.json") if key.name.endswith(".key.json") else key.stem
    out = Path(args.out) if args.out else key.parent
    out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out / f"{stem}.agreement.json", out / f"{stem}.ratings.csv"
    record["files"] = {"agreement": str(json_path), "ratings": str(csv_path)}
    frame.to_csv(
        csv_path, index=False, columns=["sheet_item_id", "item", "condition", "rater", "value", "notes", "source"]
    )
    write_json(json_path, record)
    if args.json:
        print(json.dumps(json_safe(record), indent=2, ensure_ascii=False))
    else:
        for line in summary_lines(record):
            common.show(line)
    return 1 if record["refused"] else 0


def human_agreement(
    sheets: list[str],
    key_path: str,
    *,
    level: str | None = None,
    threshold: float | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[dict[str, Any], Any]:
    """The agreement record of filled sheets (the same gate as a study's model raters) and their ratings
    frame; ``SheetRefused`` when any sheet holds a problem (nothing is computed then)."""
    from protocols.analysis.agreement import DEFAULT_THRESHOLD, AgreementTooLow, agreement
    from protocols.analysis.raters import import_ratings, read_key

    key = read_key(key_path)
    frame = import_ratings(sheets, key_path)
    scale = key["scale"]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scale)
    level = level or key.get("level") or ("ordinal" if numeric else "nominal")
    threshold = threshold if threshold is not None else key.get("threshold") or DEFAULT_THRESHOLD
    measure = str(key.get("measure") or Path(key_path).name.removesuffix(".key.json"))
    report = agreement(
        frame[["item", "rater", "value", "condition"]],
        level,
        threshold,
        resamples,
        seed,
        measure=measure,
        scale=tuple(scale),
    )
    counts = frame.groupby("rater").size().to_dict() if len(frame) else {}
    record = {
        "format": HUMAN_RECORD,
        **report.to_dict(),
        "refused": not report.passes,
        "reason": None if report.passes else str(AgreementTooLow(report)),
        "raters": {name: {"kind": "person", "ratings": int(n)} for name, n in sorted(counts.items())},
        "n_ratings": len(frame),
        "items_in_key": len(key["items"]),
        "items_rated": int(frame["item"].nunique()) if len(frame) else 0,
        "scale": scale,
        "key": str(key_path),
        "sheets": [str(s) for s in sheets],
        "study_id": key.get("study_id"),
        "run_id": key.get("run_id"),
        "code_version": code_version(),
    }
    return record, frame


def summary_lines(record: dict[str, Any]) -> list[str]:
    """The agreement record in a few lines: who rated what, alpha and its interval, raw agreement against
    chance, the leaning, the gate's verdict and the files."""

    def num(value: Any) -> str:
        return "undefined" if value is None or value != value else f"{value:.3f}"

    low, high = record["alpha_ci"]
    raters = ", ".join(f"{name} ({r['ratings']})" for name, r in record["raters"].items()) or "none"
    lines = [
        f"measure {record['measure']} ({record['level']}, scale {record['scale']}): {len(record['raters'])} rater(s): "
        f"{raters}; {record['n_items']} of {record['items_in_key']} item(s) rated by two or more",
        f"alpha {num(record['alpha'])} (95% CI {num(low)} to {num(high)}); raw agreement "
        f"{num(record['raw_agreement'])} against {num(record['expected_agreement'])} expected by chance",
        "leaning: " + (", ".join(record["leaning"]) or "none"),
    ]
    if record["refused"]:
        lines.append(f"gate: REFUSED: {record['reason']}")
    else:
        lines.append(f"gate: passes (alpha at or above {record['threshold']:g})")
    files = record.get("files") or {}
    if files:
        lines.append(f"written: {files['agreement']}, {files['ratings']}")
    return lines
