"""``lca figures [--check]``: the README's and the docs' benchmark figures, rendered from the committed result
records under ``results/examples/`` (templates in ``protocols.bench.figures``)."""

from __future__ import annotations

from pathlib import Path

from protocols.bench.figures import ROOT, update


def add_parser(sub) -> None:
    p = sub.add_parser(
        "figures",
        help="write the documents' benchmark figures from results/examples/ (--check: exit 1 where they differ)",
        description="Rewrite every <!-- figures:NAME --> ... <!-- /figures --> span of README.md and docs/ from the "
        "result records under results/examples/. With --check nothing is written and the exit status is 1 when a "
        "document disagrees with the result files.",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a figure differs")
    p.add_argument("--root", help="the repository to work on (default: this checkout)")
    p.set_defaults(func=run)


def run(args) -> int:
    root = Path(args.root) if args.root else ROOT
    stale, total = update(root, check=args.check)
    for figure in stale:
        if args.check:
            print(
                f"{figure.document}: figure '{figure.figure}' differs from its result files\n"
                f"  written:   {figure.written.strip()}\n  generated: {figure.generated.strip()}"
            )
        else:
            print(f"{figure.document}: rewrote figure '{figure.figure}'")
    if args.check and stale:
        print(f"{len(stale)} of {total} figures differ; run `lca figures` to rewrite them from results/examples/")
        return 1
    if not stale:
        print(f"all {total} figures agree with results/examples/")
    return 0
