"""``lca reproduce RECORD...``: run each result record's command again and compare the new record with it
(``protocols.bench.reproduce``); exit 1 when a figure differs."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict

from protocols.bench.reproduce import FigurePair, reproduce

_SHOWN = 12


def add_parser(sub) -> None:
    p = sub.add_parser(
        "reproduce",
        help="rerun a result record's command and compare the figures (exit 1 when one differs)",
        description="Run the `lca bench ...` command a result record names (its provenance.command) again, into a "
        "scratch folder, and compare every metric, check, config value, row, embedder id and dataset hash with the "
        "record. Timings and load (the benchmark's run_to_run figures) are shown side by side, not judged. Run it "
        "from the directory the record's command ran in (the repository root for the committed examples).",
    )
    p.add_argument("records", nargs="+", metavar="RECORD", help="a result record (JSON) to reproduce")
    p.add_argument(
        "--command",
        help="the command to run, for a record that names none (written before records carried their command); "
        "with several records it applies to each",
    )
    p.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance for numbers (default 1e-6)")
    p.add_argument("--keep", help="write the reproduced records into this folder and keep them")
    p.add_argument("--json", action="store_true", help="print each comparison as one JSON object")
    p.set_defaults(func=run)


def _pair(pair: FigurePair) -> str:
    return f"  {pair.key}: recorded {pair.recorded!r}, reproduced {pair.reproduced!r}"


def run(args) -> int:
    failed = 0
    command = shlex.split(args.command) if args.command else None
    for record in args.records:
        result = reproduce(record, command=command, rtol=args.rtol, keep=args.keep)
        failed += not result.reproduced
        if args.json:
            print(json.dumps({**asdict(result), "reproduced": result.reproduced}, default=str))
            continue
        verdict = "reproduced" if result.reproduced else f"{len(result.differences)} figure(s) differ"
        print(f"{record}: {verdict} ({result.compared} figures compared; `{shlex.join(result.command)}`)")
        for pair in result.differences[:_SHOWN]:
            print(_pair(pair))
        if len(result.differences) > _SHOWN:
            print(f"  ... and {len(result.differences) - _SHOWN} more (--json lists all)")
        if result.added:
            print(
                f"  {len(result.added)} figure(s) only the rerun writes (added since the record), e.g. {result.added[0]}"
            )
        if result.run_to_run:
            print(f"  {len(result.run_to_run)} run-to-run figure(s) (timings, load) not judged, e.g.")
            for pair in result.run_to_run[:3]:
                print(_pair(pair))
    return 1 if failed else 0
