"""The rater panel of a judged measure: LLM raters (``rater_*`` roles) and human raters, always blind.

A rater sees the probe and the answer, never the condition that produced it, and each rater sees the items in
its own seeded order, so neither the condition's name nor the order of a run can steer a score. LLM ratings
are parsed strictly (an unreadable reply is a missing rating with its raw text, never a guess); human ratings
come back through a blinded CSV sheet whose key is kept apart (docs/raters.md gives the format). The ratings
frame (``item``, ``rater``, ``value``, ``condition``) is what ``protocols.analysis.agreement`` reads.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from lca.errors import LCAError, RecordFormatError
from lca.ports import TextGenerator
from protocols.analysis.agreement import LEVELS
from protocols.analysis.sheets import SheetColumns, read_filled

RATER_PREFIX = "rater_"
RATER_ROLE = re.compile(r"rater_[a-z0-9_]+")
SHEET_COLUMNS = ("sheet_item_id", "probe", "answer", "rating", "rater", "notes")
KEY_FORMAT = "lca-rating-key"
FRAME_COLUMNS = ("item", "rater", "value", "condition", "raw", "problem")
RATING_MAX_TOKENS = 32
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def is_rater_role(name: str) -> bool:
    """``rater_<name>`` (lower-case letters, digits, underscores): any number of raters, each its own role."""
    return bool(RATER_ROLE.fullmatch(name))


@dataclass(frozen=True)
class RatingItem:
    """One answer to be rated. ``condition`` stays with the framework; a rater never sees it."""

    item_id: str
    probe: str
    answer: str
    condition: str


@dataclass(frozen=True)
class BlindItem:
    """What a rater is shown: an opaque id, the probe and the answer."""

    blind_id: str
    probe: str
    answer: str


@dataclass(frozen=True)
class BlindSet:
    """Blinded items and the hidden key (blind id -> item id and condition). ``order_for(rater)`` is that
    rater's own seeded order."""

    items: tuple[BlindItem, ...]
    key: Mapping[str, tuple[str, str]] = field(repr=False)
    seed: int

    def order_for(self, rater: str) -> tuple[BlindItem, ...]:
        items = list(self.items)
        random.Random(f"{self.seed}:{rater}").shuffle(items)
        return tuple(items)

    def unblind(self, blind_id: str) -> tuple[str, str]:
        """(item id, condition) of a blind id."""
        try:
            return self.key[blind_id]
        except KeyError:
            raise LCAError(f"unknown blind id '{blind_id}'") from None


@dataclass(frozen=True)
class RaterDecoding:
    """One LLM rater's own prompt (None: the panel's) and decoding settings; ``seed`` None is the run's seed.
    A rater is its model with these: two raters of one model differ only when these do."""

    prompt: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = RATING_MAX_TOKENS


@dataclass(frozen=True)
class RaterPanel:
    """The raters (``rater_*`` role names), the rating prompt, the scale and its level of measurement, and
    per rater its own prompt and decoding settings (``decoding``; a rater not named there uses the panel's
    prompt at temperature 0 with the run's seed)."""

    raters: tuple[str, ...]
    prompt: str
    scale: tuple[Any, ...]
    level: str
    decoding: Mapping[str, RaterDecoding] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raters", tuple(self.raters))
        object.__setattr__(self, "scale", tuple(self.scale))
        object.__setattr__(self, "decoding", dict(self.decoding))
        strangers = [r for r in self.decoding if r not in self.raters]
        if strangers:
            raise LCAError(f"decoding settings for '{strangers[0]}', which is not on the panel {list(self.raters)}")
        bad = [r for r in self.raters if not is_rater_role(r)]
        if bad:
            raise LCAError(f"rater '{bad[0]}' is not a rater role; rater roles are named rater_<name>")
        if len(set(self.raters)) != len(self.raters) or len(self.raters) < 2:
            raise LCAError(f"a rater panel needs at least two distinct raters, got {list(self.raters)}")
        if self.level not in LEVELS:
            raise LCAError(f"level '{self.level}' is not one of {', '.join(LEVELS)}")
        if len(self.scale) < 2 or len(set(self.scale)) != len(self.scale):
            raise LCAError(f"the scale needs at least two distinct values, got {list(self.scale)}")
        if self.level != "nominal" and not all(_is_number(v) for v in self.scale):
            raise LCAError(f"an {self.level} scale takes numbers, got {list(self.scale)}")
        if not self.prompt.strip():
            raise LCAError("the rater panel's prompt is empty")

    def decoding_for(self, rater: str) -> RaterDecoding:
        return self.decoding.get(rater) or RaterDecoding()

    def prompt_for(self, rater: str) -> str:
        """The rater's own prompt where it has one, else the panel's."""
        return self.decoding_for(rater).prompt or self.prompt

    def schema(self) -> dict[str, Any]:
        """The JSON schema a rater's reply must follow: ``{"rating": <a scale value>}``."""
        return {
            "type": "object",
            "properties": {"rating": {"enum": list(self.scale)}},
            "required": ["rating"],
            "additionalProperties": False,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_items(records: Iterable[RatingItem | Mapping[str, Any]]) -> list[RatingItem]:
    """Rating items from records (mappings with item_id, probe, answer, condition); ids must be unique."""
    items = []
    for i, record in enumerate(records):
        if isinstance(record, RatingItem):
            items.append(record)
            continue
        missing = [k for k in ("item_id", "probe", "answer", "condition") if k not in record]
        if missing:
            raise LCAError(f"rating item {i} lacks {', '.join(missing)}")
        items.append(
            RatingItem(str(record["item_id"]), str(record["probe"]), str(record["answer"]), str(record["condition"]))
        )
    seen: set[str] = set()
    for item in items:
        if item.item_id in seen:
            raise LCAError(f"item id '{item.item_id}' appears twice among the rating items")
        seen.add(item.item_id)
    return items


def blind_items(items: Iterable[RatingItem | Mapping[str, Any]], seed: int) -> BlindSet:
    """The items without their condition, under opaque ids assigned in a seeded shuffle (so neither the id
    nor the position tells the condition or the run order); the key unblinds."""
    ordered = as_items(items)
    random.Random(f"{seed}:blind").shuffle(ordered)
    width = max(3, len(str(len(ordered))))
    blind, key = [], {}
    for n, item in enumerate(ordered, start=1):
        blind_id = f"s{n:0{width}d}"
        blind.append(BlindItem(blind_id, item.probe, item.answer))
        key[blind_id] = (item.item_id, item.condition)
    return BlindSet(tuple(blind), key, seed)


# ---- LLM raters -------------------------------------------------------------------------------------
def rating_messages(panel: RaterPanel, item: BlindItem, rater: str | None = None) -> list[dict[str, str]]:
    """The prompt a rater sees: its instruction (its own, else the panel's), the scale, the probe and the
    answer; nothing else."""
    scale = ", ".join(json.dumps(v) for v in panel.scale)
    prompt = panel.prompt if rater is None else panel.prompt_for(rater)
    system = (
        f"{prompt.strip()}\n\nRate on this scale: {scale}. "
        'Reply with one JSON object and nothing else: {"rating": <one value of the scale>}.'
    )
    user = f"Question:\n{item.probe}\n\nAnswer:\n{item.answer}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_rating(text: str, scale: Sequence[Any]) -> tuple[Any, str | None]:
    """(value, None) for a reply that is exactly ``{"rating": v}`` with v on the scale (a ```json fence
    allowed); else (None, why). Nothing is guessed from prose."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return None, "not a JSON object"
    if not isinstance(data, dict) or set(data) != {"rating"}:
        return None, 'not an object with exactly the key "rating"'
    value = data["rating"]
    for allowed in scale:
        same_kind = _is_number(value) and _is_number(allowed) or type(value) is type(allowed)
        if same_kind and value == allowed:
            return allowed, None
    return None, f"rating {value!r} is not on the scale {list(scale)}"


def _ask(
    generator: TextGenerator, messages: list[dict[str, str]], schema: dict[str, Any], seed: int, decoding: RaterDecoding
) -> str:
    """With the JSON schema where the generator takes one (constrained decoding), else without it; at the
    rater's own temperature, seed (else the run's) and token limit."""
    ask = partial(
        generator.generate,
        messages,
        max_tokens=decoding.max_tokens,
        temperature=decoding.temperature,
        seed=seed if decoding.seed is None else decoding.seed,
    )
    try:
        return ask(json_schema=schema)
    except TypeError:
        return ask()


def rate_with_models(
    panel: RaterPanel,
    items: Iterable[RatingItem | Mapping[str, Any]],
    generators: Mapping[str, TextGenerator],
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """Every rater of the panel rates every item, blind and in its own seeded order, with its own prompt and
    decoding settings (``panel.decoding``). The frame has one row per item and rater: ``value`` is NaN where
    the reply could not be read (``raw`` keeps the reply, ``problem`` says why), and ``condition`` is joined
    back from the key after rating."""
    missing = [r for r in panel.raters if r not in generators]
    if missing:
        raise LCAError(f"no model for rater role(s) {', '.join(missing)}; give each with --role {missing[0]}=MODEL")
    blind = blind_items(items, seed)
    schema = panel.schema()
    rows = []
    problem: str | None  # why the rating is missing; None when the reply was read
    for rater in panel.raters:
        generator = generators[rater]
        for item in blind.order_for(rater):
            try:
                raw = _ask(generator, rating_messages(panel, item, rater), schema, seed, panel.decoding_for(rater))
            except Exception as exc:  # one failed call is one missing rating, never a crashed panel
                raw, value, problem = "", None, f"the model failed: {type(exc).__name__}: {exc}"
            else:
                value, problem = parse_rating(raw, panel.scale)
            item_id, condition = blind.unblind(item.blind_id)
            rows.append(
                {
                    "item": item_id,
                    "rater": rater,
                    "value": math.nan if value is None else value,
                    "condition": condition,
                    "raw": raw,
                    "problem": problem,
                }
            )
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))


# ---- human raters -----------------------------------------------------------------------------------
def key_path_for(sheet_path: str | Path) -> Path:
    """Where the key of a rating sheet goes: beside it, ``NAME.key.json`` (kept from the raters)."""
    sheet_path = Path(sheet_path)
    return sheet_path.with_name(f"{sheet_path.stem}.key.json")


def page_path_for(sheet_path: str | Path) -> Path:
    """Where the sheet's offline HTML page goes: beside it, ``NAME.html``."""
    return Path(sheet_path).with_suffix(".html")


def export_rating_sheet(
    items: Iterable[RatingItem | Mapping[str, Any]],
    path: str | Path,
    seed: int,
    *,
    scale: Sequence[Any] | None = None,
    prompt: str = "",
    page: bool = True,
    title: str | None = None,
    key_fields: Mapping[str, Any] | None = None,
) -> tuple[Path, Path]:
    """A blinded CSV sheet (``SHEET_COLUMNS``; rating, rater and notes empty) in a seeded order, the same sheet
    as one offline HTML page (``page``; ``protocols.analysis.rating_page``) and the key file beside them (blind
    id -> item id and condition, the scale, the prompt and ``key_fields``, e.g. the measure's level). Returns
    the sheet's and the key's paths; the page is ``page_path_for(sheet)``."""
    if scale is None or len(scale) < 2:
        raise LCAError("a rating sheet needs the measure's scale (at least two values) to check ratings on import")
    blind = blind_items(items, seed)
    path = Path(path)
    key_path = key_path_for(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [(item.blind_id, item.probe, item.answer, "", "", "") for item in blind.items]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SHEET_COLUMNS)
        writer.writerows(rows)
    if page:
        from protocols.analysis.rating_page import PageSheet, write_page

        sheet = PageSheet(
            title=title or f"Rating sheet: {path.stem}",
            prompt=prompt,
            scale=tuple(scale),
            columns=SHEET_COLUMNS,
            rows=tuple(rows),
            id_column="sheet_item_id",
            shown=(("probe", "Question"), ("answer", "Answer")),
            file_stem=path.stem,
        )
        write_page(sheet, page_path_for(path))
    key = {
        "format": KEY_FORMAT,
        "version": 1,
        **dict(key_fields or {}),
        "sheet": path.name,
        "page": page_path_for(path).name if page else None,
        "seed": seed,
        "scale": list(scale),
        "prompt": prompt,
        "items": {bid: {"item_id": iid, "condition": cond} for bid, (iid, cond) in blind.key.items()},
    }
    key_path.write_text(json.dumps(key, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path, key_path


def read_key(key_path: str | Path) -> dict[str, Any]:
    """A rating sheet's key, checked."""
    key_path = Path(key_path)
    try:
        key = json.loads(key_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordFormatError(f"cannot read the rating key: {exc}", path=str(key_path)) from None
    if not isinstance(key, dict) or key.get("format") != KEY_FORMAT:
        raise RecordFormatError(f"not a rating key (format is not '{KEY_FORMAT}')", path=str(key_path))
    for name in ("scale", "items"):
        if name not in key:
            raise RecordFormatError("missing", path=str(key_path), field=name)
    if not isinstance(key["items"], dict) or not isinstance(key["scale"], list) or len(key["scale"]) < 2:
        raise RecordFormatError("expected items as an object and a scale of at least two values", path=str(key_path))
    return key


def import_ratings(csv_paths: str | Path | Sequence[str | Path], key_path: str | Path) -> pd.DataFrame:
    """Filled rating sheets back as a ratings frame (``item``, ``rater``, ``value``, ``condition``,
    ``notes``, ``source``, ``sheet_item_id``). Rows with neither rating nor rater are skipped (not rated);
    every other problem (unknown id, a rating off the scale, a missing rating or rater, the same rater on an
    item twice, a missing column) refuses the whole import (``SheetRefused``, one problem per file, line and
    field, all of them at once)."""
    key = read_key(key_path)
    known = key["items"]
    paths = [csv_paths] if isinstance(csv_paths, (str, Path)) else list(csv_paths)
    filled = read_filled(paths, columns=SheetColumns(item="sheet_item_id"), known=known, scale=key["scale"])
    rows = [
        {
            "item": known[r.item]["item_id"],
            "rater": r.rater,
            "value": r.value,
            "condition": known[r.item]["condition"],
            "notes": r.notes,
            "source": r.source,
            "sheet_item_id": r.item,
        }
        for r in filled
    ]
    return pd.DataFrame(rows, columns=["item", "rater", "value", "condition", "notes", "source", "sheet_item_id"])
