"""``lca bench redaction``: what the credential detector (``lca.secrets``) finds in the benchmark conversations.

Neither LoCoMo nor LongMemEval plants credentials, so nearly every finding there is a false positive: a
redaction a reader loses for nothing. This runs ``find_secrets`` over every turn of the given files (LoCoMo's
``text``; each LongMemEval haystack turn's ``content``, user and assistant, each distinct text once: the
haystacks share sessions) and counts the findings by kind. Each finding is one row naming its turn, its kind,
its offset and length, and the turn around it *redacted*, so a reader can judge it without the record holding
any credential the data does contain. ``--baseline`` compares with an earlier record: which findings are new,
which are gone, and which cover a different span or kind (the detector's change, seen turn by turn).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.importers import load_official_json
from lca.secrets import detector_fingerprint, find_secrets, maintained_plugins, marker
from protocols.evals import data_paths
from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result

CONTEXT = 60  # characters of redacted text kept on each side of a finding's marker


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--locomo", help="the LoCoMo file or a data folder holding it (default: found like --data)")
    parser.add_argument("--longmemeval", help="the LongMemEval_S dev file or a data folder holding it")
    parser.add_argument(
        "--only", choices=("locomo", "longmemeval"), action="append", help="scan only this dataset (repeatable)"
    )
    parser.add_argument("--baseline", help="an earlier redaction record to compare the findings with")
    parser.add_argument(
        "--out",
        default="results/bench/redaction.json",
        help="the result record (default results/bench/redaction.json); a file already there is replaced, said on "
        "stderr",
    )


def locomo_turns(records: Any) -> Iterator[tuple[str, str]]:
    """(where, text) for every turn of a LoCoMo file: ``sample_id:dia_id``."""
    for record in records if isinstance(records, list) else ():
        conversation = record.get("conversation", {}) if isinstance(record, dict) else {}
        for key, turns in conversation.items() if isinstance(conversation, dict) else ():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for position, turn in enumerate(turns):
                if isinstance(turn, dict) and isinstance(turn.get("text"), str):
                    where = turn.get("dia_id") or f"{key}[{position}]"
                    yield f"{record.get('sample_id')}:{where}", turn["text"]


def longmemeval_turns(records: Any) -> Iterator[tuple[str, str]]:
    """(where, text) for every haystack turn of a LongMemEval file: ``session_id:turn index``."""
    for record in records if isinstance(records, list) else ():
        if not isinstance(record, dict):
            continue
        ids = record.get("haystack_session_ids") or []
        for number, session in enumerate(record.get("haystack_sessions") or []):
            session_id = ids[number] if number < len(ids) else f"{record.get('question_id')}#{number}"
            for position, turn in enumerate(session if isinstance(session, list) else ()):
                if isinstance(turn, dict) and isinstance(turn.get("content"), str):
                    yield f"{session_id}:{position}", turn["content"]


def scan(dataset: str, turns: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each distinct turn text scanned once: the dataset's figures and one row per finding."""
    seen: set[bytes] = set()
    kinds: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    total = characters = flagged = 0
    started = time.perf_counter()
    for where, text in turns:
        total += 1
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if digest in seen:
            continue
        seen.add(digest)
        characters += len(text)
        findings = find_secrets(text)
        if not findings:
            continue
        flagged += 1
        shifted, at = [], 0  # the redacted text, and where each finding's marker sits in it
        parts: list[str] = []
        for f in findings:
            parts.append(text[at : f.start])
            shifted.append(sum(map(len, parts)))
            parts.append(marker(f.kind))
            at = f.end
        parts.append(text[at:])
        redacted = "".join(parts)
        for f, start in zip(findings, shifted, strict=True):
            kinds[f.kind] += 1
            end = start + len(marker(f.kind))
            rows.append(
                {
                    "dataset": dataset,
                    "turn": where,
                    "kind": f.kind,
                    "start": f.start,
                    "length": f.end - f.start,
                    "context": redacted[max(0, start - CONTEXT) : end + CONTEXT],
                }
            )
    metrics = {
        "turns": total,
        "distinct_turns": len(seen),
        "characters": characters,
        "turns_with_findings": flagged,
        "findings": sum(kinds.values()),
        "by_kind": dict(sorted(kinds.items())),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return metrics, rows


def compare(rows: list[dict[str, Any]], baseline: Iterable[dict[str, Any]]) -> tuple[dict[str, int], list[dict]]:
    """Each row marked ``same``, ``changed`` (another span or kind at its offset) or ``new`` against the baseline's
    rows (keyed by dataset, turn and offset), the baseline's rows no longer found appended as ``gone``."""
    before = {(r["dataset"], r["turn"], r["start"]): r for r in baseline}
    now = {(r["dataset"], r["turn"], r["start"]) for r in rows}
    counts: Counter[str] = Counter()
    out = []
    for row in rows:
        old = before.get((row["dataset"], row["turn"], row["start"]))
        status = (
            "new"
            if old is None
            else "same"
            if (old["kind"], old["length"]) == (row["kind"], row["length"])
            else "changed"
        )
        counts[status] += 1
        out.append({**row, "status": status})
    gone = [{**r, "status": "gone"} for key, r in before.items() if key not in now]
    counts["gone"] = len(gone)
    return {k: counts[k] for k in ("same", "changed", "new", "gone")}, out + gone


def run_redaction_bench(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    wanted = args.only or ["locomo", "longmemeval"]
    sources = {
        "locomo": ("locomo", args.locomo, locomo_turns),
        "longmemeval": ("longmemeval_s_dev", args.longmemeval, longmemeval_turns),
    }
    baseline_rows: tuple[dict[str, Any], ...] = ()
    if args.baseline:
        try:
            baseline_rows = BenchmarkResult.read(args.baseline).rows
        except (OSError, LCAError) as exc:
            print(f"lca bench redaction: --baseline {args.baseline}: {exc}", file=sys.stderr)
            return 2
    metrics: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    datasets = []
    for dataset in wanted:
        name, given, reader = sources[dataset]
        try:
            path = data_paths.find_data_file(name, given)
        except FileNotFoundError as exc:
            print(f"lca bench redaction: {exc}", file=sys.stderr)
            return 2
        if path is None:
            print(
                f"lca bench redaction: the {name} file was not found; pass --{dataset} or set $LCA_DATA",
                file=sys.stderr,
            )
            return 2
        try:
            records = load_official_json(path)
        except (OSError, LCAError) as exc:
            print(f"lca bench redaction: {exc}", file=sys.stderr)
            return 2
        figures, found = scan(dataset, reader(records))
        metrics[dataset] = figures
        rows += found
        datasets.append(dataset_provenance(path, name))
    if args.baseline:
        metrics["versus_baseline"], rows = compare(rows, (r for r in baseline_rows if r.get("dataset") in wanted))
    result = BenchmarkResult(
        benchmark="redaction",
        metrics=metrics,
        config={"datasets": wanted, "context": CONTEXT, "baseline": args.baseline},
        rows=tuple(rows),
        provenance=build_provenance(
            datasets=datasets,
            wall_seconds=time.perf_counter() - started,
            extra={"detector_fingerprint": detector_fingerprint(), "maintained_plugins": list(maintained_plugins())},
        ),
    )
    out = Path(args.out)
    write_result(result, out)
    for dataset in wanted:
        m = metrics[dataset]
        print(
            f"{dataset}: {m['findings']} finding(s) in {m['turns_with_findings']} of {m['distinct_turns']:,} distinct "
            f"turns ({m['characters']:,} characters, {m['seconds']} s): {m['by_kind'] or 'none'}"
        )
    if args.baseline:
        print(f"against {args.baseline}: {metrics['versus_baseline']}")
    print(f"written to {out}")
    return 0


BENCHMARK = Benchmark(
    name="redaction",
    help="count the credential detector's findings, by kind, over every turn of LoCoMo and LongMemEval_S dev",
    description="Runs lca.secrets.find_secrets over every distinct turn of the LoCoMo file and the LongMemEval_S dev "
    "file (neither plants credentials, so a finding is most often a false positive) and writes each finding's turn, "
    "kind, span and redacted context; --baseline marks findings new, gone or changed against an earlier record.",
    add_arguments=add_arguments,
    run=run_redaction_bench,
)
