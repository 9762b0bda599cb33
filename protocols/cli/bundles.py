"""``lca bundle export|verify|import``, ``lca migrate`` and ``lca authority``: an agent's substrate as a verified
bundle, its authority and fencing epoch, and the migration that hands authority to another store (lca.bundle,
lca.authority)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from protocols.cli import common


def _rebuild(quiet: bool):
    def rebuild(root: Path) -> None:
        from lca.substrate import Substrate

        with Substrate(root, progress=not quiet) as substrate:
            substrate.reindex()

    return rebuild


def _counts(manifest) -> str:
    return ", ".join(f"{n} {part}" for part, n in manifest.counts().items())


def cmd_bundle(args: argparse.Namespace) -> int:
    from lca.bundle import export_bundle, import_bundle, verify_bundle

    if args.action == "export":
        root = common.checked_store_path(args)
        manifest = export_bundle(root, args.path)
        common.show(f"exported {root} to {args.path}: bundle {manifest.bundle_id[:16]}, files {_counts(manifest)}")
    elif args.action == "verify":
        manifest = verify_bundle(args.path)
        common.show(
            f"{args.path}: verified, bundle {manifest.bundle_id[:16]} of agent {manifest.agent_id} at epoch "
            f"{manifest.source_epoch}, files {_counts(manifest)}, code {manifest.code_version}"
        )
    else:
        target = common.store_path(args)
        manifest = import_bundle(
            args.path, target, mode=args.mode, rebuild=None if args.no_rebuild else _rebuild(args.quiet)
        )
        common.show(
            f"imported bundle {manifest.bundle_id[:16]} into {target} as a {args.mode}"
            + ("" if args.no_rebuild else "; derived stores rebuilt from the transcript")
        )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from lca.bundle import migrate

    source = common.checked_store_path(args)
    bad = [item for item in args.binding or [] if "=" not in item or not item.split("=", 1)[0].strip()]
    if bad:
        from lca.errors import LCAError

        raise LCAError(f"--binding {bad[0]!r}: expected KEY=VALUE (e.g. model=openai/gpt-4o-mini)")
    binding = dict(item.split("=", 1) for item in args.binding or [])
    bundle_dir = Path(args.bundle) if args.bundle else Path(args.target).with_name(Path(args.target).name + ".bundle")
    result = migrate(source, args.target, bundle_dir=bundle_dir, rebuild=_rebuild(args.quiet), binding=binding)
    for step in result.steps:
        common.show(f"  {step['step']}: {step.get('store', source)}")
    if not result.ok:
        what = "rolled back: the source holds authority again" if result.rolled_back else "the source keeps authority"
        common.show(f"migration failed ({what}): {result.error}")
        return 1
    common.show(
        f"migrated {source} -> {args.target} (bundle {result.bundle_id}); epoch {result.source_epoch} -> "
        f"{result.target_epoch}; writers on {source} are now refused"
    )
    return 0


def cmd_authority(args: argparse.Namespace) -> int:
    from lca.authority import fencing_refusals, read_authority

    root = common.checked_store_path(args)
    record = read_authority(root)
    data = {"store": str(root), "authority": record.to_dict() if record else None, "refusals": fencing_refusals(root)}
    if args.json:
        print(json.dumps(data, indent=2))
    elif record is None:
        common.show(f"{root}: no authority record yet (the first append creates one at epoch 1)")
    else:
        common.show(f"{root}: agent {record.agent_id}, epoch {record.epoch}, {record.state} ({record.reason})")
        if record.successor:
            common.show(f"  authority went to {record.successor}")
        for item in record.descent:
            common.show(f"  descends from {item}")
        common.show(f"  {len(data['refusals'])} refused append(s) logged")
    return 0


def add_parsers(sub, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "bundle",
        parents=[common_args],
        help="export, verify or import an agent's substrate bundle (identity, memory, body, manifest)",
        description="export: the store (--store) into a new folder PATH, under its writer lock. verify: every "
        "file of the bundle at PATH against its manifest. import: the bundle at PATH into a new store (--store), "
        "after verifying it, as a read-only replica (default) or a new agent with recorded descent; derived "
        "stores are rebuilt with the default embedder. Authority never travels in a bundle: see `lca migrate`.",
    )
    p.add_argument("action", choices=["export", "verify", "import"])
    p.add_argument("path", help="the bundle folder")
    p.add_argument("--mode", choices=["replica", "new-agent"], default="replica", help="import: what the copy is")
    p.add_argument("--no-rebuild", action="store_true", help="import: do not rebuild the derived stores now")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_bundle)
    p = sub.add_parser(
        "migrate",
        parents=[common_args],
        help="hand the agent's authority from this store to TARGET: quiesce, checkpoint, validate, bind, "
        "rehydrate, resume",
        description="Each step is a system event in the transcripts. After bind the source is a transferred copy "
        "and its writers are refused; a failed rehydration rolls back to the source.",
    )
    p.add_argument("target", help="the new store (a folder that holds no store)")
    p.add_argument("--bundle", help="where the checkpoint bundle goes (default TARGET.bundle beside it)")
    p.add_argument(
        "--binding",
        action="append",
        metavar="KEY=VALUE",
        help="the new environment, recorded as metadata (e.g. model=openai/gpt-4o-mini, host=lab-2)",
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_migrate)
    p = sub.add_parser("authority", parents=[common_args], help="the store's agent id, fencing epoch and state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_authority)
