"""The main job until the pilot study lands: the substrate end to end on one LoCoMo conversation.

Ingests the conversation into a fresh store, reports health, answers one search
with the conversation's own first question, checks whether the gold evidence turn
came back, and writes ``results/demo/report.md`` and ``report.json`` with provenance.
Uses the real LoCoMo file when it is found (``--data``, ``$LCA_DATA``,
``../shared/data``), else the committed fixture in the same format, and says which.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

from protocols.data_paths import DATA_ENV, find_data_file

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocols.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--data", help=f"LoCoMo file or data folder (default ${DATA_ENV}, then ../shared/data)")
    parser.add_argument("--sample", help="LoCoMo sample_id (default: the file's first conversation)")
    parser.add_argument("--out", default=str(REPO / "results" / "demo"))
    args = parser.parse_args(argv)

    from lca.importers import file_sha256, import_locomo, load_official_json
    from lca.provenance import code_version
    from lca.substrate import Substrate

    try:
        source = find_data_file("locomo", args.data)
    except FileNotFoundError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    dataset = "LoCoMo (locomo10.json)"
    if source is None:
        source, dataset = FIXTURE, "project fixture in LoCoMo format (no LoCoMo file found)"
    records = load_official_json(source)
    record = next((r for r in records if r["sample_id"] == args.sample), None) if args.sample else records[0]
    if record is None:
        print(f"demo: no sample '{args.sample}' in {source}", file=sys.stderr)
        return 2
    sample_id = record["sample_id"]
    qa = next(q for q in record["qa"] if q.get("category") != 5 and q.get("evidence"))
    out_dir = Path(args.out)
    store = out_dir / "store"
    shutil.rmtree(store, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)

    print(f"[1/3] ingest {dataset}: conversation {sample_id} from {source}")
    started = time.perf_counter()
    with Substrate(store, progress=True) as substrate:
        sessions, imported = import_locomo(source, sample_ids=[sample_id])
        ingest = substrate.import_sessions(sessions, imported)
        ingest_s = time.perf_counter() - started
        print(
            f"      {ingest.entries_appended} turns in {len(sessions)} sessions, "
            f"{ingest.index.new_chunks} chunks embedded in {ingest_s:.1f} s"
        )

        print("[2/3] health")
        health = substrate.health()
        for check in health.checks:
            print(f"      [{check.status.value:>4}] {check.name}: {check.detail}")

        print(f"[3/3] search: {qa['question']!r}")
        started = time.perf_counter()
        hits = substrate.search(qa["question"], k=5)
        search_ms = (time.perf_counter() - started) * 1000
        gold = {str(e).strip() for e in qa["evidence"]}
        found = []
        for rank, hit in enumerate(hits, 1):
            entry = next(e for s in sessions for e in s.entries if e.id == hit.pointer.entry_id)
            dia = entry.meta.get("dia_id")
            mark = " <- gold evidence" if dia in gold else ""
            if mark:
                found.append(dia)
            print(f"      {rank}. [{dia}] {hit.score:.4f} {' '.join(hit.text.split())[:110]}{mark}")
        print(
            f"      gold answer: {qa.get('answer')!r}; gold evidence {sorted(gold)}; "
            f"found in top 5: {sorted(set(found))}"
        )
        embedder_id = substrate.embedder.embedder_id

    report = {
        "job": "substrate end-to-end demo (issue 2; the pilot study replaces it)",
        "provenance": {
            "code_version": code_version(),
            "embedder": embedder_id,
            "dataset": dataset,
            "dataset_path": str(source),
            "dataset_sha256": file_sha256(source),
            "sample_id": sample_id,
            "python": platform.python_version(),
            "seed": None,
        },
        "ingest": ingest.to_dict(),
        "health": health.to_dict(),
        "search": {
            "query": qa["question"],
            "gold_answer": qa.get("answer"),
            "gold_evidence": sorted(gold),
            "evidence_found_top5": sorted(set(found)),
            "latency_ms_cold": search_ms,
            "hits": [h.to_dict() for h in hits],
        },
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str))
    lines = [
        "# LCA substrate demo",
        "",
        f"- dataset: {dataset}, conversation `{sample_id}` (`{source}`, "
        f"sha256 `{report['provenance']['dataset_sha256'][:16]}...`)",
        f"- code: `{report['provenance']['code_version']}`; embedder: `{embedder_id}`",
        f"- ingest: {ingest.entries_appended} turns, {ingest.index.new_chunks} chunks, {ingest_s:.1f} s",
        f"- health: {'healthy' if health.healthy else 'UNHEALTHY'}",
        "",
        "| check | status | detail |",
        "| --- | --- | --- |",
        *[f"| {c.name} | {c.status.value} | {c.detail} |" for c in health.checks],
        "",
        f"## Search: {qa['question']}",
        "",
        f"Gold answer `{qa.get('answer')}`, gold evidence {sorted(gold)}, found in the top 5: {sorted(set(found))}.",
        "",
        "| rank | score | source | text |",
        "| --- | --- | --- | --- |",
        *[
            f"| {i} | {h.score:.4f} | `{h.pointer.key()}` | {' '.join(h.text.split())[:160]} |"
            for i, h in enumerate(hits, 1)
        ],
    ]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report: {out_dir / 'report.md'}")
    return 0 if health.healthy else 1


if __name__ == "__main__":
    sys.exit(main())
