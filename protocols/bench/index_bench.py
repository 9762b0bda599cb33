"""``lca bench index``: ingest throughput, index bytes per chunk and hybrid search latency.

The store is built from the LongMemEval_S dev haystacks to the size of the reference
deployment (about 35,000 transcript chunks and 2,000 memory chunks). Hybrid search
latency (query embedding included) is timed in the same loop as a brute-force numpy
cosine baseline over the same vectors, so both see the same machine state; the top-10 overlap
check ranks chunks by their best vector, as dense search does with ``--sentence-keys on``. Exact and bounded
hybrid search (``RetrievalConfig.candidates``) are then timed side by side with their top-10 agreement. Last,
new sessions of 20 turns are ingested one at a time beside full rebuilds of the lexical index (issue 54). Targets:
hybrid p50 <= 15 ms and p95 <= 40 ms in process, at most 2 KB of index per chunk
beyond the chunk text, and re-ingesting an unchanged session embeds nothing.

The steps live in ``protocols.bench.index``; this module runs them in order and registers the benchmark.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from lca.layout import StoreLayout
from lca.retrieval import RetrievalConfig
from protocols.bench.index import DEFAULT_WORK
from protocols.bench.index.report import print_table, record
from protocols.bench.index.sizes import measure_sizes
from protocols.evals import data_paths
from protocols.evals.benchmark import Benchmark, loadavg, write_result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", help="LongMemEval_S file or a folder holding longmemeval/ (default $LCA_DATA, then ../shared/data)"
    )
    parser.add_argument("--chunks", type=int, default=35_000, help="transcript chunks to build (default 35000)")
    parser.add_argument("--memory", type=int, default=2_000, help="memory chunks to build (default 2000)")
    parser.add_argument("--queries", type=int, default=200, help="search queries to time (default 200)")
    parser.add_argument(
        "--sessions",
        type=int,
        default=3,
        help="new sessions ingested one at a time into the built store, each beside a full lexical rebuild "
        "(default 3; 0 skips the step)",
    )
    parser.add_argument(
        "--session-turns", type=int, default=20, help="turns of each new session (default 20, as issue 54 asks)"
    )
    parser.add_argument(
        "--mode-sizes",
        type=lambda text: [int(n) for n in text.split(",") if n.strip()],
        default=[1_000, 5_000, 20_000],
        help="smaller stores (chunks, comma-separated) on which exact and bounded search are timed beside the built "
        "store's, built from its first sessions with its own vectors (default 1000,5000,20000; sizes not below the "
        "store's are skipped; empty: the built store only)",
    )
    parser.add_argument("--work", help="folder for the benchmark store (default results/bench/work-index)")
    parser.add_argument(
        "--out",
        default="results/bench/index.json",
        help="the result record (default results/bench/index.json); a file already there is replaced, said on stderr",
    )
    parser.add_argument("--fresh", action="store_true", help="delete the benchmark store first")
    parser.add_argument(
        "--sentence-keys",
        choices=["on", "off"],
        default="off",
        help="build the store with sentence keys, each sentence of a multi-sentence chunk also a "
        "dense key (default off, the substrate's default); use with --fresh and another --out",
    )


def _find_data(given: str | None) -> Path | None:
    """The LongMemEval_S dev file, or None after saying on stderr where it was looked for."""
    data = data_paths.find_data_file("longmemeval_s_dev", given)  # through the module: tests replace it
    if data is None:
        looked = ", ".join(str(r) for r in data_paths.data_roots(given))
        print(
            f"lca bench index: the LongMemEval_S dev file (longmemeval/longmemeval_s_dev.json.xz) was not "
            f"found; pass --data FILE_OR_FOLDER or set ${data_paths.DATA_ENV} (looked in: {looked})",
            file=sys.stderr,
        )
    return data


def _prepare_work(work: Path, *, fresh: bool) -> bool:
    """Delete the store first with ``--fresh``; whether a store was already there (ingest then measures a
    re-ingest, said on stderr)."""
    if fresh and work.exists():
        shutil.rmtree(work)
    preexisting = StoreLayout(work).catalog.exists()
    if preexisting:
        print(
            f"note: {work} already holds a store; ingest numbers measure re-ingest, not a build, and its "
            f"chunks keep the sentence keys they were built with (use --fresh for a clean build)",
            file=sys.stderr,
        )
    return preexisting


def run_index_bench(args) -> int:
    data = _find_data(args.data)
    if data is None:
        return 2

    # the substrate and the steps (numpy, faiss, the embedder) load once the data is found
    from lca.substrate import Substrate
    from protocols.bench.index.incremental import measure_incremental
    from protocols.bench.index.ingest import (
        load_dataset,
        measure_memory_ingest,
        measure_reingest,
        measure_transcript_ingest,
        meter_ingest,
        select_sessions,
    )
    from protocols.bench.index.instruments import Meter
    from protocols.bench.index.latency import measure_latency, open_reader
    from protocols.bench.index.search_modes import measure_mode_sizes

    started = time.perf_counter()
    work = Path(args.work) if args.work else DEFAULT_WORK
    preexisting = _prepare_work(work, fresh=args.fresh)
    sections: dict[str, Any] = {}
    dataset = load_dataset(data)

    keyed = getattr(args, "sentence_keys", "off") == "on"
    substrate = Substrate(work, progress=True, retrieval=RetrievalConfig(sentence_keys=keyed))
    reader = None
    meter = Meter()
    try:
        embedder = substrate.embedder
        index = substrate.index  # opens the catalog
        _ = embedder.dimension, embedder.max_input_tokens  # load the model outside the timed ingest
        selection = select_sessions(dataset, substrate.chunker, args.chunks)
        meter_ingest(meter, embedder, index, substrate.events)

        load_before = loadavg()
        sections["transcript_ingest"] = measure_transcript_ingest(substrate, meter, selection)
        sections["memory_ingest"] = measure_memory_ingest(substrate, meter, dataset.sessions, selection, args.memory)
        sections["store"], sections["index_size"] = measure_sizes(substrate, StoreLayout(work))
        sections["reingest"] = measure_reingest(substrate, meter, selection)
        meter.restore()

        # latency: a reader opening the store from disk
        substrate.close()
        queries = [str(r["question"]) for r in dataset.questions[: args.queries]]
        reader, cold_ms = open_reader(work, embedder, queries[0])
        sections["latency"] = measure_latency(reader, embedder, queries, cold_ms, load_before)
        sections["search_modes"] = measure_mode_sizes(
            reader, embedder, dataset, substrate.chunker, queries, args.mode_sizes, work
        )
        if args.sessions > 0:  # last: the new sessions grow the store every figure above describes
            reader.close()
            reader = None
            substrate = Substrate(work, embedder=embedder, retrieval=RetrievalConfig(sentence_keys=keyed))
            meter_ingest(meter, embedder, substrate.index, substrate.events)
            sections["incremental"] = measure_incremental(
                substrate, meter, dataset, selection, work, sessions=args.sessions, turns=args.session_turns
            )
            meter.restore()

        result = record(
            args,
            sections,
            data=data,
            dataset_sha=dataset.sha256,
            embedder=embedder,
            work=work,
            preexisting=preexisting,
            load_seconds=dataset.load_seconds,
            import_report=dataset.import_report,
            total_sessions=len(dataset.sessions),
            wall_seconds=time.perf_counter() - started,
        )
    finally:
        meter.restore()
        if reader is not None:
            reader.close()
        substrate.close()

    out = Path(args.out)
    write_result(result, out)
    print_table(result, out)
    return 0


BENCHMARK = Benchmark(
    name="index",
    help="ingest throughput, bytes per chunk and hybrid search latency on a store of the reference deployment's "
    "size, beside a numpy baseline",
    description="Builds a store of the reference deployment's size from the LongMemEval_S dev haystacks and "
    "measures ingest throughput, index bytes per chunk beyond the text, re-ingest of an unchanged "
    "session, and hybrid search latency beside a brute-force numpy baseline over the same vectors.",
    add_arguments=add_arguments,
    run=run_index_bench,
)
