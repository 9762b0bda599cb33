"""``lca scenarios generate``: a seeded set of generated working histories (protocols/scenarios) written as JSONL
with its data card beside it (``F.card.md`` and ``F.card.json``)."""

from __future__ import annotations

import argparse
import sys

from protocols.evals.domain_imprinting.scenarios import Parameters
from protocols.evals.domain_imprinting.scenarios import write_set as write_longitudinal_set
from protocols.scenarios.card import write_set
from protocols.scenarios.domains import DOMAINS
from protocols.scenarios.generator import DENSITIES, MIN_SESSIONS, check_parameters
from protocols.scenarios.labels import LABEL_MODES


def add_parser(sub) -> None:
    p = sub.add_parser(
        "scenarios",
        help="generated scenario sets (docs/scenario-format.md, 'Generated sets')",
        description="Generated multi-session histories with planted events and program-checked probes.",
    )
    scenarios = p.add_subparsers(dest="scenarios_command", required=True, metavar="COMMAND")
    g = scenarios.add_parser(
        "generate",
        help="write a seeded scenario set and its data card",
        description="Write a seeded set of scenario-format-v2 histories to --out (JSONL) and its data card beside it "
        "(F.card.md, F.card.json). The same arguments give the same bytes.",
    )
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--scenarios", type=int, required=True, help="how many histories (domains taken in turn)")
    g.add_argument("--domains", default=",".join(DOMAINS), help=f"comma-separated, of: {', '.join(DOMAINS)}")
    g.add_argument("--density", choices=tuple(DENSITIES), default="medium", help="planted events and chatter")
    g.add_argument("--sessions", type=int, default=4, help=f"sessions per history (at least {MIN_SESSIONS})")
    g.add_argument(
        "--labels",
        choices=LABEL_MODES,
        default="all",
        help="which corrections and supersessions stay labelled on their turns: all, none, or mixed (each with "
        "probability one half); the others go to the scenario's gold_events (same histories, same gold)",
    )
    g.add_argument(
        "--behaviour",
        action="store_true",
        help="add push-back and role probes (requests that break a decision or preference in force, a change a "
        "named colleague owns, a call delegated to the agent) and the turns they rest on",
    )
    g.add_argument("--out", required=True, help="the JSONL file to write")
    g.set_defaults(func=run_generate)
    lo = scenarios.add_parser(
        "longitudinal",
        help="write a seeded longitudinal set for domain imprinting and its data card",
        description="Write identical agents' in-domain histories cut into epochs, with the same novel cases from every "
        "domain at each checkpoint (protocols/evals/domain_imprinting/scenarios.py), and its data card beside it.",
    )
    lo.add_argument("--seed", type=int, required=True)
    lo.add_argument(
        "--domains", default=",".join(DOMAINS), help=f"comma-separated, at least two of: {', '.join(DOMAINS)}"
    )
    lo.add_argument("--epochs", type=int, default=4, help="epochs of in-domain work (checkpoints: 0..epochs)")
    lo.add_argument("--sessions-per-epoch", type=int, default=2)
    lo.add_argument("--decisions", type=int, default=3, help="decision lessons per domain, besides its corrections")
    lo.add_argument("--reinforce", type=float, default=0.5, help="chance a met lesson is reinforced in a later epoch")
    lo.add_argument("--out", required=True, help="the JSONL file to write")
    lo.set_defaults(func=run_longitudinal)


def run_generate(args: argparse.Namespace) -> int:
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    try:
        check_parameters(
            scenarios=args.scenarios,
            domains=domains,
            density=args.density,
            sessions=args.sessions,
            labels=args.labels,
        )
    except ValueError as exc:
        print(f"lca: error: --{exc}", file=sys.stderr)
        return 2
    out, markdown, card_json, card = write_set(
        args.out,
        seed=args.seed,
        scenarios=args.scenarios,
        domains=domains,
        density=args.density,
        sessions=args.sessions,
        labels=args.labels,
        behaviour=args.behaviour,
    )
    c = card["counts"]
    categories = ", ".join(f"{k} {v}" for k, v in c["probes_by_category"].items())
    events = ", ".join(f"{k} {v}" for k, v in c["events_by_type"].items())
    print(f"{c['scenarios']} scenarios, {c['sessions']} sessions, {c['turns']} turns, {c['probes']} probes")
    print(f"events: {events}")
    if args.labels != "all":
        gold = ", ".join(f"{k} {v['unlabelled']}" for k, v in c["gold_events_by_type"].items())
        print(f"unlabelled (gold_events): {gold}")
    print(f"probes: {categories}")
    print(f"written: {out} (sha256 {card['sha256'][:12]}), {markdown}, {card_json}")
    return 0


def run_longitudinal(args: argparse.Namespace) -> int:
    params = Parameters(
        seed=args.seed,
        domains=tuple(d.strip() for d in args.domains.split(",") if d.strip()),
        epochs=args.epochs,
        sessions_per_epoch=args.sessions_per_epoch,
        decisions=args.decisions,
        reinforce=args.reinforce,
    )
    try:
        params.check()
    except ValueError as exc:
        print(f"lca: error: --{exc}", file=sys.stderr)
        return 2
    out, markdown, card_json, card = write_longitudinal_set(args.out, params)
    c = card["counts"]
    print(f"{c['agents']} agents x {c['checkpoints']} checkpoints: {c['scenarios']} scenarios, {c['probes']} cases")
    print(f"written: {out} (sha256 {card['sha256'][:12]}), {markdown}, {card_json}")
    return 0
