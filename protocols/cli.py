"""The ``lca`` command line: ingest, search, recall, health, reindex, consolidation and benchmarks.

Every command takes ``--store`` (default ``$LCA_HOME``, else ``./.lca``); ``search``
and ``health`` print JSON with ``--json``; errors name the file, line and field
and exit with status 2; ``health`` exits 1 when the store is unhealthy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HOME_ENV = "LCA_HOME"


def _store_path(args: argparse.Namespace) -> Path:
    if args.store:
        return Path(args.store)
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    return Path(".lca")


def _open(args: argparse.Namespace, *, progress: bool = False):
    from lca.substrate import Substrate

    return Substrate(_store_path(args), progress=progress)


def cmd_ingest(args: argparse.Namespace) -> int:
    from lca.importers import import_locomo, import_longmemeval, import_transcript_jsonl

    substrate = _open(args, progress=not args.quiet)
    try:
        if args.path is None:
            report = substrate.ingest()
        else:
            rejected = ()
            if args.format == "locomo":
                sessions, imported = import_locomo(args.path, sample_ids=args.sample or None)
            elif args.format == "longmemeval":
                sessions, imported = import_longmemeval(args.path, question_ids=args.question or None,
                                                        share_sessions=args.share_sessions, limit=args.limit)
            else:
                sessions, imported, rejected = import_transcript_jsonl(args.path)
            report = substrate.import_sessions(sessions, imported, rejected=rejected)
        out = report.to_dict()
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            idx = out["index"]
            print(f"store {substrate.home}: {out['entries_appended']} entries appended "
                  f"({out['entries_duplicate']} already present), {out['entries_indexed']} entries and "
                  f"{out['memory_files_indexed']} memory files indexed; {idx['new_chunks']} new chunks, "
                  f"{idx['duplicate_chunks']} duplicates skipped, {idx['embedded_texts']} texts embedded, "
                  f"{idx['failed_chunks']} held back after failed embedding; {out['seconds']:.1f} s")
            for item in out["imports"]:
                if item["repaired"] or item["unparsed"]:
                    print(f"  {item['source']}: repaired {item['repaired']}, unparsed {len(item['unparsed'])}")
            if out["quarantined_lines"]:
                print(f"  {out['quarantined_lines']} line(s) quarantined: see `lca health`")
        return 0 if not out["index"]["failed_chunks"] else 1
    finally:
        substrate.close()


def cmd_search(args: argparse.Namespace) -> int:
    substrate = _open(args)
    try:
        hits = substrate.search(args.query, k=args.k, mode=args.mode)
        if args.json:
            print(json.dumps({"query": args.query, "mode": args.mode, "embedder": substrate.embedder.embedder_id,
                              "hits": [h.to_dict() for h in hits]}, indent=2))
        else:
            if not hits:
                print("no results")
            for rank, hit in enumerate(hits, 1):
                text = " ".join(hit.text.split())
                print(f"{rank:>2}. {hit.score:.4f}  {hit.pointer.key()}  {hit.timestamp or ''}\n    "
                      f"{text[:300]}{'...' if len(text) > 300 else ''}")
        return 0
    finally:
        substrate.close()


def _recall_config(args: argparse.Namespace):
    from dataclasses import replace

    from lca.errors import RecordFormatError
    from lca.recall import RecallConfig

    config = RecallConfig.from_file(args.config) if args.config else RecallConfig()
    overrides = {}
    for item in args.weight or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise RecordFormatError(f"--weight takes TERM=VALUE, got {item!r}", field="--weight")
        try:
            overrides[name.strip()] = float(value)
        except ValueError:
            raise RecordFormatError(f"not a number: {value!r}", field=f"--weight {name.strip()}") from None
    changes = {k: v for k, v in {"token_budget": args.budget, "policy": args.policy, "floor": args.floor,
                                  "pool": args.pool}.items() if v is not None}
    if overrides:
        changes["weights"] = config.weights.with_overrides(overrides)
    return replace(config, **changes) if changes else config


def cmd_recall(args: argparse.Namespace) -> int:
    from datetime import datetime

    from lca.recall import TERMS, RecallContext

    config = _recall_config(args)
    context = RecallContext(query=args.query, role=args.role, project=args.project, channel=args.channel,
                            command=args.command_name, public_channel=args.public,
                            as_of=datetime.fromisoformat(args.as_of) if args.as_of else None,
                            about_history=args.about_history, exact_wording=args.exact)
    substrate = _open(args)
    try:
        result = substrate.recall(context, config=config)
        if args.json:
            print(json.dumps({
                "query": args.query, "policy": result.policy, "action": result.action, "tokens": result.tokens,
                "budget": result.budget, "latency_ms": result.latency_ms, "block": result.block,
                "weights": config.weights.__dict__,
                "candidates": [{"source": c.source, "injected": c.injected, "why_not": c.why_not, "score": c.score,
                                "cosine": c.cosine, "terms": dict(c.terms), "tokens": c.tokens}
                               for c in result.candidates]}, indent=2))
            return 0
        print(result.block, end="")
        if args.explain:
            w = config.weights
            print(f"\n{len(result.candidates)} candidates; weights " +
                  ", ".join(f"{t}={getattr(w, t):g}" for t in TERMS) + f"; tilt bound {w.tilt_bound:g}")
            header = f"{'rank':>4} {'score':>7} " + " ".join(f"{t[:5]:>6}" for t in TERMS) + "  source / why not"
            print(header)
            for rank, c in enumerate(result.candidates, 1):
                contrib = c.contribution(w)
                cells = " ".join(f"{contrib[t]:>6.3f}" for t in TERMS)
                status = "INJECTED" if c.injected else c.why_not
                print(f"{rank:>4} {c.score:>7.3f} {cells}  {c.source}  {status}")
        return 0
    finally:
        substrate.close()


def cmd_calibrate_floor(args: argparse.Namespace) -> int:
    from lca.calibration import calibrate_floor, load_queries

    queries_path = Path(args.queries) if args.queries else Path(__file__).resolve().parent.parent / "data" / \
        "calibration" / "off_topic_queries.txt"
    substrate = _open(args)
    try:
        result = calibrate_floor(substrate.index, load_queries(queries_path), positives=args.positives,
                                 quantile=args.quantile)
        if args.write:
            substrate.save_recall_setting("floor", result.floor)
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            print(f"floor {result.floor:.4f} (q{int(result.quantile * 100)} of {result.negatives} off-topic "
                  f"queries' best cosine); on-topic median sits {result.margin:+.4f} above it; "
                  f"{result.positives_above_floor:.1%} of {result.positives} on-topic probes clear it")
            print(f"  off-topic quantiles {result.negative_quantiles}")
            print(f"  on-topic quantiles  {result.positive_quantiles}")
            for score, query, source in result.highest_negatives[:3]:
                print(f"  highest off-topic: {score:.3f} {query!r} -> {source}")
            if args.write:
                print(f"  written to {substrate.home / 'recall.yaml'}")
        return 0
    finally:
        substrate.close()


def cmd_health(args: argparse.Namespace) -> int:
    substrate = _open(args)
    try:
        report = substrate.health()
        if args.json:
            print(json.dumps(report.to_dict(), indent=2, default=str))
        else:
            print(f"store {report.store}: {'healthy' if report.healthy else 'UNHEALTHY'}")
            for check in report.checks:
                print(f"  [{check.status.value:>4}] {check.name}: {check.detail}")
                if check.name == "memory_files":
                    for failure in check.data.get("failed", []):
                        print(f"         {failure}")
        return 0 if report.healthy else 1
    finally:
        substrate.close()


def cmd_reindex(args: argparse.Namespace) -> int:
    substrate = _open(args, progress=not args.quiet)
    try:
        report = substrate.reindex().to_dict()
        print(f"store {substrate.home}: rebuilt {report['index']['new_chunks']} chunks from "
              f"{report['entries_indexed']} transcript entries and {report['memory_files_indexed']} memory files "
              f"in {report['seconds']:.1f} s")
        return 0
    finally:
        substrate.close()


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench == "index":
        from protocols.bench.index_bench import run_index_bench

        return run_index_bench(args)
    if args.bench == "recall":
        from protocols.bench.recall_bench import run_recall_bench

        return run_recall_bench(args)
    if args.bench == "retrieval":
        from protocols.bench.retrieval_bench import run_retrieval_bench

        return run_retrieval_bench(args)
    if args.bench == "gravity-well":
        from protocols.bench.gravity_well import run_gravity_well_bench

        return run_gravity_well_bench(args)
    raise SystemExit(f"unknown benchmark {args.bench}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lca", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", help=f"the agent home (default ${HOME_ENV}, else ./.lca)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", parents=[common], help="import history and index what is new",
                       description="Import a history file into the authoritative transcript and index what is "
                                   "new. With no PATH, index whatever the transcript and memory files hold beyond "
                                   "the watermarks.")
    p.add_argument("path", nargs="?", help="file to import (plain, .gz or .xz)")
    p.add_argument("--format", choices=["transcript", "locomo", "longmemeval"], default="transcript",
                   help="the file's format (default: transcript, our JSONL wire format)")
    p.add_argument("--sample", action="append", help="LoCoMo sample_id to import (repeatable; default all)")
    p.add_argument("--question", action="append", help="LongMemEval question_id to import (repeatable)")
    p.add_argument("--limit", type=int, help="LongMemEval: import the first N questions")
    p.add_argument("--share-sessions", action="store_true",
                   help="LongMemEval: import each distinct haystack session once, not once per question")
    p.add_argument("--json", action="store_true", help="print the ingest report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", parents=[common], help="hybrid search with source pointers")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="results to return (default 10)")
    p.add_argument("--mode", choices=["hybrid", "dense", "lexical"], default="hybrid")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("recall", parents=[common], help="resonance-weighted recall for one turn",
                       description="Resonance-weighted recall: the block a model would receive, and with "
                                   "--explain every candidate's term contributions and why it was or was not injected.")
    p.add_argument("query")
    p.add_argument("--role")
    p.add_argument("--project")
    p.add_argument("--channel")
    p.add_argument("--command", dest="command_name", help="the current command or skill")
    p.add_argument("--public", action="store_true", help="the channel is public: private memories are filtered")
    p.add_argument("--as-of", help="evaluate validity intervals at this ISO time (default now)")
    p.add_argument("--about-history", action="store_true", help="the question is about history: superseded "
                                                                  "memories become candidates")
    p.add_argument("--exact", action="store_true", help="exact wording asked: the raw transcript outranks summaries")
    p.add_argument("--budget", type=int, help="token budget (default 1200)")
    p.add_argument("--policy", choices=["fixed-k", "adaptive", "none"])
    p.add_argument("--floor", type=float, help="similarity floor on cosine (default 0.50)")
    p.add_argument("--pool", type=int, help="candidate pool (default 50)")
    p.add_argument("--config", help="YAML/JSON recall settings with a 'weights' mapping")
    p.add_argument("--weight", action="append", metavar="TERM=VALUE",
                   help="override one weight (similarity, experience, temporal, authority, task, risk); repeatable")
    p.add_argument("--explain", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("calibrate-floor", parents=[common], help="fit the recall similarity floor to this store",
                       description="Fit the similarity floor against coherent off-topic questions and report the "
                                   "margin to on-topic probes; --write stores it in <store>/recall.yaml.")
    p.add_argument("--queries", help="off-topic questions, one per line (default: the shipped list)")
    p.add_argument("--positives", type=int, default=200, help="on-topic probes sampled from the store")
    p.add_argument("--quantile", type=float, default=0.95, help="quantile of off-topic scores (default 0.95)")
    p.add_argument("--write", action="store_true", help="store the fitted floor in <store>/recall.yaml")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate_floor)

    p = sub.add_parser("health", parents=[common], help="the store's report on itself; exit 1 when unhealthy")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_health)

    p = sub.add_parser("reindex", parents=[common],
                       help="delete and rebuild every derived store from the transcript and memory files")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("bench", help="benchmarks writing JSON under results/bench/")
    bench = p.add_subparsers(dest="bench", required=True)
    b = bench.add_parser("index", help="ingest throughput, bytes per chunk and hybrid search latency on a "
                                       "store of the reference deployment's size, beside a numpy baseline")
    b.add_argument("--data", help="LongMemEval_S file or a folder holding longmemeval/ (default $LCA_DATA, "
                                  "then ../shared/data)")
    b.add_argument("--chunks", type=int, default=35_000, help="transcript chunks to build (default 35000)")
    b.add_argument("--memory", type=int, default=2_000, help="memory chunks to build (default 2000)")
    b.add_argument("--queries", type=int, default=200, help="search queries to time (default 200)")
    b.add_argument("--work", help="folder for the benchmark store (default results/bench/work-index)")
    b.add_argument("--out", default="results/bench/index.json")
    b.add_argument("--fresh", action="store_true", help="delete the benchmark store first")
    b.add_argument("--sentence-keys", choices=["on", "off"], default="off",
                   help="build the store with sentence keys, each sentence of a multi-sentence chunk also a dense "
                        "key (default off, the substrate's default); use with --fresh and another --out")
    r = bench.add_parser("recall", help="full resonance recall beside plain hybrid search on the index "
                                        "benchmark's store; tokens per policy; gravity-well figures")
    r.add_argument("--work", default="results/bench/work-index", help="the store (default: lca bench index's)")
    r.add_argument("--data", help="LongMemEval_S dev file or data folder (for the queries)")
    r.add_argument("--queries", type=int, default=200)
    r.add_argument("--token-queries", type=int, default=100)
    r.add_argument("--gravity-queries", type=int, default=5000)
    r.add_argument("--out", default="results/bench/recall.json")
    g = bench.add_parser("gravity-well", help="share of recalls taken by the top 1%% of records: pure "
                                              "use-weighting versus saturation + diversity + wildcards")
    g.add_argument("--queries", type=int, default=5000)
    g.add_argument("--records", type=int, default=2000)
    g.add_argument("--seed", type=int, default=11)
    g.add_argument("--out", default="results/bench/gravity-well.json")
    rb = bench.add_parser("retrieval", help="benchmark retrieval scored by the official metrics, no LLM: "
                                            "bm25, dense, hybrid or full resonance recall")
    rb.add_argument("--dataset", choices=["longmemeval", "locomo"], required=True)
    rb.add_argument("--data", help="the official file (plain, .gz or .xz) or a folder holding it")
    rb.add_argument("--retriever", choices=["bm25", "dense", "hybrid", "resonance"], default="hybrid")
    rb.add_argument("--fusion", choices=["z", "rrf"], help="hybrid fusion (default z; rrf is the store's)")
    rb.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help="override one field of the hybrid's HybridConfig, e.g. bm25_weight=0.3 or sentences=off "
                         "(an unknown name is refused with the list of every field); repeatable")
    rb.add_argument("--context", choices=["on", "off"], help="score each unit also through its neighbours "
                                                            "(default: on for LoCoMo, off for LongMemEval)")
    rb.add_argument("--anchors", choices=["on", "off"], help="temporal anchors (default on): relative times read "
                                                            "against the question date, and absolute dates in the "
                                                            "question (LoCoMo has no question date: absolute only)")
    rb.add_argument("--units", choices=["turns", "observations", "summaries"],
                    help="LoCoMo retrieval units: dialog turns (default), the record's observations, or its session "
                         "summaries (the LoCoMo paper's three RAG settings); LongMemEval uses user turns")
    rb.add_argument("--sentence-keys", choices=["on", "off"],
                    help="resonance only: build the substrate with the store's sentence keys, each sentence of a "
                         "multi-sentence chunk also a dense key (default off, the substrate's default)")
    rb.add_argument("--ablate", action="store_true",
                    help="after the hybrid run, run it again once per part that is on (each weight at 0, sentence "
                         "keys off, names kept in the embedded query) and write <out>-ablation.json and .md")
    rb.add_argument("--limit", type=int, help="first N questions (LongMemEval) or conversations (LoCoMo)")
    rb.add_argument("--cache", default="results/bench/cache", help="embedding cache folder (kept across runs)")
    rb.add_argument("--out", default="results/bench/{dataset}-{retriever}{units}.json")
    rb.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_bench)

    from protocols.memory_cli import add_parsers
    from protocols.run_cli import add_parser as add_run_parser

    add_parsers(sub, common)
    add_run_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from lca.errors import LCAError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (LCAError, FileNotFoundError) as exc:
        print(f"lca: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
