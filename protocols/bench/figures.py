"""The figures the README and the docs quote, rendered from the committed result records, so two documents
cannot quote two runs.

A document marks a generated figure ``<!-- figures:NAME -->...<!-- /figures -->`` (inline or over several
lines; quoted in inline code, a marker is text); ``lca figures`` rewrites the text between the markers from the record files under
``results/examples/`` with the template of ``NAME`` below, and ``lca figures --check`` reports every figure
that differs (exit 1), so a hand edit or a new result file without a regeneration fails the test suite. The
documents are ``README.md`` and ``docs/**/*.md``. The retrieval records (``results/examples/retrieval/*.json``)
and their tables (``.md`` beside each) are written by ``lca bench retrieval`` itself; the documents quote the
records through ``readme-retrieval`` and point to the tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lca.errors import LCAError
from protocols.bench.figure_text import EXAMPLES, day, share, source
from protocols.bench.figures_retrieval import (
    EMBEDDER_RUNS,
    LOCOMO_GRID,
    RETRIEVAL_RUNS,
    UNKEYED_RUNS,
    readme_retrieval,
    retrieval_embedders,
    retrieval_unkeyed,
)
from protocols.evals.benchmark import BenchmarkResult

ROOT = Path(__file__).resolve().parents[2]
# a marker quoted in inline code (preceded by a backtick) is prose about markers, not a marker
_FIGURE = re.compile(r"(?<!`)<!-- figures:(?P<name>[a-z0-9-]+) -->(?P<body>.*?)(?<!`)<!-- /figures -->", re.S)
_OPENING = re.compile(r"(?<!`)<!-- figures:(?P<name>[^ ]*) -->")
_CLOSING = "<!-- /figures -->"
_CLOSINGS = re.compile(r"(?<!`)<!-- /figures -->")


def _readme_index(index: BenchmarkResult) -> str:
    m = index.metrics
    by_source = m["store"]["catalog_stats"]["chunks_by_source"]
    hybrid, baseline = m["latency"]["stats"]["hybrid"], m["latency"]["stats"]["baseline_numpy"]
    embedded = m["reingest"]["embedded_texts"]
    return (
        f"on a store of the LCA paper's reference size built from the LongMemEval_S dev haystacks "
        f"({by_source['transcript']:,} transcript chunks and {by_source['memory']:,} memory chunks). Hybrid search "
        f"takes {hybrid['p50_ms']:.1f} ms p50 and {hybrid['p95_ms']:.1f} ms p95, including the query embedding; "
        f"the numpy brute-force baseline in the same loop takes {baseline['p50_ms']:.1f} / "
        f"{baseline['p95_ms']:.1f} ms. The index costs {m['index_size']['bytes_per_chunk_beyond_text']:,.0f} bytes "
        f"per chunk beyond the text. Re-ingesting an unchanged session "
        f"{'embeds nothing' if embedded == 0 else f'embeds {embedded} texts'} "
        f"({source('bench-index.json')}, {day(index)})."
    )


def _readme_recall(recall: BenchmarkResult, gravity: BenchmarkResult) -> str:
    lat, fig = recall.metrics["latency"], gravity.metrics["figures"]
    return (
        f"Full resonance recall takes {lat['recall']['p50_ms']:.1f} ms p50, {lat['recall_over_search_p50']:.2f} "
        f"times plain search in the same run, and {lat['recall']['p95_ms']:.1f} ms p95. Gravity well: the top 1% "
        f"of records take {fig['use_weighted']['top1pct_share']:.1%} of recalls under pure use-weighting, and "
        f"{fig['living_defenses']['top1pct_share']:.1%} with saturation, diversity and wildcards "
        f"({source('bench-recall.json', 'gravity-well.json')})."
    )


def _docs_recall_bench(recall: BenchmarkResult) -> str:
    lat, targets = recall.metrics["latency"], recall.config["targets"]
    fixed = recall.metrics["injected_tokens_per_turn"]["fixed-k"]
    floor = recall.config.get("recall_config", {}).get("floor")
    return (
        f"recall p50 {lat['recall']['p50_ms']:.1f} ms against search {lat['search']['p50_ms']:.1f} ms "
        f"(x{lat['recall_over_search_p50']:.2f}, target {targets['recall_over_search_p50']:g}), p95 "
        f"{lat['recall']['p95_ms']:.1f} ms (target {targets['recall_p95_ms']:g}); fixed-k injects "
        f"{fixed['mean']:.0f} tokens per turn on average and nothing in {fixed['turns_with_nothing_injected']} of "
        f"{fixed['turns']} LongMemEval questions"
        + (f" at the default {floor:.2f} floor" if floor is not None else "")
        + f" ({source('bench-recall.json')}, {day(recall)})."
    )


def _docs_gravity_well(gravity: BenchmarkResult) -> str:
    fig, config = gravity.metrics["figures"], gravity.config
    kinds = ("relevance_only", "use_weighted", "living_defenses")
    share = {k: f"{fig[k]['top1pct_share']:.1%}" for k in kinds}
    gini = " / ".join(f"{fig[k]['gini']:.2f}" for k in kinds)
    return (
        f"`lca bench gravity-well` ({config['queries']:,} Zipf-skewed queries, {config['records']:,} records): the "
        f"top 1% of records take {share['relevance_only']} of injections under relevance only, "
        f"{share['use_weighted']} under pure use-weighting, {share['living_defenses']} with saturation, diversity "
        f"and wildcards (Gini {gini}; "
        f"{source('gravity-well.json')})."
    )


def _docs_index_store(index: BenchmarkResult) -> str:
    m = index.metrics
    target = index.config["targets"]["index_bytes_per_chunk_beyond_text"]
    return (
        f"{m['store']['vectors']:,} vectors for {m['store']['catalog_stats']['chunks']:,} chunks and "
        f"{m['index_size']['bytes_per_chunk_beyond_text']:,.0f} bytes per chunk beyond the text (the target is "
        f"{target:,.0f}; {source('bench-index.json')}, {day(index)})"
    )


def _docs_probes(probes: BenchmarkResult) -> str:
    """Per scenario file, the share of probes whose needed turns were all injected, per condition."""
    parts = []
    for path, conditions in probes.metrics.items():
        name = Path(path).stem
        shares = ", ".join(
            f"{condition} {figures['gold_all']:.2f} ({figures['injected_tokens_mean']:.0f} tokens)"
            for condition, figures in conditions.items()
        )
        first = next(iter(conditions.values()))
        n, with_gold = first["probes"], first.get("gold_probes", first["probes"])
        counted = f"{n} probes" if with_gold == n else f"{n} probes, {with_gold} with evidence turns"
        parts.append(f"{name} ({counted}): {shares}")
    return f"{'; '.join(parts)} ({source('probes.json')}, {day(probes)})"


def _docs_probes_conditions(probes: BenchmarkResult) -> str:
    """Per condition, the substrate measures that separate them: needed turns in, forbidden turns kept out,
    tokens; with the run's scope (a probe limit, full-lca's consolidation)."""
    parts = []
    for path, conditions in probes.metrics.items():
        first = next(iter(conditions.values()))
        limit = probes.config.get("limit")
        scope = f"the first {first['probes']} probes" if limit else f"all {first['probes']} probes"
        shares = "; ".join(
            f"{condition} needed {m['gold_all']:.2f}, forbidden kept out "
            f"{'n/a' if m['forbidden_kept_out'] is None else format(m['forbidden_kept_out'], '.2f')}, "
            f"{m['injected_tokens_mean']:.0f} tokens"
            for condition, m in conditions.items()
        )
        parts.append(
            f"{Path(path).stem}, {scope} ({first['gold_probes']} with evidence turns, {first['forbidden_probes']} "
            f"with forbidden turns): {shares}"
        )
    consolidation = probes.config.get("full_lca_consolidation", "")
    return f"{'; '.join(parts)}; full-lca consolidation {consolidation} ({source('probes-six-conditions.json')}, {day(probes)})"


@dataclass(frozen=True)
class Figure:
    """A generated figure: the result files it reads (under ``results/examples/``) and its template, called
    with their records in that order, then with each of the ``optional`` files' records (None for a file that
    is not there)."""

    name: str
    sources: tuple[str, ...]
    template: Callable[..., str]
    optional: tuple[str, ...] = ()


def _docs_probes_unlabelled(probes: BenchmarkResult, file: str) -> str:
    """Per scenario file read without labels, per condition: needed turns in, forbidden turns of current-state probes
    kept out, stale turns shown without a marker, turns in force held or marked, and the inferred events' precision
    and recall at the hold-back confidence (issue 48's measures)."""
    parts = []
    for path, conditions in probes.metrics.items():
        shown = []
        for condition, f in conditions.items():
            text = (
                f"{condition} needed {share(f['gold_all'])}, current-state forbidden kept out "
                f"{share(f.get('current_state_forbidden_kept_out'))}, stale unmarked {share(f.get('stale_unmarked'))} "
                f"(of {f.get('stale_injected', 0)}), false hold {share(f.get('false_hold'))}"
            )
            if f.get("inferred_held"):
                text += (
                    f", inferred events held precision {share(f.get('inferred_held_precision'))} recall "
                    f"{share(f.get('inferred_held_recall'))}"
                )
            shown.append(text)
        first = next(iter(conditions.values()))
        parts.append(
            f"{Path(path).stem} ({first['probes']} probes, {first.get('gold_unlabelled_events', 0)} unlabelled "
            f"events): {'; '.join(shown)}"
        )
    labels = probes.config.get("labels", "all")
    consolidation = probes.config.get("full_lca_consolidation", "")
    return (
        f"read with labels {labels}, full-lca consolidation {consolidation}: {' | '.join(parts)} "
        f"({source(file)}, {day(probes)})"
    )


def _docs_events(events: BenchmarkResult, file: str = "events-heldout.json") -> str:
    """The model-free change detector on files it was not fitted on: precision and recall of the replaced turn at the
    marking and hold-back confidences, per file and over all."""
    hold, mark = events.config.get("hold"), events.config.get("mark")
    parts = []
    for path, at in events.metrics.items():
        name = "all" if path == "all" else Path(path).stem
        h, m = at[f"{hold:g}"], at[f"{mark:g}"]
        parts.append(
            f"{name}: at {hold:g} precision {share(h['of_precision'])}, recall {share(h['of_recall'])} "
            f"({h['inferred']} of {h['gold']}); at {mark:g} {share(m['of_precision'])} / {share(m['of_recall'])}"
        )
    return f"{'; '.join(parts)} ({source(file)}, {day(events)})"


CONSOLIDATION_COUNTS = (
    ("candidates", "candidates"),
    ("written", "written"),
    ("accepted", "accepted"),
    ("downgraded", "downgraded"),
    ("rejected", "rejected"),
    ("review_failed", "failed reviews"),
    ("held", "held"),
    ("cycles_with_failures", "cycles with a failure"),
    ("cycles_writing_nothing", "cycles writing nothing"),
)


def _docs_consolidation(record: BenchmarkResult) -> str:
    """The consolidation bench's totals over every scenario file it read, with the prompts it ran."""
    totals = [run["total"] for run in record.metrics.values() if isinstance(run, dict) and "total" in run]
    summed = {key: sum(int(t.get(key) or 0) for t in totals) for key, _ in (("cycles", ""), *CONSOLIDATION_COUNTS)}
    scenarios = sum(len(run.get("scenarios", {})) for run in record.metrics.values() if isinstance(run, dict))
    counts = ", ".join(f"{label} {summed[key]}" for key, label in CONSOLIDATION_COUNTS)
    return (
        f"{record.config.get('model')}, prompts `{record.config.get('prompt_version')}`, {summed['cycles']} cycles over "
        f"{scenarios} scenarios: {counts} ({source('consolidation.json')}, {day(record)})"
    )


def _docs_insight_seeds(record: BenchmarkResult) -> str:
    """The cycle on several seeds' planted corpora: per seed and size, the pairs above the threshold, precision and
    recall."""
    parts = []
    for seed, rows in record.metrics.get("seeds", {}).items():
        sizes = []
        for size, run in sorted(rows.items(), key=lambda kv: int(kv[0])):
            c = run["cycle"]
            sizes.append(
                f"{int(size) // 1000}k {c['above_threshold_pairs']} above, precision {share(c['precision'])}, "
                f"recall {share(c['recall'])}"
                if c["threshold"] is not None
                else f"{int(size) // 1000}k no threshold"
            )
        parts.append(f"seed {seed}: " + ", ".join(sizes))
    return "; ".join(parts) + f" ({source('insight-seeds.json')}, {day(record)})"


def _docs_insight(insight: BenchmarkResult) -> str:
    """The integration cycle on the planted corpora at the null threshold: per size, what surfaced against the gold
    rhymes and the cycle's time (or why no threshold could be set); then the slice each signer signed."""
    parts = []
    for size, run in sorted(insight.metrics.get("scale", {}).items(), key=lambda kv: int(kv[0])):
        c = run["cycle"]
        family = c.get("max_statistic_threshold")
        statistic = (
            f" ({c['null_statistic']}; the max statistic's {family:.2f})"
            if c.get("null_statistic") == "tail" and family is not None
            else ""
        )
        found = (
            f"threshold {c['threshold']:.2f}{statistic}, {c['above_threshold_pairs']} pairs above, precision "
            f"{share(c['precision'])}, recall {share(c['recall'])}, {c['false_discoveries']} false"
            if c["threshold"] is not None
            else f"no threshold ({c['threshold_reason']}), nothing surfaced"
        )
        parts.append(f"{int(size):,} records: {found}, cycle {c['seconds']:.0f} s")
    text = "; ".join(parts)
    if (piece := insight.metrics.get("slice")) is not None:
        arms = [("the generator's signatures", piece.get("generator"))]
        arms.append((str(piece.get("model")), piece.get("signer")))
        text += f"; a {piece['records']}-record slice signed by " + ", by ".join(
            f"{name}: {c['above_threshold_pairs']} above, precision {share(c['precision'])}, "
            f"recall {share(c['recall'])}, {share(c['signature_valid_share'])} of signatures valid"
            for name, c in arms
            if c is not None
        )
    return f"{text} ({source('insight.json')}, {day(insight)})"


def _docs_redaction(before: BenchmarkResult, after: BenchmarkResult) -> str:
    """The credential detector's findings on the benchmark files (its false positives) before and after issue 49."""
    parts = []
    for name in ("locomo", "longmemeval"):
        b, a = before.metrics.get(name), after.metrics.get(name)
        if b is None or a is None:
            continue
        parts.append(
            f"{name}: {b['findings']} findings in {b['turns_with_findings']} of {b['distinct_turns']:,} distinct turns "
            f"before, {a['findings']} in {a['turns_with_findings']} after"
        )
    versus = after.metrics.get("versus_baseline") or {}
    same = ", ".join(f"{versus[k]} {k}" for k in ("same", "changed", "new", "gone") if k in versus)
    files = source("bench-redaction-before.json", "bench-redaction.json")
    return f"{'; '.join(parts)}; against the earlier findings: {same} ({files}, {day(after)})"


def _docs_index_detector(index: BenchmarkResult) -> str:
    """The change detector's share of one ingest of the reference store, measured inside that ingest."""
    t = index.metrics["transcript_ingest"]
    detect = t["phases"]["detect_events"]
    return (
        f"on the index benchmark's store ({t['entries_indexed']:,} transcript entries, {t['new_chunks']:,} chunks) the "
        f"change detector took {detect['seconds']:.1f} s of a {t['wall_seconds']:.0f} s ingest and inferred "
        f"{t['events_inferred']} events: ingest x{t['detector_ratio']} of ingest without it (target 1.2) "
        f"({source('bench-index-detector.json')}, {day(index)})"
    )


def _docs_events_fit(fit: BenchmarkResult) -> str:
    """The change detector's model scored leaving one scenario file out: kept replaced turns, precision and recall at
    each confidence, over how many files."""
    cv = fit.metrics["fit_leave_one_file_out"]
    at = "; ".join(
        f"at {t} {cv[t]['kept']} kept, precision {share(cv[t]['precision'])}, recall {share(cv[t]['recall'])}"
        for t in ("0.5", "0.8", "0.85")
    )
    return (
        f"{len(fit.config['files'])} files, {cv['gold_events']} gold events ({share(cv['gold_reachable'])} of them "
        f"among the screened candidates): {at} ({source('events-fit.json')}, {day(fit)})"
    )


def _docs_imprinting(imprinting: BenchmarkResult) -> str:
    """The recall arm's in-domain curve by checkpoint (lessons met, lesson in the context, kept out mistakes, the
    domain's E mass, out-of-domain quiet cases) and what zeroing E changed, paired case by case."""
    curves = imprinting.metrics["recall"]["curves"]
    points = [curves[k] for k in sorted(curves, key=int)]

    def series(key: str) -> str:
        return ", ".join(share(p[key]) for p in points)

    ablation = imprinting.metrics["e_ablation"]
    dataset = imprinting.provenance.datasets[0]
    return (
        f"on `{Path(dataset.path).name}` (sha256 `{dataset.sha256[:12]}`), the `recall` arm by checkpoint "
        f"0-{len(points) - 1}: lessons met {series('lessons_seen')}; in-domain cases with the lesson in the context "
        f"{series('in_domain_lesson_in_context')} (by recall {series('in_domain_lesson_in_recall')}); corrected "
        f"mistakes kept out {series('in_domain_mistake_kept_out')}; domain E mass {series('domain_e_mass')}; "
        f"out-of-domain cases that got nothing {series('off_domain_quiet')}. `{ablation['ablated']}` against "
        f"`{ablation['arm']}`, paired over {ablation['cases']} in-domain cases: {ablation['gained']} lessons brought "
        f"in only with E at 0, {ablation['lost']} only with it ({source('imprinting.json')}, {day(imprinting)})"
    )


FIGURES = {
    f.name: f
    for f in (
        Figure("readme-index", ("bench-index.json",), _readme_index),
        Figure("readme-recall", ("bench-recall.json", "gravity-well.json"), _readme_recall),
        Figure("recall-bench", ("bench-recall.json",), _docs_recall_bench),
        Figure("gravity-well", ("gravity-well.json",), _docs_gravity_well),
        Figure("index-store", ("bench-index.json",), _docs_index_store),
        Figure(
            "readme-retrieval",
            RETRIEVAL_RUNS,
            readme_retrieval,
            optional=(LOCOMO_GRID,),
        ),
        Figure("probes", ("probes.json",), _docs_probes),
        Figure("probes-six-conditions", ("probes-six-conditions.json",), _docs_probes_conditions),
        Figure(
            "probes-unlabelled-heldout",
            ("probes-unlabelled-heldout.json",),
            lambda r: _docs_probes_unlabelled(r, "probes-unlabelled-heldout.json"),
        ),
        Figure(
            "probes-unlabelled-dev",
            ("probes-unlabelled-dev.json",),
            lambda r: _docs_probes_unlabelled(r, "probes-unlabelled-dev.json"),
        ),
        Figure(
            "probes-unlabelled-heldout-consolidation",
            ("probes-unlabelled-heldout-consolidation.json",),
            lambda r: _docs_probes_unlabelled(r, "probes-unlabelled-heldout-consolidation.json"),
        ),
        Figure("events-heldout", ("events-heldout.json",), _docs_events),
        Figure("redaction", ("bench-redaction-before.json", "bench-redaction.json"), _docs_redaction),
        Figure("events-blind-v2", ("events-blind-v2.json",), lambda r: _docs_events(r, "events-blind-v2.json")),
        Figure(
            "probes-unlabelled-blind-v2",
            ("probes-unlabelled-blind-v2.json",),
            lambda r: _docs_probes_unlabelled(r, "probes-unlabelled-blind-v2.json"),
        ),
        Figure("events-blind-v3", ("events-blind-v3.json",), lambda r: _docs_events(r, "events-blind-v3.json")),
        Figure(
            "probes-unlabelled-blind-v3",
            ("probes-unlabelled-blind-v3.json",),
            lambda r: _docs_probes_unlabelled(r, "probes-unlabelled-blind-v3.json"),
        ),
        Figure("events-fit", ("events-fit.json",), _docs_events_fit),
        Figure("insight", ("insight.json",), _docs_insight),
        Figure("insight-seeds", ("insight-seeds.json",), _docs_insight_seeds),
        Figure("consolidation", ("consolidation.json",), _docs_consolidation),
        Figure("index-detector", ("bench-index-detector.json",), _docs_index_detector),
        Figure("imprinting", ("imprinting.json",), _docs_imprinting),
        Figure(
            "retrieval-unkeyed",
            UNKEYED_RUNS,
            retrieval_unkeyed,
        ),
        Figure("retrieval-embedders", EMBEDDER_RUNS[:1], retrieval_embedders, optional=EMBEDDER_RUNS[1:]),
    )
}


@dataclass(frozen=True)
class Stale:
    """A figure whose text in a document is not what its result files render."""

    document: str
    figure: str
    written: str
    generated: str


def documents(root: Path) -> list[Path]:
    """The files whose figures are generated: the README and every page under docs/."""
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.is_file()]


def render(text: str, records: Callable[[str], BenchmarkResult | None], *, document: str) -> tuple[str, list[Stale]]:
    """``text`` with each figure rendered, and the figures whose written text differed; ``records`` gives a
    source's record, None when its file is not there. Unknown figure names, markers without their closing
    ``<!-- /figures -->`` and a missing source a figure needs are refused naming the document or the file."""
    opened = [m["name"] for m in _OPENING.finditer(text)]
    if len(opened) != len(_FIGURE.findall(text)) or len(_CLOSINGS.findall(text)) != len(opened):
        raise LCAError(f"{document}: every <!-- figures:NAME --> needs one {_CLOSING} before the next figure")
    stale: list[Stale] = []

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in FIGURES:
            raise LCAError(f"{document}: unknown figure '{name}'; known: {', '.join(sorted(FIGURES))}")
        figure = FIGURES[name]
        found = {source: records(source) for source in figure.sources + figure.optional}
        missing = [source for source in figure.sources if found[source] is None]
        if missing:
            raise LCAError(f"{EXAMPLES / missing[0]}: no such result file (figure '{name}' reads it)")
        generated = figure.template(*found.values())
        if generated != match["body"]:
            stale.append(Stale(document, name, match["body"], generated))
        return f"<!-- figures:{name} -->{generated}{_CLOSING}"

    return _FIGURE.sub(replace, text), stale


def update(root: Path = ROOT, *, check: bool = False) -> tuple[list[Stale], int]:
    """Render every figure of every document under ``root`` from ``root/results/examples``; write the documents
    that changed unless ``check``. Returns the stale figures and how many figures there are in all."""
    cache: dict[str, BenchmarkResult | None] = {}

    def records(source: str) -> BenchmarkResult | None:
        if source not in cache:
            path = root / EXAMPLES / source
            cache[source] = BenchmarkResult.read(path) if path.is_file() else None
        return cache[source]

    stale: list[Stale] = []
    total = 0
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        total += len(_FIGURE.findall(text))
        rendered, found = render(text, records, document=str(path.relative_to(root)))
        stale += found
        if found and not check:
            path.write_text(rendered, encoding="utf-8")
    return stale, total
