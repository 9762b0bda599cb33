"""Retention rules: what the store keeps, for how long, declared once and applied by ``forget``.

A store may declare in ``retention.yaml`` (configuration: it ships in a bundle's body) rules such as "tool results
older than 30 days", "the support channel after 365 days", "everything said by one author after 90 days" or "one
conversation, across the surfaces it touched, after 30 days" (its ``session_key``)::

    rules:
      - name: tool-output
        older_than_days: 30
        kinds: [tool_call, tool_result]
      - name: support-channel
        older_than_days: 365
        channel: support

Each rule is a ``lca.forget.ForgetRequest`` bounded by its age (``until = now - older_than_days``) and narrowed by
its channel, author, session key and kinds; ``apply_retention`` forgets what each selects, with the rule named in every
tombstone (``why``), so history says which rule removed what. Nothing is forgotten until it is applied
(``lca retention apply``, ``--dry-run`` to see first); health's ``retention`` check counts the entries past a
rule that are still held. Migration events (``lca-migrations``) are the store's own history and are never
selected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from lca.errors import RecordFormatError
from lca.forget import ForgetReport, ForgetRequest, forget, is_tombstone
from lca.layout import StoreLayout
from lca.types import SESSION_KEY, EntryKind, HealthCheck, HealthStatus, TranscriptEntry

RETENTION_FILE = "retention.yaml"
PROTECTED_SESSIONS = frozenset({"lca-migrations"})
_FIELDS = {"name", "older_than_days", "channel", "author", "session_key", "kinds"}


@dataclass(frozen=True)
class RetentionRule:
    """Forget entries older than ``older_than_days`` that match every narrowing given."""

    name: str
    older_than_days: float
    channel: str | None = None
    author: str | None = None
    kinds: tuple[str, ...] = ()
    session_key: str | None = None

    def request(self, now: datetime) -> ForgetRequest:
        until = now - timedelta(days=self.older_than_days)
        return ForgetRequest(
            until=until, channel=self.channel, author=self.author, kinds=self.kinds, session_key=self.session_key
        )


def _rule(data: Any, where: str) -> RetentionRule:
    if not isinstance(data, Mapping):
        raise RecordFormatError(f"{where}: a rule must be a mapping")
    unknown = set(data) - _FIELDS
    if unknown:
        raise RecordFormatError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; known: {sorted(_FIELDS)}")
    name, days = data.get("name"), data.get("older_than_days")
    if not isinstance(name, str) or not name.strip():
        raise RecordFormatError(f"{where}: field 'name' must be a non-empty string")
    if isinstance(days, bool) or not isinstance(days, int | float) or days <= 0:
        raise RecordFormatError(f"{where}: field 'older_than_days' must be a number of days > 0, got {days!r}")
    for field_name in ("channel", "author", "session_key"):
        if data.get(field_name) is not None and not isinstance(data[field_name], str):
            raise RecordFormatError(f"{where}: field {field_name!r} must be a string")
    key = data.get("session_key")
    if key is not None and SESSION_KEY.fullmatch(key) is None:
        raise RecordFormatError(f"{where}: field 'session_key' must be 1 to 128 of A-Z a-z 0-9 . _ : -, got {key!r}")
    kinds = data.get("kinds") or []
    known = {k.value for k in EntryKind}
    if not isinstance(kinds, list) or any(k not in known for k in kinds):
        raise RecordFormatError(f"{where}: field 'kinds' must list entry kinds among {', '.join(sorted(known))}")
    return RetentionRule(name, float(days), data.get("channel"), data.get("author"), tuple(kinds), key)


def read_retention(root: Path | str) -> tuple[RetentionRule, ...]:
    """The store's rules (none when it declares none); a malformed file is refused naming it and the rule."""
    path = StoreLayout(root).root / RETENTION_FILE
    if not path.exists():
        return ()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RecordFormatError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("rules", []), list) or set(data) - {"rules"}:
        raise RecordFormatError(f"{path}: expected a mapping with one key, 'rules', holding a list of rules")
    rules = tuple(_rule(r, f"{path}, rules[{i}]") for i, r in enumerate(data.get("rules") or []))
    names = [r.name for r in rules]
    if len(set(names)) != len(names):
        raise RecordFormatError(f"{path}: two rules share a name; each rule is named once")
    return rules


def selected(entries: Iterable[TranscriptEntry], rule: RetentionRule, now: datetime) -> tuple[str, ...]:
    """The ``session#entry`` keys of ``entries`` the rule would forget now (the store's own migration history
    never)."""
    request = rule.request(now)
    return tuple(
        f"{e.session_id}#{e.id}"
        for e in entries
        if e.session_id not in PROTECTED_SESSIONS and not is_tombstone(e) and request.selects(e)
    )


def apply_retention(
    substrate: Any, *, now: datetime | None = None, dry_run: bool = False, by: str = "retention"
) -> list[tuple[RetentionRule, ForgetReport | None]]:
    """Apply every rule in order: each forgets what it selects (None where it selects nothing)."""
    moment = now or datetime.now().astimezone()
    out: list[tuple[RetentionRule, ForgetReport | None]] = []
    for rule in read_retention(substrate.layout.root):
        keys = selected(substrate.transcript.iter_entries(), rule, moment)  # read again: a rule before forgot
        if not keys:
            out.append((rule, None))
            continue
        why = f"retention rule {rule.name!r}: older than {rule.older_than_days:g} days"
        narrowed = ForgetRequest(entries=keys)
        out.append((rule, forget(substrate, narrowed, by=by, why=why, dry_run=dry_run, now=moment)))
    return out


def retention_check(root: Path | str, transcript: Any, now: datetime | None = None) -> HealthCheck:
    """Entries past a rule that the store still holds (warn: ``lca retention apply``); bad rules fail."""
    try:
        rules = read_retention(root)
    except RecordFormatError as exc:
        return HealthCheck("retention", HealthStatus.FAIL, str(exc), {})
    if not rules:
        return HealthCheck("retention", HealthStatus.OK, "no retention rules", {"rules": 0})
    moment = now or datetime.now().astimezone()
    entries = list(transcript.iter_entries())  # read once for every rule
    overdue = {rule.name: len(selected(entries, rule, moment)) for rule in rules}
    late = {name: n for name, n in overdue.items() if n}
    detail = f"{len(rules)} rule(s)" + (
        "; past retention and still held: " + ", ".join(f"{n} by {name}" for name, n in late.items()) + " (run "
        "`lca retention apply`)"
        if late
        else ", nothing past them"
    )
    status = HealthStatus.WARN if late else HealthStatus.OK
    return HealthCheck("retention", status, detail, {"rules": len(rules), "overdue": overdue})
