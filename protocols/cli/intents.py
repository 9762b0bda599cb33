"""``lca intents list|settle`` and ``lca providers list|authorize``: the store's work in flight (lca.intents) and
the providers it runs with (lca.providers). An intent that resume could not finish safely is ``blocked``; an
operator who knows its fate settles it here (``--done RECEIPT`` if the effect happened, ``--abandoned NOTE`` if
not), and the settlement is fenced and logged like any write."""

from __future__ import annotations

import argparse
import json

from lca.errors import LCAError
from lca.intents import IntentLog
from lca.providers import ProviderSet, read_providers, write_providers
from protocols.cli import common


def cmd_intents(args: argparse.Namespace) -> int:
    root = common.checked_store_path(args)
    log = IntentLog(root)
    if args.action == "settle":
        if not args.id or (args.done is None) == (args.abandoned is None):
            raise LCAError("lca intents settle ID: give exactly one of --done RECEIPT or --abandoned NOTE")
        settled = log.finish(args.id, args.done) if args.done is not None else log.abandon(args.id, args.abandoned)
        common.show(f"{settled.id}: {settled.state} at epoch {settled.epoch}")
        return 0
    intents = list(log.intents().values())
    if args.json:
        print(json.dumps([{**i.to_line(), "history": list(i.history)} for i in intents], indent=2))
        return 0
    if not intents:
        common.show(f"{root}: no intents")
    for intent in intents:
        note = f" ({intent.note})" if intent.note else ""
        common.show(f"{intent.id}  {intent.state:9}  epoch {intent.epoch}  {intent.provider}  key {intent.key}{note}")
    for provider, cursor in log.cursors().items():
        common.show(f"cursor {provider}: {cursor}")
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    root = common.checked_store_path(args)
    providers = read_providers(root)
    if args.action == "authorize":
        if not args.capability:
            raise LCAError("lca providers authorize: name the capability (e.g. lca providers authorize tools)")
        if args.capability not in providers.capabilities:
            raise LCAError(f"no declared provider offers {args.capability!r}; nothing was authorized")
        write_providers(root, ProviderSet(providers.contracts, providers.authorized | {args.capability}))
        common.show(f"{args.capability}: authorized on {root}")
        return 0
    if args.json:
        print(json.dumps(providers.to_dict(), indent=2))
        return 0
    if not providers.contracts:
        common.show(f"{root}: no providers declared (providers.json)")
    for c in providers.contracts:
        common.show(
            f"{c.name} ({c.kind} {c.version}): {', '.join(sorted(c.capabilities)) or 'no capabilities'}; "
            f"grants {', '.join(sorted(c.grants)) or 'none'}; delivery {c.delivery}"
        )
    if providers.authorized:
        common.show(f"authorized: {', '.join(sorted(providers.authorized))}")
    return 0


def add_parsers(sub: argparse._SubParsersAction, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser("intents", parents=[common_args], help="the store's work in flight (lca.intents)")
    p.add_argument("action", choices=["list", "settle"])
    p.add_argument("id", nargs="?", help="settle: the intent id")
    p.add_argument("--done", metavar="RECEIPT", help="settle: the effect happened; its receipt")
    p.add_argument("--abandoned", metavar="NOTE", help="settle: the effect did not happen; why")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_intents)
    p = sub.add_parser("providers", parents=[common_args], help="the providers a store runs with (lca.providers)")
    p.add_argument("action", choices=["list", "authorize"])
    p.add_argument("capability", nargs="?", help="authorize: a capability a move gained")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_providers)
