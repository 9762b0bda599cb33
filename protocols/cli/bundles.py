"""``lca bundle export|verify|import``, ``lca keys generate``, ``lca migrate`` and ``lca authority``: an agent's
substrate as a verified (and, with a key the user holds, signed) bundle, its authority and fencing epoch, and the
migration that hands authority to another store (lca.bundle, lca.signing, lca.authority)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from lca.authority import fencing_refusals, read_authority
from lca.bundle import (
    bundle_signature,
    export_bundle,
    import_bundle,
    import_embedder,
    migrate,
    read_manifest,
    verify_bundle,
)
from lca.errors import LCAError
from lca.providers import ProviderSet
from lca.signing import generate_key
from protocols.cli import common


def _rebuild(quiet: bool, chosen: Callable[[], str | None]):
    """Rebuild a copied store's derived stores with the embedder ``chosen()`` names (the one its source was built
    with, or the one an import was told to reindex with; None: the default)."""

    def rebuild(root: Path) -> None:
        from lca.index.embedder_choice import make_embedder
        from lca.substrate import Substrate  # loads the index (faiss): not for `lca --help`

        name = chosen()
        with Substrate(root, progress=not quiet, embedder=make_embedder(name) if name else None) as substrate:
            substrate.reindex()

    return rebuild


def _counts(manifest) -> str:
    return ", ".join(f"{n} {part}" for part, n in manifest.counts().items())


def _bundle_folder(path: str) -> Path:
    """The bundle argument: a file there is refused in one line before anything is read or written."""
    from lca.bundle import BundleError  # lca.bundle and lca.custody: imported by the commands that use them

    if Path(path).exists() and not Path(path).is_dir():
        raise BundleError(f"{path}: a file, not a folder; a bundle is a folder")
    return Path(path)


def cmd_bundle(args: argparse.Namespace) -> int:

    flags = (
        ("sign", ("export",)),
        ("encrypt_to", ("export",)),
        ("key", ("verify", "import")),
        ("mode", ("import",)),
        ("decrypt", ("import",)),
        ("embedder", ("import",)),
    )
    for flag, actions in flags:
        if getattr(args, flag) is not None and args.action not in actions:
            raise LCAError(f"--{flag.replace('_', '-')} is for `lca bundle {' or '.join(actions)}`, not {args.action}")
    if args.reindex and args.action != "import":
        raise LCAError(f"--reindex is for `lca bundle import`, not {args.action}")
    path = _bundle_folder(args.path)
    if args.action == "export":
        root = common.checked_store_path(args)
        manifest = export_bundle(root, path, sign=args.sign, encrypt_to=args.encrypt_to)
        line = f"exported {root} to {path}: bundle {manifest.bundle_id[:16]}, files {_counts(manifest)}"
    elif args.action == "verify":
        manifest = verify_bundle(path, key=args.key)
        line = (
            f"{path}: verified, bundle {manifest.bundle_id[:16]} of agent {manifest.agent_id} at epoch "
            f"{manifest.source_epoch}, files {_counts(manifest)}, code {manifest.code_version}"
        )
    else:
        target = common.store_path(args)
        if target.exists() and not target.is_dir():
            raise LCAError(f"store path {target} is a file, not a folder; a bundle is imported into a new folder")

        def embedder() -> str | None:  # read after import_bundle verified the bundle and refused a mismatch
            return import_embedder(path, read_manifest(path), args.embedder, reindex=args.reindex)

        manifest = import_bundle(
            path,
            target,
            mode=args.mode or "replica",
            rebuild=None if args.no_rebuild else _rebuild(args.quiet, embedder),
            key=args.key,
            decrypt=args.decrypt,
            embedder=args.embedder,
            reindex=args.reindex,
        )
        line = f"imported bundle {manifest.bundle_id[:16]} into {target} as a {args.mode or 'replica'}" + (
            "" if args.no_rebuild else f"; derived stores rebuilt from the transcript with {embedder() or 'minilm'}"
        )
    signature = bundle_signature(path, manifest.bundle_id, args.key)
    if args.json:
        data = {
            "action": args.action,
            "bundle": str(path),
            "bundle_id": manifest.bundle_id,
            "agent_id": manifest.agent_id,
            "source_epoch": manifest.source_epoch,
            "files": manifest.counts(),
            "code_version": manifest.code_version,
            "signature": signature.to_dict(),
        }
        print(json.dumps(data, indent=2))
    else:
        common.show(f"{line}; {signature.short() if args.action == 'export' else signature.describe()}")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    if args.custody:
        from lca.custody import generate_custody_key

        private, public, recipient = generate_custody_key(args.path)
        common.show(f"wrote the custody private key {private} (keep it to yourself) and the public key {public}")
        common.show(f"custody key {recipient}; encrypt with --encrypt-to {public}, import with --decrypt {private}")
        return 0
    pair = generate_key(args.path)
    common.show(f"wrote the private key {pair.private} (keep it to yourself) and the public key {pair.public}")
    common.show(f"key id {pair.key_id}; sign with --sign {pair.private}, check with --key {pair.public}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:

    source = common.checked_store_path(args)
    bad = [item for item in args.binding or [] if "=" not in item or not item.split("=", 1)[0].strip()]
    if bad:
        raise LCAError(f"--binding {bad[0]!r}: expected KEY=VALUE (e.g. model=openai/gpt-4o-mini)")
    binding: dict = dict(item.split("=", 1) for item in args.binding or [])
    if args.providers:
        binding["providers"] = _provider_contracts(Path(args.providers))
    bundle_dir = Path(args.bundle) if args.bundle else Path(args.target).with_name(Path(args.target).name + ".bundle")
    from lca.index.embedder_choice import built_with

    rebuild = _rebuild(args.quiet, lambda: built_with(source))  # the target is rebuilt with the source's embedder
    result = migrate(source, args.target, bundle_dir=bundle_dir, rebuild=rebuild, binding=binding)
    for step in result.steps:
        common.show(f"  {step['step']}: {step.get('store', source)}")
        for change in step.get("capabilities") or []:
            gate = "" if change["change"] == "reduced" or change["authorized"] else " (gated until authorized)"
            common.show(f"    capability {change['capability']}: {change['change']}{gate}")
    if not result.ok:
        what = "rolled back: the source holds authority again" if result.rolled_back else "the source keeps authority"
        common.show(f"migration failed ({what}): {result.error}")
        return 1
    common.show(
        f"migrated {source} -> {args.target} (bundle {result.bundle_id}); epoch {result.source_epoch} -> "
        f"{result.target_epoch}; writers on {source} are now refused"
    )
    steps = ", ".join(f"{name} {seconds:.3f}" for name, seconds in result.seconds.items())
    common.show(f"downtime {result.downtime_s:.3f} s (quiesce to resume); seconds per step: {steps}")
    return 0


def _provider_contracts(path: Path) -> list:
    """``--providers FILE``: the target host's provider contracts, checked before anything moves."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise LCAError(f"{path}: not valid JSON: {exc}") from None
    return ProviderSet.from_dict(data, where=str(path)).to_dict()["providers"]


def cmd_authority(args: argparse.Namespace) -> int:
    root = common.checked_store_path(args)
    record = read_authority(root)
    refusals = fencing_refusals(root)
    data = {"store": str(root), "authority": record.to_dict() if record else None, "refusals": refusals}
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
        common.show(f"  {len(refusals)} refused append(s) logged")
    return 0


def add_parsers(sub, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "bundle",
        parents=[common_args],
        help="export, verify or import an agent's substrate bundle (identity, memory, body, manifest)",
        description="export: the store (--store) into a new folder PATH, under its writer lock (--sign KEY: "
        "signed with your private key). verify: every file of the bundle at PATH against its manifest (--key "
        "PUBKEY: and refused unless signed by that key). import: the bundle at PATH into a new store (--store), "
        "after verifying it, as a read-only replica (default) or a new agent with recorded descent; derived "
        "stores are rebuilt with the embedder the bundle's store was built with (its manifest names it; --embedder "
        "naming another is refused unless --reindex). Unsigned bundles are shown as such. Authority never "
        "travels in a bundle: see `lca migrate`.",
    )
    p.add_argument("action", choices=["export", "verify", "import"])
    p.add_argument("path", help="the bundle folder")
    p.add_argument("--mode", choices=["replica", "new-agent"], help="import: what the copy is (default replica)")
    p.add_argument("--sign", metavar="KEY", help="export: sign the bundle with this private key (lca keys generate)")
    p.add_argument("--key", metavar="PUBKEY", help="verify, import: require a signature by this public key")
    p.add_argument(
        "--encrypt-to",
        metavar="PUB",
        help="export: encrypt the private parts (identity, memory) to this custody public key (lca keys generate "
        "--custody); the body stays plain",
    )
    p.add_argument(
        "--decrypt",
        metavar="KEY",
        help="import: the custody private key of an encrypted bundle (a file, or env:LCA_CUSTODY_KEY to read it "
        "from that variable: the PEM or a file's path)",
    )
    p.add_argument("--no-rebuild", action="store_true", help="import: do not rebuild the derived stores now")
    p.add_argument(
        "--embedder",
        metavar="NAME",
        help="import: the embedder the target is configured with (a registered name or a model folder); one other "
        "than the bundle's is refused unless --reindex",
    )
    p.add_argument("--reindex", action="store_true", help="import: rebuild with --embedder instead of the bundle's")
    p.add_argument("--json", action="store_true", help="print the bundle and its signature state as JSON")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_bundle)
    p = sub.add_parser(
        "keys",
        help="make an Ed25519 key pair to sign bundles and study locks (docs/bundles.md)",
        description="generate PATH: a new private key at PATH (mode 0600, never overwritten) and its public key at "
        "PATH.pub. Sign with `lca bundle export --sign PATH` or `lca prereg lock --sign PATH`; whoever checks "
        "holds PATH.pub (`--key`). OpenSSH Ed25519 keys work too.",
    )
    p.add_argument("action", choices=["generate"])
    p.add_argument("path", help="where the private key goes (the public key goes to PATH.pub)")
    p.add_argument(
        "--custody",
        action="store_true",
        help="a custody key pair (X25519) to encrypt a bundle's private parts to, instead of a signing key",
    )
    p.set_defaults(func=cmd_keys)
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
    p.add_argument(
        "--providers",
        metavar="FILE",
        help="the target host's provider contracts (a providers.json: lca.providers); capabilities the move "
        "reduces or gains are recorded, and gained ones stay gated until authorized",
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_migrate)
    p = sub.add_parser("authority", parents=[common_args], help="the store's agent id, fencing epoch and state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_authority)
