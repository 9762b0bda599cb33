"""Reading a foreign JSONL transcript (``lca ingest --format transcript``) line by line, before any line is
trusted: a line over the entry bound is reported undecoded, and one too deep to decode names the field it nests
in. Kept apart from ``lca.transcript``, which stores what these lines become."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lca.errors import RecordFormatError
from lca.types import MAX_META_DEPTH, field_label


def decode_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to decode"
    return f"not valid JSON/UTF-8: {exc}"


def _too_deep_field(raw: bytes, depth_limit: int = MAX_META_DEPTH) -> str | None:
    """The top-level key whose value a line too deep to decode nests beyond ``depth_limit``: a scan of
    the raw text (strings skipped), so the refusal can name the field the parser never reached."""
    text = raw.decode("utf-8", "replace")
    depth, in_string, escaped, start = 0, False, False, 0
    last_string: str | None = None
    key: str | None = None
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string, last_string = False, text[start:i]
        elif char == '"':
            in_string, start = True, i + 1
        elif char == ":" and depth == 1:
            key = last_string
        elif char in "[{":
            depth += 1
            if depth > depth_limit + 1:
                return field_label(key) if key is not None else None
        elif char in "]}":
            depth -= 1
    return None


def wire_records(
    path: Path, *, max_line_bytes: int | None = None
) -> Iterator[tuple[int, Mapping[str, Any] | None, RecordFormatError | None, bytes]]:
    """Lines of a foreign JSONL transcript, one at a time: (line number, decoded object or None, error,
    raw bytes). A line longer than ``max_line_bytes`` is reported without being decoded."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            size = len(raw.rstrip(b"\r\n"))
            if max_line_bytes is not None and size > max_line_bytes:
                message = f"line is {size:,} bytes, over the bound of {max_line_bytes:,} bytes (max_entry_bytes)"
                yield number, None, RecordFormatError(message, path=str(path), line=number, field="content"), raw
                continue
            try:
                yield number, json.loads(raw.decode("utf-8")), None, raw
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                deep = _too_deep_field(raw) if isinstance(exc, RecursionError) else None
                error = RecordFormatError(decode_problem(exc), path=str(path), line=number, field=deep)
                yield number, None, error, raw
