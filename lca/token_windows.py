"""Cutting a sequence of texts into consecutive groups that fit a model's short context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def windows_by_tokens(items: Sequence[Any], tokens: int, *, text: Callable[[Any], str] = str) -> list[list[Any]]:
    """Consecutive items in groups of about ``tokens`` tokens (four characters a token, a few more
    per item for its numbering): how a span is cut for a model with a short context."""
    out: list[list[Any]] = []
    current: list[Any] = []
    used = 0
    for item in items:
        cost = max(1, len(text(item)) // 4) + 4
        if current and used + cost > tokens:
            out.append(current)
            current, used = [], 0
        current.append(item)
        used += cost
    if current:
        out.append(current)
    return out
