"""Temporal anchors: "two weeks ago", "last Saturday", "yesterday" read against the question's date,
absolute dates ("on 1 May, 2022") read as they stand, and a day without a year ("on 17 March") read as its
latest occurrence on or before the question's date.

A question that names a relative time points at a day; records dated near that day are more
likely its evidence. ``temporal_anchor`` turns the expression into a target date and a tolerance;
``anchor_weight`` gives a record's closeness to it in [0, 1]. ``asks_when`` and ``tells_time`` read the
form of a question and of a record: a question asking when is answered by a record that says when.
The ranking (``lca.retrieval``) and recall's floor read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "few": 3,
}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_AGO = re.compile(
    r"\b(\d+|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_LAST_WEEKDAY = re.compile(r"\b(?:last|this past|past)\s+(" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
_LAST_UNIT = re.compile(r"\b(?:in the |within the )?(?:last|past)\s+(week|weekend|month)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TemporalAnchor:
    """The days a time expression points at: ``target`` to ``span_days`` after it, all alike (a month is all
    of its days), closeness falling linearly to 0 at ``tolerance_days`` + 1 beyond either edge."""

    target: datetime
    tolerance_days: float
    expression: str
    span_days: float = 0.0


MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)  # the month names the anchor reads (recall's name reading skips them too)
_MONTH = "(" + "|".join(MONTHS) + ")"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH},? (\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},? (\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?!,?\s*\d{{4}})", re.IGNORECASE)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b(?!,?\s*\d{{4}})", re.IGNORECASE)


_TOLD_WITHIN = 6.0  # days after an event that a record may still tell of it ("last weekend")


def dated_anchor(question: str) -> TemporalAnchor | None:
    """The days an absolute date in ``question`` ("on 1 May, 2022", "May 8, 2022", "in July 2023") points at.

    Records tell of an event on its day or in the week after ("yesterday", "last weekend"), so a day's
    window is that day and the six after it, a month's every day of the month and the six after it, each
    day alike: a record from the last days of the month is as likely the evidence as one from its middle.
    """

    def day(year: str, month: str, number: str) -> datetime | None:
        try:
            return datetime(int(year), MONTHS.index(month.lower()) + 1, int(number))
        except ValueError:  # "31 June": no such day
            return None

    for pattern, order in ((_DAY_MONTH_YEAR, (3, 2, 1)), (_MONTH_DAY_YEAR, (3, 1, 2))):
        for match in pattern.finditer(question):
            moment = day(*(match.group(i) for i in order))
            if moment is not None:
                return TemporalAnchor(moment, 0.0, match.group(0), span_days=_TOLD_WITHIN)
    month = _MONTH_YEAR.search(question)
    first = day(month.group(2), month.group(1), "1") if month else None
    if month and first is not None:
        following = datetime(first.year + first.month // 12, first.month % 12 + 1, 1)
        return TemporalAnchor(first, 0.0, month.group(0), span_days=(following - first).days - 1 + _TOLD_WITHIN)
    return None


_COUNT = r"(?:\d+|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_SEASON = r"(?:summer|winter|spring|fall|autumn)"
_TELLS_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|the other day|a while (?:ago|back)"
    rf"|(?:last|this|next|this past|on) (?:night|morning|afternoon|evening|week(?:end)?|month|year|{_SEASON}"
    rf"|{'|'.join(_WEEKDAYS)})"
    rf"|{_COUNT} (?:days?|weeks?|months?|years?) (?:ago|back|now)"
    rf"|(?:for|in the (?:last|past)) {_COUNT} (?:days?|weeks?|months?|years?)"
    rf"|(?:in|since|on|early|late|mid|last|this|next) {_MONTH}|{_MONTH} \d{{1,2}}\b|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}"
    r"|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_ASKS_WHEN = re.compile(
    r"\b(?:when|how long|how many (?:days|weeks|months|years)|what (?:date|day|month|year|time of year))\b",
    re.IGNORECASE,
)


_ASKS_NOW = re.compile(
    r"\b(?:(?<!\bfor )now(?! that\b)|these days|nowadays|currently|current|at the moment|at present|any ?more"
    r"|in the end|latest)\b",
    re.IGNORECASE,
)


def asks_now(question: str) -> bool:
    """Whether ``question`` asks how things stand now ("What do we use now?", "... these days", "in the end",
    "the current draft"): of two turns about it, the later one says how they stand."""
    return _ASKS_NOW.search(question) is not None


def tells_time(text: str) -> bool:
    """Whether ``text`` says when something happened or how long ago: "yesterday", "last weekend", "two years
    ago", "for 4 years", "in May", "2022". Such a record is what a question asking when needs."""
    return _TELLS_TIME.search(text) is not None


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a time: "When did ...", "How long ...", "What year ..."."""
    return _ASKS_WHEN.search(question) is not None


def temporal_anchor(question: str, asked: datetime | None) -> TemporalAnchor | None:
    """The day a time expression in ``question`` points at: a relative one ("two weeks ago") seen from
    ``asked``, else an absolute date (``dated_anchor``), which needs no question date."""
    if asked is None:
        return dated_anchor(question)
    day = asked.replace(hour=0, minute=0, second=0, microsecond=0)
    match = _AGO.search(question)
    if match:
        raw = match.group(1).lower().replace("a couple of", "couple of").replace("a few", "few")
        count = int(raw) if raw.isdigit() else _NUMBERS.get(raw, 1)
        days = count * _UNIT_DAYS[match.group(2).lower()]
        return TemporalAnchor(day - timedelta(days=days), max(1.0, 0.15 * days), match.group(0))
    if re.search(r"\byesterday\b", question, re.IGNORECASE):
        return TemporalAnchor(day - timedelta(days=1), 1.0, "yesterday")
    match = _LAST_WEEKDAY.search(question)
    if match:
        wanted = _WEEKDAYS.index(match.group(1).lower())
        back = (day.weekday() - wanted) % 7 or 7
        return TemporalAnchor(day - timedelta(days=back), 1.0, match.group(0))
    match = _LAST_UNIT.search(question)
    if match:
        unit = match.group(1).lower()
        if unit == "weekend":
            back = (day.weekday() - 5) % 7 or 7
            return TemporalAnchor(day - timedelta(days=back - 0.5), 1.5, match.group(0))
        if unit == "week":  # the previous week, give or take the week's edges
            return TemporalAnchor(day - timedelta(days=7), 4.5, match.group(0))
        return TemporalAnchor(day - timedelta(days=15), 15.0, match.group(0))  # within the past month
    return dated_anchor(question) or yearless_anchor(question, asked)


def yearless_anchor(question: str, asked: datetime) -> TemporalAnchor | None:
    """A day named without a year ("on April 10", "what was decided on 17 March?"): its latest occurrence on
    or before ``asked``, a window as ``dated_anchor`` gives a dated day."""
    for pattern, month_group, day_group in ((_MONTH_DAY, 1, 2), (_DAY_MONTH, 2, 1)):
        match = pattern.search(question)
        if match is None:
            continue
        month, number = match.group(month_group), match.group(day_group)
        for year in (asked.year, asked.year - 1):
            found = dated_anchor(f"{month} {number}, {year}")
            if found is not None and found.target <= asked:
                return replace(found, expression=match.group(0))
    return None


def anchor_weight(anchor: TemporalAnchor, moment: datetime | None) -> float:
    """1 on the anchor's days, falling linearly to 0 at one tolerance (+ 1 day) beyond them."""
    if moment is None:
        return 0.0
    offset = (moment.replace(hour=0, minute=0, second=0, microsecond=0) - anchor.target).total_seconds() / 86400
    distance = max(0.0, -offset, offset - anchor.span_days)
    return max(0.0, 1.0 - distance / (anchor.tolerance_days + 1.0))
