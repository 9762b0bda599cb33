"""One parameter language: ``name=value`` assignments, typed by what they set, with one error format.

Every place a user overrides a setting by name (``lca recall --weight``, ``lca bench retrieval --set``,
``lca run --param`` / ``-T``, a condition's parameters) parses through ``parse_assignments``. A name may
be dotted (``weights.experience=0``) to reach into a nested setting; the caller decides what the dots
mean. Errors always read ``<flag> '<item>': <reason>`` and list the names that are known.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from lca.errors import LCAError

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class ParameterError(LCAError):
    """A ``name=value`` assignment that is malformed, names nothing known, or has a value of the wrong type."""

    def __init__(self, flag: str, item: str, reason: str) -> None:
        self.flag, self.item, self.reason = flag, item, reason
        super().__init__(f"{flag} '{item}': {reason}")


def split_assignment(item: str, *, flag: str = "--set") -> tuple[str, str]:
    """``"name=value"`` -> ``("name", "value")``; the name is stripped and ``-`` becomes ``_``."""
    name, sep, value = str(item).partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise ParameterError(flag, item, "expected NAME=VALUE")
    return name, value.strip()


def coerce(value: str, kind: type | str, *, flag: str = "--set", item: str = "") -> Any:
    """A string as ``kind`` (bool, int, float or str; a type or its name). Non-finite floats are refused."""
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    item = item or value
    if name == "bool":
        low = value.lower()
        if low in TRUE_WORDS:
            return True
        if low in FALSE_WORDS:
            return False
        raise ParameterError(flag, item, f"takes on/off (or true/false, 1/0), not '{value}'")
    if name == "int":
        try:
            return int(value)
        except ValueError:
            raise ParameterError(flag, item, f"takes an integer, not '{value}'") from None
    if name == "float":
        try:
            number = float(value)
        except ValueError:
            raise ParameterError(flag, item, f"takes a number, not '{value}'") from None
        if not math.isfinite(number):
            raise ParameterError(flag, item, f"takes a finite number, not '{value}'")
        return number
    return value


def parse_assignments(
    items: Iterable[str] | None, *, flag: str = "--set", known: Mapping[str, type | str] | None = None
) -> dict[str, Any]:
    """Typed ``{name: value}`` from ``name=value`` items. With ``known`` (name -> type), an unknown name
    is refused with the list of known names and each value is coerced to its type; without it, values
    stay strings. A name given twice is refused (the later one would silently win)."""
    out: dict[str, Any] = {}
    for item in items or ():
        name, raw = split_assignment(item, flag=flag)
        if name in out:
            raise ParameterError(flag, item, f"'{name}' is given twice")
        if known is None:
            out[name] = raw
            continue
        if name not in known:
            raise ParameterError(flag, item, f"unknown name '{name}'; known: {', '.join(sorted(known))}")
        out[name] = coerce(raw, known[name], flag=flag, item=item)
    return out


def format_assignments(values: Mapping[str, Any]) -> list[str]:
    """The inverse of ``parse_assignments`` (booleans as on/off), in name order, for logs and task arguments."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)

    return [f"{name}={text(values[name])}" for name in sorted(values)]
