"""Filled rating sheets read back, checked whole: every problem found, none imported until there are none.

A rating sheet is a CSV a person fills in (``protocols.analysis.raters`` writes the judged measures' sheets,
``protocols.audit`` the prevented-mistake audit's): one row per item with an id column, a rating, the rater's
name and free notes. ``read_filled`` reads any number of them against the ids and the scale of their key and
returns the ratings, or raises ``SheetRefused`` holding one ``RecordFormatError`` per problem, each naming the
file, the line the record starts on (and the spreadsheet row when an earlier answer spans lines) and the field.
Nothing is half-imported: a caller writes its outputs only after ``read_filled`` returned.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError

NOTES = "notes"


@dataclass(frozen=True)
class SheetColumns:
    """The columns a filled sheet must have: the item's id, the rating, the rater's name (and optional notes)."""

    item: str
    rating: str = "rating"
    rater: str = "rater"
    notes: str = NOTES

    @property
    def required(self) -> tuple[str, ...]:
        return (self.item, self.rating, self.rater)


@dataclass(frozen=True)
class FilledRating:
    """One rating read from a sheet: the item's id as the sheet shows it, the rater, the value on the scale."""

    item: str
    rater: str
    value: Any
    notes: str
    source: str  # "FILE, line N": where the record starts


class SheetRefused(LCAError):
    """The sheets hold problems; ``problems`` names each (file, line, field). Nothing was imported."""

    def __init__(self, problems: Sequence[RecordFormatError]) -> None:
        self.problems = tuple(problems)
        first = str(self.problems[0])
        rest = [str(p) for p in self.problems[1:]]
        more = f" (and {len(rest)} more: " + "; ".join(rest) + ")" if rest else ""
        super().__init__(f"rating sheet refused: {first}{more}")

    def lines(self) -> list[str]:
        """One line per problem, in the order found."""
        return [str(p) for p in self.problems]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def scale_value(text: str, scale: Sequence[Any]) -> Any:
    """The scale value a cell names, or None. Numbers compare as numbers (``4`` and ``4.0`` are 4)."""
    for allowed in scale:
        if is_number(allowed):
            try:
                if float(text) == allowed:
                    return allowed
            except ValueError:
                continue
        elif text == str(allowed):
            return allowed
    return None


def read_filled(
    paths: Sequence[str | Path],
    *,
    columns: SheetColumns,
    known: Collection[str],
    scale: Sequence[Any],
    value_of: Callable[[str, Sequence[Any]], Any] = scale_value,
) -> list[FilledRating]:
    """The ratings of filled sheets, or ``SheetRefused`` naming every problem: a missing column, an unknown or
    empty item id, a rating off the scale, a rating without a rater or a rater without a rating (a missing
    code), the same rater on an item twice (across files too; both places named), a file that is not UTF-8
    CSV or is given twice. A row with neither rating nor rater is "not rated" and skipped."""
    problems: list[RecordFormatError] = []
    ratings: list[FilledRating] = []
    first_seen: dict[tuple[str, str], str] = {}
    seen_files: dict[Path, str] = {}
    for path in map(Path, paths):
        resolved = path.resolve()
        if resolved in seen_files:
            problems.append(
                RecordFormatError(f"the same file is given twice (as {seen_files[resolved]})", path=str(path))
            )
            continue
        seen_files[resolved] = str(path)
        try:
            records = _records(path)
        except RecordFormatError as exc:
            problems.append(exc)
            continue
        header = records[0][2] if records else []
        absent = [c for c in columns.required if c not in header]
        if absent:
            problems.append(RecordFormatError("missing column(s)", path=str(path), line=1, field=", ".join(absent)))
            continue
        index = {name: header.index(name) for name in (*columns.required, columns.notes) if name in header}
        for line, row, cells in records[1:]:
            if not any(c.strip() for c in cells):
                continue
            got = {name: (cells[i].strip() if i < len(cells) else "") for name, i in index.items()}
            checked = _check_row(got, columns, known, scale, value_of)
            where = f"{path}, line {line}"
            if isinstance(checked, tuple):
                message, field = checked
            elif checked is None:
                continue  # not rated
            elif (checked.item, checked.rater) in first_seen:
                message = f"rater '{checked.rater}' rated '{checked.item}' again (first at {first_seen[(checked.item, checked.rater)]})"
                field = columns.rater
            else:
                first_seen[(checked.item, checked.rater)] = where
                ratings.append(FilledRating(checked.item, checked.rater, checked.value, checked.notes, where))
                continue
            shown_row = f"row {row}" if row != line else None
            problems.append(RecordFormatError(message, path=str(path), line=line, field=field, record=shown_row))
    if problems:
        raise SheetRefused(problems)
    return ratings


def _check_row(
    got: dict[str, str],
    columns: SheetColumns,
    known: Collection[str],
    scale: Sequence[Any],
    value_of: Callable[[str, Sequence[Any]], Any],
) -> FilledRating | tuple[str, str] | None:
    """A row's rating (its source still blank), None when it is not rated, or (problem, field)."""
    item, rating, rater = got[columns.item], got[columns.rating], got[columns.rater]
    if not item:
        return f"no {columns.item} (the item's id)", columns.item
    if item not in known:
        return f"unknown {columns.item} '{item}' (not in the key)", columns.item
    if not rating and not rater:
        return None
    if not rating:
        return f"rater '{rater}' left the rating of '{item}' empty", columns.rating
    if not rater:
        return f"the rating of '{item}' names no rater", columns.rater
    value = value_of(rating, scale)
    if value is None:
        return f"rating '{rating}' of '{item}' is not on the scale {list(scale)}", columns.rating
    return FilledRating(item, rater, value, got.get(columns.notes, ""), "")


def _records(path: Path) -> list[tuple[int, int, list[str]]]:
    """(line the record starts on, spreadsheet row, cells) for every record, the header first."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise RecordFormatError(f"cannot read: {(exc.strerror or str(exc)).lower()}", path=str(path)) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise RecordFormatError("not UTF-8 text", path=str(path), line=line) from None
    if not text.strip():
        raise RecordFormatError("empty file: no header row", path=str(path), line=1)
    reader = csv.reader(io.StringIO(text, newline=""))
    out: list[tuple[int, int, list[str]]] = []
    line = 1
    try:
        for row, cells in enumerate(reader, start=1):
            out.append((line, row, cells))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise RecordFormatError(f"not readable as CSV: {exc}", path=str(path), line=line) from None
    return out
