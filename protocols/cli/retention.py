"""``lca retention list|apply``: the store's retention rules (``retention.yaml``, lca.retention) and their
application through ``forget``: each rule forgets the entries older than its age that match it, named in every
tombstone. ``--dry-run`` shows what would go; ``--now`` applies the rules as of another time."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from lca.retention import apply_retention, read_retention, selected
from protocols.cli import common


def cmd_retention(args: argparse.Namespace) -> int:
    now = datetime.fromtimestamp(common.moment(args.now), UTC) if args.now else datetime.now(UTC)
    with common.open_store(args, progress=not args.quiet and not args.json) as substrate:
        if args.action == "list":
            rules = read_retention(substrate.home)
            entries = list(substrate.transcript.iter_entries())  # read once for every rule
            rows = [
                {**vars(rule), "kinds": list(rule.kinds), "due": len(selected(entries, rule, now))} for rule in rules
            ]
            if args.json:
                common.show(json.dumps(rows, indent=2))
            elif not rows:
                common.show(f"store {substrate.home}: no retention rules (retention.yaml)")
            for row in rows if not args.json else ():
                shown = {k: ", ".join(v) if isinstance(v, list) else v for k, v in row.items()}
                narrow = "; ".join(f"{k} {shown[k]}" for k in ("channel", "author", "session_key", "kinds") if row[k])
                common.show(
                    f"{row['name']}: older than {row['older_than_days']:g} days{f' ({narrow})' if narrow else ''}; "
                    f"{row['due']} entr(y/ies) due"
                )
            return 0
        results = apply_retention(substrate, now=now, dry_run=args.dry_run)
        if args.json:
            data = [{"rule": r.name, "report": rep.to_dict() if rep else None} for r, rep in results]
            common.show(json.dumps(data, indent=2))
            return 0
        verb = "would forget" if args.dry_run else "forgot"
        for rule, report in results:
            common.show(f"{rule.name}: {verb} {len(report.tombstones) if report else 0} entr(y/ies)")
        return 0


def add_parser(sub: argparse._SubParsersAction, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "retention",
        parents=[common_args],
        help="the store's retention rules (retention.yaml) and their application through forget",
    )
    p.add_argument("action", choices=["list", "apply"])
    p.add_argument("--now", help="apply as of this ISO time (default now)")
    p.add_argument("--dry-run", action="store_true", help="apply: list what would be forgotten; change nothing")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_retention)
