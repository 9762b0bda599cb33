"""``lca ingest``, ``search``, ``recall``, ``calibrate-floor``, ``health`` and ``reindex``: the store itself."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import lca.types
import protocols.cli.common as common
from lca.derived import derived_text
from lca.errors import LCAError
from lca.export import export_lines, exported_entries
from lca.fileio import atomic_write_bytes
from lca.forget import ForgetRequest
from lca.importers import import_transcript_jsonl
from lca.layout import StoreLayout
from lca.params import parse_assignments
from lca.recall import TERMS, RecallConfig, RecallContext
from lca.types import speakers_set
from protocols.evals.datasets import DATASETS, options_by_flag

SHIPPED_OFF_TOPIC_QUERIES = Path(__file__).resolve().parents[2] / "data" / "calibration" / "off_topic_queries.txt"


def cmd_ingest(args: argparse.Namespace) -> int:
    # the file is read and checked before the store is opened: a refused file leaves the store untouched
    rejected: list[tuple[int, str, bytes]] = []
    max_entry_bytes = getattr(args, "max_entry_bytes", None)
    if max_entry_bytes is not None and max_entry_bytes < 1:
        raise LCAError(f"--max-entry-bytes must be at least 1, not {max_entry_bytes}")
    max_entry_bytes = max_entry_bytes or lca.types.DEFAULT_MAX_ENTRY_BYTES  # read now: a test lowers it
    for option, _ in options_by_flag("import").values():
        if option.minimum is not None:
            common.at_least(getattr(args, option.dest), option.minimum, flag=option.flag)
    refuse_other_formats_options(args)
    if args.path is not None:
        if args.format in DATASETS:  # a benchmark file, through its dataset's importer and the options it reads
            sessions, imported = DATASETS[args.format].import_file(
                args.path, max_entry_bytes=max_entry_bytes, options=vars(args)
            )
        else:
            sessions, imported, rejected = import_transcript_jsonl(args.path, max_entry_bytes=max_entry_bytes)
    with common.open_store(args, progress=not args.quiet) as substrate:
        if args.path is None:
            report = substrate.ingest()
        else:
            report = substrate.import_sessions(sessions, imported, rejected=rejected)
        for _, reason, _ in rejected[:20]:
            print(f"lca: quarantined: {reason}", file=sys.stderr)
        if len(rejected) > 20:
            print(f"lca: quarantined: ... and {len(rejected) - 20} more line(s): see `lca health`", file=sys.stderr)
        out = report.to_dict()
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            idx = out["index"]
            print(
                f"store {substrate.home}: {out['entries_appended']} entries appended "
                f"({out['entries_duplicate']} already present), {out['entries_indexed']} entries and "
                f"{out['memory_files_indexed']} memory files indexed; {idx['new_chunks']} new chunks, "
                f"{idx['duplicate_chunks']} duplicates skipped, {idx['embedded_texts']} texts embedded, "
                f"{idx['failed_chunks']} held back after failed embedding; {out['seconds']:.1f} s"
            )
            for item in out["imports"]:
                if item["repaired"] or item["unparsed"]:
                    print(f"  {item['source']}: repaired {item['repaired']}, unparsed {len(item['unparsed'])}")
            if out["quarantined_lines"]:
                print(f"  {out['quarantined_lines']} line(s) quarantined: see `lca health`")
        for problem in out["problems"]:  # inputs left out (a memory file that fails to load, ...): exit 1
            print(f"lca: not indexed: {common.terminal_safe(problem)}", file=sys.stderr)
        if args.path is not None and rejected and not any(session.entries for session in sessions):
            print(f"lca: nothing imported: every line of {args.path} was refused and quarantined", file=sys.stderr)
            return 1
        return 0 if not out["index"]["failed_chunks"] and not out["problems"] else 1


def refuse_other_formats_options(args: argparse.Namespace) -> None:
    """Refuse an option that only some import formats read (``DatasetPlugin.import_options``) given with another
    format, or with no file to import: it would be ignored silently."""
    for option, readers in options_by_flag("import").values():
        formats = [plugin.name for plugin in readers]
        if option.given(args) and (args.path is None or args.format not in formats):
            raise LCAError(
                f"{option.flag} applies to importing a file with --format {' or '.join(formats)}, "
                f"not --format {args.format}"
            )


def cmd_search(args: argparse.Namespace) -> int:
    common.at_least(args.k, 1, flag="-k")
    with common.open_store(args) as substrate:
        as_of = datetime.fromtimestamp(common.moment(args.as_of), UTC) if args.as_of else datetime.now(UTC)
        hits = substrate.search(args.query, k=args.k, mode=args.mode, as_of=as_of)
        if args.json:
            print(
                json.dumps(
                    {
                        "query": derived_text(args.query),  # a key typed into a query is not echoed
                        "mode": args.mode,
                        "embedder": substrate.embedder.embedder_id,
                        "hits": [h.to_dict() for h in hits],
                    },
                    indent=2,
                )
            )
        else:
            if not hits:
                print("no results")
            for rank, hit in enumerate(hits, 1):
                text = " ".join(hit.text.split())
                common.show(
                    f"{rank:>2}. {hit.score:.4f}  {hit.pointer.key()}  {hit.timestamp or ''}\n    "
                    f"{text[:300]}{'...' if len(text) > 300 else ''}"
                )
        return 0


def recall_config(args: argparse.Namespace):
    """The recall settings: ``--config`` (or the defaults), then the flags, then each ``--weight TERM=VALUE``."""
    config = RecallConfig.from_file(args.config) if args.config else RecallConfig()
    overrides = parse_assignments(args.weight, flag="--weight", known={term: float for term in TERMS})
    changes = {
        k: v
        for k, v in {
            "token_budget": args.budget,
            "policy": args.policy,
            "floor": args.floor,
            "floor_mode": args.floor_mode,
            "pool": args.pool,
        }.items()
        if v is not None
    }
    if overrides:
        changes["weights"] = config.weights.with_overrides(overrides)
    return replace(config, **changes) if changes else config


def cmd_recall(args: argparse.Namespace) -> int:
    config = recall_config(args)
    context = RecallContext(
        query=args.query,
        role=args.role,
        project=args.project,
        channel=args.channel,
        command=args.command_name,
        public_channel=args.public,
        as_of=datetime.fromtimestamp(common.moment(args.as_of), UTC) if args.as_of else None,
        about_history=args.about_history,
        exact_wording=args.exact,
    )
    from lca.insight.taxonomy import record_taxonomy, tags_of

    with common.open_store(args) as substrate:
        result = substrate.recall(context, config=config)
        taxonomy = record_taxonomy(substrate.home)  # shown beside a memory, never ranked by (lca.insight.taxonomy)
        if args.json:
            print(
                json.dumps(
                    {
                        "query": derived_text(args.query),  # a key typed into a query is not echoed
                        "policy": result.policy,
                        "action": result.action,
                        "tokens": result.tokens,
                        "budget": result.budget,
                        "latency_ms": result.latency_ms,
                        "floor": result.floor,
                        "floor_detail": result.floor_detail,
                        "whole_history": result.whole_history,
                        "whole_history_why": result.whole_history_why,
                        "block": result.block,
                        "weights": config.weights.__dict__,
                        "candidates": [
                            {
                                "source": c.source,
                                "injected": c.injected,
                                "why_not": c.why_not,
                                "prompt_of": c.prompt_of,
                                "score": c.score,
                                "cosine": c.cosine,
                                "terms": dict(c.terms),
                                "tokens": c.tokens,
                                **speakers_set(c),  # who spoke, where a subagent or a peer agent did
                                **({"schemas": tags} if (tags := tags_of(c.source, taxonomy)) else {}),
                            }
                            for c in result.candidates
                        ],
                    },
                    indent=2,
                )
            )
            return 0
        common.show(result.block, end="")
        if args.explain:
            w = config.weights
            print(
                f"\n{len(result.candidates)} candidates; weights "
                + ", ".join(f"{t}={getattr(w, t):g}" for t in TERMS)
                + f"; tilt bound {w.tilt_bound:g}"
            )
            common.show(
                (result.floor_detail or "no floor applied")
                + "; the floor is held against each candidate's raw cosine (the 'cosine' column), not against S"
            )
            if result.whole_history:
                common.show(f"the floor held none of the history back ({result.whole_history_why}); the budget decides")
            # the cosine sits beside the similarity term's contribution (S times its weight): the floor reads it
            columns = [f"{t[:5]:>6}" + (f" {'cosine':>6}" if t == "similarity" else "") for t in TERMS]
            print(f"{'rank':>4} {'score':>7} " + " ".join(columns) + "  source / why not")
            sources = {c.chunk_id: c.source for c in result.candidates}
            for rank, c in enumerate(result.candidates, 1):
                contrib = c.contribution(w)
                cells = " ".join(
                    f"{contrib[t]:>6.3f}" + (f" {c.cosine:>6.3f}" if t == "similarity" else "") for t in TERMS
                )
                status = "INJECTED" if c.injected else c.why_not
                if c.prompt_of:  # brought by the turn it precedes (RecallConfig.exchanges), not by its own rank
                    status += f" (brought by {sources.get(c.prompt_of, c.prompt_of)}, the turn it precedes)"
                tagged = "".join(f" [schema {t}]" for t in tags_of(c.source, taxonomy))
                common.show(f"{rank:>4} {c.score:>7.3f} {cells}  {c.source}{tagged}  {status}")
        return 0


def cmd_calibrate_floor(args: argparse.Namespace) -> int:
    from lca.calibration import calibrate_floor, load_queries  # loads the index (faiss): not for `lca --help`

    queries_path = Path(args.queries) if args.queries else SHIPPED_OFF_TOPIC_QUERIES
    with common.open_store(args) as substrate:
        result = calibrate_floor(
            substrate.searchable_index(), load_queries(queries_path), positives=args.positives, quantile=args.quantile
        )
        if args.write:
            substrate.save_recall_setting("floor", result.floor)
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            print(
                f"floor {result.floor:.4f} (q{int(result.quantile * 100)} of {result.negatives} off-topic "
                f"queries' best cosine); on-topic median sits {result.margin:+.4f} above it; "
                f"{result.positives_above_floor:.1%} of {result.positives} on-topic probes clear it"
            )
            print(f"  off-topic quantiles {result.negative_quantiles}")
            print(f"  on-topic quantiles  {result.positive_quantiles}")
            for score, query, source in result.highest_negatives[:3]:
                common.show(f"  highest off-topic: {score:.3f} {query!r} -> {source}")
            if args.write:
                print(f"  written to {StoreLayout(substrate.home).recall_settings}")
        return 0


def cmd_health(args: argparse.Namespace) -> int:
    with common.open_store(args) as substrate:
        report = substrate.health(acknowledge=args.acknowledge)
        if args.json:
            print(json.dumps(report.to_dict(), indent=2, default=str))
        else:
            common.show(f"store {report.store}: {'healthy' if report.healthy else 'UNHEALTHY'}")
            for check in report.checks:
                common.show(f"  [{check.status.value:>4}] {check.name}: {check.detail}")
                if check.name == "memory_files":
                    for failure in check.data.get("failed", []):
                        common.show(f"         {failure}")
        return 0 if report.healthy else 1


def cmd_reindex(args: argparse.Namespace) -> int:
    with common.open_store(args, progress=not args.quiet) as substrate:
        report = substrate.reindex().to_dict()
        common.show(
            f"store {substrate.home}: rebuilt {report['index']['new_chunks']} chunks with "
            f"{substrate.embedder.embedder_id} from "
            f"{report['entries_indexed']} transcript entries and {report['memory_files_indexed']} memory files "
            f"in {report['seconds']:.1f} s"
        )
        return 0


def add_embedder_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    from lca.index.embedder_choice import embedder_names  # the registry alone: no model is loaded

    parser.add_argument(
        "--embedder", metavar="NAME", help=f"{help_text}: {embedder_names()}, or a sentence-transformers model folder"
    )


def cmd_forget(args: argparse.Namespace) -> int:
    request = ForgetRequest(
        entries=tuple(args.entry or ()),
        session=args.session,
        session_key=args.session_key,
        since=datetime.fromtimestamp(common.moment(args.since), UTC) if args.since else None,
        until=datetime.fromtimestamp(common.moment(args.until), UTC) if args.until else None,
        matching=args.matching,
    )
    with common.open_store(args, progress=not args.quiet and not args.json) as substrate:
        report = substrate.forget(request, by=args.by, why=args.why, dry_run=args.dry_run)
        if args.json:
            common.show(json.dumps(report.to_dict(), indent=2))
            return 0
        verb = "would forget" if report.dry_run else "forgot"
        common.show(f"store {substrate.home}: {verb} {len(report.tombstones)} entr(y/ies)")
        for stone in report.tombstones:
            common.show(f"  {stone['session']}#{stone['entry']}  sha256 {stone['removed_sha256'][:16]}")
        if report.dry_run and report.memory_files_removed:
            common.show(f"  memory files it would remove: {', '.join(report.memory_files_removed)}")
        if report.insight is not None and (report.insight.files or report.insight.hypotheses or report.insight.schemas):
            verb_files = "would rewrite" if report.dry_run else "rewritten"
            common.show(f"  insight files {verb_files}: {', '.join(report.insight.files) or 'none'}")
            named = [*report.insight.hypotheses, *report.insight.schemas]
            common.show(f"  ledger entries losing a member: {', '.join(named) or 'none'}")
        if not report.dry_run:
            common.show(
                f"  memory files removed: {len(report.memory_files_removed)}; derived files rewritten: "
                f"{len(report.derived_files_rewritten)}; quarantined lines removed: "
                f"{report.quarantined_lines_removed}; index rebuilt"
            )
        return 0


def cmd_export(args: argparse.Namespace) -> int:
    with common.open_store(args) as substrate:
        lines = export_lines(
            exported_entries(
                substrate.transcript,
                session=args.session,
                author=args.author,
                session_key=args.session_key,
                verbatim=args.verbatim,
            )
        )
        if args.out in (None, "-"):
            count = 0
            for line in lines:
                sys.stdout.write(common.terminal_safe(line.decode("utf-8")))
                count += 1
        else:
            data = list(lines)
            count = len(data)
            atomic_write_bytes(Path(args.out), b"".join(data))
        print(f"lca: exported {count} entr{'y' if count == 1 else 'ies'}", file=sys.stderr)
        return 0


def add_parsers(sub, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ingest",
        parents=[common_args],
        help="import history and index what is new",
        description="Import a history file into the authoritative transcript and index what is "
        "new. With no PATH, index whatever the transcript and memory files hold beyond "
        "the watermarks.",
    )
    p.add_argument("path", nargs="?", help="file to import (plain, .gz or .xz)")
    p.add_argument(
        "--max-entry-bytes",
        type=int,
        help="the largest entry an import accepts, in bytes of its stored line (default 1 MiB); a larger one is "
        "quarantined and named",
    )
    p.add_argument(
        "--format",
        choices=["transcript", *DATASETS],
        default="transcript",
        help="the file's format (default: transcript, our JSONL wire format)",
    )
    for option, _ in options_by_flag("import").values():  # each benchmark format's own (--sample, --question, ...)
        option.add_to(p)
    p.add_argument("--json", action="store_true", help="print the ingest report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_embedder_argument(p, "the embedder a new store is built with (default: the store's own, else minilm)")
    p.set_defaults(func=cmd_ingest, creates_store=True)  # the one store command that creates a store

    p = sub.add_parser("search", parents=[common_args], help="hybrid search with source pointers")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="results to return (default 10)")
    p.add_argument("--mode", choices=["hybrid", "dense", "lexical"], default="hybrid")
    p.add_argument(
        "--as-of", help="the moment a relative date in the query ('last week') is read against: ISO time (default now)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "recall",
        parents=[common_args],
        help="resonance-weighted recall for one turn",
        description="Resonance-weighted recall: the block a model would receive, and with "
        "--explain every candidate's term contributions and why it was or was not injected.",
    )
    p.add_argument("query")
    p.add_argument("--role")
    p.add_argument("--project")
    p.add_argument("--channel")
    p.add_argument("--command", dest="command_name", help="the current command or skill")
    p.add_argument("--public", action="store_true", help="the channel is public: private memories are filtered")
    p.add_argument("--as-of", help="evaluate validity intervals at this ISO time (default now)")
    p.add_argument(
        "--about-history",
        action="store_true",
        help="the question is about history: superseded memories become candidates",
    )
    p.add_argument("--exact", action="store_true", help="exact wording asked: the raw transcript outranks summaries")
    p.add_argument("--budget", type=int, help="token budget (default 1200)")
    p.add_argument("--policy", choices=["fixed-k", "adaptive", "none"])
    p.add_argument(
        "--floor",
        type=float,
        help="the absolute similarity floor on cosine (default 0.50); with --floor-mode store (the default) the "
        "floor is lowered to this store's off-topic ceiling plus a margin, never above this value",
    )
    p.add_argument(
        "--floor-mode",
        choices=["store", "absolute"],  # lca.recall.floor.FLOOR_MODES (not imported: --help stays light)
        help="store: the floor follows this store's off-topic scores (default); absolute: --floor as given",
    )
    p.add_argument("--pool", type=int, help="candidate pool (default 50)")
    p.add_argument("--config", help="YAML/JSON recall settings with a 'weights' mapping")
    p.add_argument(
        "--weight",
        action="append",
        metavar="TERM=VALUE",
        help="override one weight (similarity, experience, temporal, authority, task, activation, risk); repeatable",
    )
    p.add_argument("--explain", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser(
        "calibrate-floor",
        parents=[common_args],
        help="fit the recall similarity floor to this store",
        description="Fit the similarity floor against coherent off-topic questions and report the "
        "margin to on-topic probes; --write stores it in <store>/recall.yaml.",
    )
    p.add_argument("--queries", help="off-topic questions, one per line (default: the shipped list)")
    p.add_argument("--positives", type=int, default=200, help="on-topic probes sampled from the store")
    p.add_argument("--quantile", type=float, default=0.95, help="quantile of off-topic scores (default 0.95)")
    p.add_argument("--write", action="store_true", help="store the fitted floor in <store>/recall.yaml")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate_floor)

    p = sub.add_parser("health", parents=[common_args], help="the store's report on itself; exit 1 when unhealthy")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--acknowledge",
        action="store_true",
        help="record the quarantined lines listed now as reviewed, so they stop keeping health on warning or "
        "failed (their bytes stay in quarantine/; later ones still count)",
    )
    p.set_defaults(func=cmd_health)

    p = sub.add_parser(
        "forget",
        parents=[common_args],
        help="remove entries from the transcript (tombstones) and from everything derived from them",
        description="Replace the selected entries with tombstones (who, when, why, a hash of what was removed), "
        "drop the memory files and derived records resting on them, and rebuild the index. Selectors combine: "
        "an entry is forgotten when it meets every one given.",
    )
    p.add_argument("--entry", action="append", metavar="SESSION#ENTRY", help="an entry key or id; repeatable")
    p.add_argument("--session", help="every entry of this session")
    p.add_argument("--session-key", help="every entry carrying this session key, in whichever session or channel")
    p.add_argument("--since", help="entries at or after this ISO time")
    p.add_argument("--until", help="entries before this ISO time")
    p.add_argument("--matching", help="entries whose text holds these words (case and spacing ignored)")
    p.add_argument("--by", required=True, help="who asks (recorded in each tombstone)")
    p.add_argument("--why", required=True, help="why (recorded in each tombstone)")
    p.add_argument("--dry-run", action="store_true", help="list what would be forgotten; change nothing")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser(
        "export",
        parents=[common_args],
        help="one session's, one conversation's or one speaker's turns in the wire format",
        description="Write the selected transcript lines (by --session, --session-key, --author; every one given "
        "must hold) as wire-format JSONL. Credentials are redacted and the line hash computed again "
        "(meta.export_redacted) unless --verbatim.",
    )
    p.add_argument("--session")
    p.add_argument(
        "--session-key", help="one conversation across surfaces: the turns carrying this session key, in any session"
    )
    p.add_argument("--author", help="the speaker whose turns to export")
    p.add_argument("--out", help="file to write (default: standard output)")
    p.add_argument("--verbatim", action="store_true", help="the lines as recorded, credentials included")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "reindex",
        parents=[common_args],
        help="delete and rebuild every derived store from the transcript and memory files",
    )
    p.add_argument("--quiet", action="store_true")
    add_embedder_argument(p, "rebuild with this embedder, which the store then records (default: its own)")
    p.set_defaults(func=cmd_reindex, switches_embedder=True)
