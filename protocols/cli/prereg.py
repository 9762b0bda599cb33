"""``lca prereg lock|check|deviate``: lock a study document, check its lock, record a deviation from it
(protocols/study, docs/preregistration.md)."""

from __future__ import annotations

import argparse
import json

from protocols.study.lock import (
    DEVIATION_KINDS,
    deviations_path,
    lock_path,
    lock_signature,
    lock_status,
    lock_study,
    read_deviations,
    record_deviation,
    signature_path,
)
from protocols.study.schema import load_study


def add_parser(sub) -> None:
    p = sub.add_parser(
        "prereg",
        help="lock and check a pre-registered study (docs/preregistration.md)",
        description="Lock a study document (sha256, time, code revision), check its lock, record deviations.",
    )
    prereg = p.add_subparsers(dest="prereg_command", required=True, metavar="COMMAND")
    lock = prereg.add_parser(
        "lock",
        help="validate the study and write FILE.lock.json beside it",
        description="Validate the study document and write its lock (FILE.lock.json). An unchanged locked file "
        "stays as it is; an edited one is re-locked only with --relock --reason, recorded as a deviation.",
    )
    lock.add_argument("file", help="the study document (preregistration/<id>.yaml)")
    lock.add_argument("--relock", action="store_true", help="re-lock a study edited since it was locked")
    lock.add_argument("--reason", help="why the locked plan changed (needed with --relock)")
    lock.add_argument("--by", help="who re-locks (default: your login)")
    lock.add_argument(
        "--sign", metavar="KEY", help="sign the lock with this private key (lca keys generate); FILE.lock.sig.json"
    )
    lock.set_defaults(func=run_lock)

    check = prereg.add_parser(
        "check",
        help="validate the study and say whether it is locked (exit 0) or unlocked or edited (exit 1)",
        description="Validate the study document and print its lock status and deviations count; exit 0 when "
        "locked, 1 when unlocked or edited since it was locked.",
    )
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="print the status as JSON")
    check.add_argument("--key", metavar="PUBKEY", help="refuse (exit 2) unless the lock is signed by this public key")
    check.set_defaults(func=run_check)

    deviate = prereg.add_parser(
        "deviate",
        help="record a deviation from the locked plan in FILE.deviations.jsonl",
        description="Append one deviation (what changed, why, who, when) to the study's deviations log, which "
        "the report prints.",
    )
    deviate.add_argument("file")
    deviate.add_argument("--what", required=True, help="what was done differently from the plan")
    deviate.add_argument("--why", required=True, help="why")
    deviate.add_argument("--kind", choices=[k for k in DEVIATION_KINDS if k != "relock"], default="deviation")
    deviate.add_argument("--by", help="who (default: your login)")
    deviate.set_defaults(func=run_deviate)


def run_lock(args: argparse.Namespace) -> int:
    record, changed = lock_study(args.file, relock=args.relock, reason=args.reason, by=args.by, sign=args.sign)
    signature = lock_signature(args.file)
    if changed:
        print(f"locked {args.file}: sha256 {record.sha256}, code {record.code_revision}; {signature.short()}")
        print(f"written: {lock_path(args.file)}" + (f", {signature_path(args.file)}" if args.sign else ""))
    elif args.sign:
        print(f"{args.file} is already locked (at {record.locked_at}); its lock is now {signature.short()}")
        print(f"written: {signature_path(args.file)}")
    else:
        print(
            f"{args.file} is already locked (at {record.locked_at}, sha256 {record.sha256[:12]}, "
            f"{signature.short()}); nothing changed"
        )
    return 0


def run_check(args: argparse.Namespace) -> int:
    study = load_study(args.file)
    status = lock_status(args.file)
    signature = lock_signature(args.file, args.key)  # with --key: refused unless signed by it
    deviations = read_deviations(args.file)
    if args.json:
        data = {"study": study.id, **status.to_dict(), "signature": signature.to_dict(), "deviations": len(deviations)}
        print(json.dumps(data, indent=2))
    else:
        print(f"{args.file}: {status.state}: {status.detail}; {signature.describe()}")
        print(
            f"study '{study.id}' valid: {len(study.hypotheses)} hypotheses, {len(study.measures)} measures, "
            f"{len(study.predictions)} predictions; {len(deviations)} deviation(s) recorded"
        )
    return 0 if status.locked else 1


def run_deviate(args: argparse.Namespace) -> int:
    load_study(args.file)
    deviation = record_deviation(args.file, args.what, args.why, by=args.by, kind=args.kind)
    print(f"recorded {deviation.kind} by {deviation.by} at {deviation.at} in {deviations_path(args.file)}")
    return 0
