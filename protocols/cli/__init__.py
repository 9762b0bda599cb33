"""The ``lca`` command line: ingest, search, recall, health, reindex, consolidation, protocols and benchmarks.

Every command takes ``--store`` (default ``$LCA_HOME``, else ``./.lca``); ``search`` and ``health`` print
JSON with ``--json``; errors are one line, ``lca: error: ...``, naming the file, line, field or flag, and
exit with status 2; ``health`` exits 1 when the store is unhealthy. Reading commands refuse a path that holds
no store (``StoreLayout.holds_store``) and create nothing; writing commands create one and say so on stderr.

Modules by responsibility: ``common`` (store path, opening a store, errors), ``store`` (ingest, search,
recall, calibrate-floor, health, reindex), ``governance`` (checkpoint, proposals, approve, ledger, schema,
audit, identity), ``insight`` (``lca integrate``, ``lca insights``: the integration cycle and its review queue),
``run`` (``lca run``, the evaluation harness), ``bench`` (``lca bench``, from the
benchmark registry), ``figures`` (``lca figures``, the documents' figures from the committed results), ``fit`` (``lca fit``, ranking
weights fitted on labelled data with held-out folds), ``reproduce``
(``lca reproduce``, a result record's command run again and compared),
``bundles`` (``lca bundle``, ``lca keys``, ``lca migrate``, ``lca authority``: bundles, their signing keys,
fencing and migration),
``prereg`` (``lca prereg``, locking and checking a pre-registered study), ``report`` (``lca report``, the
report of a study run), ``study`` (``lca study plan|unit|merge|compare``, a study run by work units on a cluster) and ``raters`` (``lca raters export|import``, people as raters of a judged measure). Only
``run`` and the benchmarks import the evaluation harness.
"""

from __future__ import annotations

import argparse
import os
import sys

from lca.errors import LCAError
from lca.provenance import code_version
from protocols.cli import (
    bench,
    bundles,
    common,
    figures,
    fit,
    governance,
    insight,
    intents,
    prereg,
    raters,
    report,
    reproduce,
    retention,
    run,
    scenarios,
    store,
    study,
)
from protocols.evals.benchmark import record_command

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lca", description=(__doc__ or "").splitlines()[0])
    common_args = argparse.ArgumentParser(add_help=False)
    common_args.add_argument("--store", help=f"the agent home (default ${common.HOME_ENV}, else ./.lca)")
    sub = parser.add_subparsers(dest="command", required=True)
    store.add_parsers(sub, common_args)
    bench.add_parser(sub)
    figures.add_parser(sub)
    fit.add_parser(sub)
    reproduce.add_parser(sub)
    governance.add_parsers(sub, common_args)
    insight.add_parsers(sub, common_args)
    bundles.add_parsers(sub, common_args)
    intents.add_parsers(sub, common_args)
    retention.add_parser(sub, common_args)
    run.add_parser(sub)
    scenarios.add_parser(sub)
    prereg.add_parser(sub)
    report.add_parser(sub)
    study.add_parser(sub)
    raters.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    record_command(sys.argv[1:] if argv is None else argv)
    # Read the revision as the command starts: a record of a run that a commit overtook names the code it ran.
    code_version()
    try:
        return int(args.func(args) or 0)
    except LCAError as exc:
        return common.print_error(exc)
    except OSError as exc:  # a file named on the command line: one line naming it, not "[Errno 2] ..."
        return common.print_error(common.os_error_line(exc))
