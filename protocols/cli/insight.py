"""``lca integrate`` (one integration cycle: Living Memory's "sleep") and ``lca insights`` (its review queue).

``integrate`` signs the store's memories with the summarizer role (the local SmolLM2 by default, any model string
``lca checkpoint`` takes), embeds both spaces with the store's embedder, scores cross-domain pairs by the
differential against the null model's threshold and records what surfaced in the ledger (``lca.insight``).
``insights list|show|refute|review`` reads and reviews what it surfaced (``review``: the adversarial lenses again, on
demand). Both refuse a path that holds no store.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import protocols.cli.common as common
from lca.errors import LCAError
from protocols.cli.governance import _generator
from protocols.study.manifest import json_safe


def cmd_integrate(args: argparse.Namespace) -> int:
    from lca.insight import DifferentialConfig, IntegrationConfig, ReviewConfig, SummarizerSigner, integrate

    config = IntegrationConfig(
        review=ReviewConfig(lenses=() if args.no_review else ReviewConfig().lenses, rule=args.review_rule),
        differential=DifferentialConfig(args.composition, args.content_weight),
        null_shuffles=args.shuffles,
        null_quantile=args.quantile,
        null_statistic=args.null_statistic,
        null_tail=args.tail,
        max_surfaced=args.max_surfaced,
        probe_hot=args.probe_hot,
        probe_max_surfaced=args.probe_max_surfaced,
        seed=args.seed,
    )
    substrate = common.open_store(args)
    generator = _generator(args.model, threads=args.threads, seed=args.seed, timeout=args.timeout, role="summarizer")
    try:
        result = integrate(
            substrate.home,
            SummarizerSigner(generator, seed=args.seed),
            substrate.embedder,
            config,
            rebuild=args.rebuild,
            progress=not args.json,
        )
    finally:
        if hasattr(generator, "close"):
            generator.close()
        substrate.close()
    if args.json:
        print(json.dumps(json_safe(result.to_dict()), indent=2, ensure_ascii=False))
        return 0
    d = result.distill
    refused = ", ".join(f"{k} {v}" for k, v in d.refused.items() if v) or "none"
    common.show(
        f"cycle {result.cycle_id} in {result.seconds:.1f} s; signer {d.model} ({d.prompt_version}), "
        f"embedder {result.provenance['embedder']}"
    )
    skipped = ", ".join(f"{k} {v}" for k, v in result.skipped.items() if v) or "none"
    common.show(f"  records: {result.records} (skipped: {skipped}); domains: {result.domains}")
    common.show(
        f"  signatures: {d.signed} new, {d.reused} reused; refused this pass: {refused}; "
        f"refused before: {d.refused_before}; domain words scrubbed: {d.scrubbed_terms}"
    )
    centrality = result.centrality
    if centrality is not None:
        links = ", ".join(f"{k} {v}" for k, v in centrality.links.items())
        common.show(
            f"  centrality refreshed: {centrality.nodes['record']} records, links: {links}; "
            + (f"converged in {centrality.iterations} iterations" if centrality.converged else "NOT converged")
        )
    if result.note:
        common.show(f"  nothing scored: {result.note}")
        return 0
    null = result.null
    threshold = "undefined" if null is None or null.threshold is None else f"{null.threshold:.3f}"
    why = f" ({null.reason})" if null is not None and null.reason else ""
    if null is not None:
        read = f"upper {null.tail:g} of {null.pooled_spurious} pooled" if null.tail else f"q{null.quantile:g} of maxima"
        why += f" [{null.statistic}: {read} spurious scores, {null.spurious_pairs} same-domain pairs]"
    common.show(
        f"  clusters: {result.clusters}; pairs scored {result.pairs_scored}, cross-domain {result.cross_domain_pairs}; "
        f"null threshold {threshold}{why}"
    )
    common.show(
        f"  above the threshold: {result.above_threshold} pair(s); surfaced {len(result.candidates)} candidate(s), "
        f"deferred {len(result.deferred)} (at most {config.max_surfaced} a cycle)"
    )
    for candidate, rec in zip(result.candidates, result.reconciliations):
        common.show(f"   - {rec.hypothesis} [{rec.action}] {candidate.score:.3f} {', '.join(candidate.members)}")
    probes = result.probes
    if probes is not None:
        hot = ", ".join(f"{h.id} ({h.activation:.2f})" for h in probes.hot) or "none"
        common.show(
            f"  probes: hot {hot}; {probes.dormant} dormant; {probes.pairs_scored} pair(s) scored, "
            f"{probes.above_threshold} above; surfaced {len(probes.candidates)}, deferred {len(probes.deferred)} "
            f"(at most {config.probe_max_surfaced} a cycle)" + (f"; {probes.note}" if probes.note else "")
        )
        for candidate, rec in zip(probes.candidates, probes.reconciliations):
            common.show(
                f"   - {rec.hypothesis} [{rec.action}, probe] {candidate.score:.3f} {', '.join(candidate.members)}"
            )
    for outcome in result.reviews:
        common.show(f"  review {outcome.hypothesis}: {_verdicts(outcome.outcome, outcome.rule, outcome.verdicts)}")
    if result.recovery is not None:
        common.show(f"  {result.recovery.describe()}")
    return 0


def _verdicts(outcome: str, rule: str, verdicts) -> str:
    """A review on one line: its outcome under its rule, each lens's verdict and score."""

    def get(v, key):
        return v[key] if isinstance(v, dict) else getattr(v, key)

    lenses = ", ".join(f"{get(v, 'lens')} {get(v, 'verdict')} {get(v, 'score'):.2f}" for v in verdicts)
    return f"{outcome} ({rule}: {lenses})"


def cmd_insights(args: argparse.Namespace) -> int:
    from lca.insight import PROBE_TYPE, ReviewConfig, insight_detail, recovery_gauge, refute, review_queue, review_store
    from lca.ledger import Ledger

    home = common.checked_store_path(args)
    if args.action == "list":
        items = review_queue(home, everything=args.all, order=args.order)
        if args.json:
            print(json.dumps([json_safe(i.__dict__) for i in items], indent=2, ensure_ascii=False))
            return 0
        common.show(recovery_gauge(Ledger(home).state()).describe())
        if not items:
            common.show("no insight waits for review" + ("" if args.all else " (--all lists every one)"))
        for item in items:
            score = "-" if item.last_score is None else f"{item.last_score:.3f}"
            central = "-" if item.centrality is None else f"{item.centrality:.2f}"
            origin = "  (probe)" if item.type == PROBE_TYPE else ""
            common.show(
                f"{item.id}  {item.status}{origin}  score {score} over {len(item.trajectory)} cycle(s)  "
                f"centrality {central}  "
                f"{', '.join(item.domains)}: {', '.join(item.records)}"
            )
            if item.review is not None:
                common.show(
                    f"    review {_verdicts(item.review['outcome'], item.review['rule'], item.review['verdicts'])}"
                )
        return 0
    if args.action == "taxonomy":
        from lca.insight.taxonomy import record_taxonomy

        taxonomy = record_taxonomy(home)
        if args.json:
            print(json.dumps({rid: [t.__dict__ for t in tags] for rid, tags in taxonomy.items()}, indent=2))
            return 0
        if not taxonomy:
            common.show("no record is covered by an established schema")
        for rid, tags in sorted(taxonomy.items()):
            common.show(f"{rid}: " + ", ".join(f"{t.schema} v{t.version} ({t.how})" for t in tags))
        return 0
    if args.action == "review":
        outcomes = review_store(home, ReviewConfig(rule=args.review_rule), args.id)
        if args.json:
            print(json.dumps([json_safe(asdict(o)) for o in outcomes], indent=2, ensure_ascii=False))
            return 0
        if not outcomes:
            common.show("no live insight needs a review (name one to review it again)")
        for outcome in outcomes:
            common.show(f"{outcome.hypothesis}: {_verdicts(outcome.outcome, outcome.rule, outcome.verdicts)}")
            for v in outcome.verdicts:
                common.show(f"    {v.lens} {v.verdict} {v.score:.2f}: {v.reason}")
            if outcome.outcome == "refuted":
                common.show("    refuted: dormant (kept in the ledger; it resurfaces on new evidence)")
        return 0
    if not args.id:
        raise LCAError(f"lca insights {args.action}: name the insight id (lca insights list shows them)")
    if args.action == "refute":
        refute(home, args.id, reason=args.reason or "", by=args.by or "")
        common.show(f"refuted: {args.id} is dormant (kept in the ledger; it resurfaces on new evidence)")
        return 0
    detail = insight_detail(home, args.id)
    if args.json:
        print(json.dumps(json_safe({**detail, "item": detail["item"].__dict__}), indent=2, ensure_ascii=False))
        return 0
    item = detail["item"]
    common.show(f"{item.id}  {item.status}  ({item.type})\n  {item.claim}")
    common.show("  trajectory: " + ", ".join(f"{t['score']:.3f} ({t['kind']})" for t in item.trajectory))
    for question in item.questions:
        common.show(f"  refuted before, to answer: {question}")
    if item.review is not None:
        common.show(f"  review {_verdicts(item.review['outcome'], item.review['rule'], item.review['verdicts'])}")
        for v in item.review["verdicts"]:
            common.show(f"    {v['lens']} {v['verdict']} {v['score']:.2f}: {v['reason']}")
    for member in detail["members"]:
        central = "-" if member["centrality"] is None else f"{member['centrality']:.2f}"
        common.show(f"  {member['id']} [{member['domain']}] (centrality {central}): {member['text'][:160]}")
        common.show(f"      signature ({member['signed_by']}): {member['signature']}")
        for tag in member["schemas"]:
            common.show(f"      schema {tag['schema']} v{tag['version']} ({tag['how']})")
    return 0


def add_parsers(sub, common_args: argparse.ArgumentParser) -> None:
    from lca.insight.differential import COMPOSITIONS  # numpy only
    from lca.insight.review import RULES

    p = sub.add_parser(
        "integrate",
        parents=[common_args],
        help="run one integration cycle (structural signatures, the differential, the null model, the ledger)",
        description="Sign the store's memories with the summarizer role, score cross-domain pairs by the dual-space "
        "differential against a null model of shuffled domain labels, and record what surfaces in the ledger.",
    )
    p.add_argument(
        "--model",
        default="smollm2",
        help="summarizer model: smollm2 (default), a GGUF path, or any inspect model string",
    )
    p.add_argument("--composition", choices=COMPOSITIONS, default="discounted", help="how the two cosines compose")
    p.add_argument("--content-weight", type=float, default=1.0, help="the weight of the content cosine (0..2)")
    p.add_argument("--shuffles", type=int, default=200, help="null model: domain-label shuffles (default 200)")
    p.add_argument(
        "--null-statistic",
        choices=("tail", "max"),
        default="tail",
        help="null model: tail (the pooled spurious scores' upper --tail, the default) or max (the --quantile of each "
        "shuffle's best spurious score)",
    )
    p.add_argument(
        "--tail", type=float, default=0.001, help="null model: the share of spurious scores above it (default 0.001)"
    )
    p.add_argument("--quantile", type=float, default=0.95, help="null model, max: the quantile to beat (default 0.95)")
    p.add_argument("--max-surfaced", type=int, default=5, help="candidates surfaced per cycle (default 5)")
    p.add_argument(
        "--probe-hot",
        type=int,
        default=5,
        help="hot cycle: the most active records paired with dormant ones of other domains (default 5; 0: no probes)",
    )
    p.add_argument("--probe-max-surfaced", type=int, default=2, help="probe candidates surfaced per cycle (default 2)")
    p.add_argument("--no-review", action="store_true", help="ablation: surface without the adversarial lens review")
    p.add_argument("--review-rule", choices=RULES, default="veto", help="how the lenses' verdicts combine")
    p.add_argument("--rebuild", action="store_true", help="sign every record again with this model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: up to 2)")
    p.add_argument("--timeout", type=float, help="seconds per model call (a longer one is a counted refusal)")
    p.add_argument("--json", action="store_true", help="print the cycle's report as JSON")
    p.set_defaults(func=cmd_integrate)

    q = sub.add_parser(
        "insights",
        parents=[common_args],
        help="the integration cycle's review queue: list, show, refute, review; taxonomy: schema tags",
        description="List the insight candidates waiting for review (--all: every one) with the ledger's recovery "
        "rate, show one with its records, signatures and lens verdicts, refute one (it turns dormant and resurfaces "
        "only on new evidence), run the adversarial lenses on the ones due (or on one named), or list the records "
        "established schemas tag (taxonomy).",
    )
    q.add_argument("action", choices=["list", "show", "refute", "review", "taxonomy"])
    q.add_argument("id", nargs="?", help="show, refute: the insight's id; review: one to review again (else all due)")
    q.add_argument("--review-rule", choices=RULES, default="veto", help="review: how the lenses' verdicts combine")
    q.add_argument("--all", action="store_true", help="list: dormant, promoted and held ones too")
    q.add_argument(
        "--order",
        choices=["score", "centrality"],
        default="score",
        help="list: by the last score (the more central first among equals; default), or by centrality",
    )
    q.add_argument("--reason", help="refute: why")
    q.add_argument("--by", help="refute: the reviewer's name")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_insights)
