"""``lca checkpoint``, ``proposals``, ``approve``, ``ledger``, ``events``, ``schema``, ``audit`` and ``identity``: the
governed side of memory (consolidation, the approval gate, the learned-state ledger), from the shell.

Nothing here imports the evaluation harness: a model string resolves through ``protocols.providers.models``
(llama.cpp in process for local models; inspect only for a remote provider's string). ``checkpoint``,
``schema`` and ``identity set`` write and may start a store; the others read and refuse a path that holds
none (``protocols.cli.common.checked_store_path``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import protocols.cli.common as common
from lca.errors import LCAError
from lca.identity import IDENTITY_FILES, IdentityStore
from lca.ledger import Ledger, diff_states
from protocols.analysis.sheets import SheetRefused
from protocols.providers.models import is_local, text_generator
from protocols.study.manifest import json_safe


def _generator(model: str | None, *, threads: int | None, seed: int, timeout: float | None, role: str):
    """``smollm2`` (default), a GGUF path or ``lca-local/...``: the in-process llama.cpp runtime; any other
    inspect model string (``openai/...``, ``anthropic/...``, ``vllm/...``, ``hf/...``) is resolved now (it
    fails here, with the provider's message, rather than mid-cycle) and called through inspect."""
    if model is None or is_local(model):  # no model string: the default local model
        return text_generator(model or "", role=role, n_threads=threads, seed=seed, timeout_s=timeout)
    return text_generator(model, role=role)


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from lca.consolidation import ConsolidationConfig  # loads the index (faiss): not for `lca --help`

    substrate = common.open_store(args)
    writer = _generator(args.model, threads=args.threads, seed=args.seed, timeout=args.timeout, role="summarizer")
    reviewer = (
        writer
        if not args.reviewer_model
        else _generator(
            args.reviewer_model, threads=args.threads, seed=args.seed, timeout=args.timeout, role="reviewer"
        )
    )
    try:
        config = ConsolidationConfig(verify=not args.no_verify, unsupported=args.unsupported, seed=args.seed)
        result = substrate.checkpoint(
            writer,
            reviewer=reviewer,
            trigger=args.trigger,
            approver=args.approver,
            config=config,
            session_id=args.session,
            progress=None if args.json else (lambda m: print(f"  .. {m}", flush=True)),
        )
        if args.json:
            print(json.dumps(result.to_dict(), indent=2, default=str))
            return 0
        counts = result.counts
        print(
            f"cycle {result.cycle_id} ({result.trigger}) in {result.seconds:.1f} s; writer {result.writer_model}, "
            f"reviewer {result.reviewer_model or 'none (verification off)'}"
        )
        print(f"  span: {sum(m['entries'] for m in result.span.values())} entries in {len(result.span)} session(s)")
        print(f"  candidates: {counts['candidates']}; verdicts: {counts['verdicts'] or {}}")
        for verdict, candidate in zip(result.verdicts, result.candidates, strict=False):
            common.show(f"   - [{verdict.verdict}] {candidate.claim[:90]}  ({verdict.reason})")
        for write in result.writes:
            common.show(f"  write: {write.action} {write.memory_id}")
        for back in result.read_back:
            common.show(f"  read-back: {back.memory_id}: {'ok' if back.retrieved else 'FAILED'} ({back.detail})")
        for failure in result.failures:
            common.show(f"  failure: {failure.stage}/{failure.kind}: {failure.message}")
        return 0
    finally:
        for generator in {id(writer): writer, id(reviewer): reviewer}.values():
            if hasattr(generator, "close"):
                generator.close()
        substrate.close()


def cmd_proposals(args: argparse.Namespace) -> int:
    from lca.consolidation import pending_proposals

    with common.open_store(args) as substrate:
        pending = pending_proposals(substrate)
        if args.json:
            print(json.dumps(pending, indent=2))
        elif not pending:
            print("no proposals wait for approval")
        for p in [] if args.json else pending:
            common.show(f"{p['id']}: {p['record']['type']} {p['record']['id']} ({p['why']})\n    {p['body'][:200]}")
        return 0


def cmd_approve(args: argparse.Namespace) -> int:
    from lca.consolidation import approve_proposal

    with common.open_store(args) as substrate:
        for write in approve_proposal(substrate, args.proposal, approver=args.approver):
            common.show(f"{write.action}: {write.memory_id} (approved by {args.approver})")
        return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    with common.open_store(args) as substrate:
        ledger = Ledger(substrate.home)
        experience = substrate.experience
        if args.diff:
            t1, t2 = (common.moment(t) for t in args.diff)
            out = diff_states(ledger.state(as_of=t1), ledger.state(as_of=t2))
            before, after = experience.counts_at(t1), experience.counts_at(t2)
            out["experience"] = {
                target: {
                    k: after.get(target, {}).get(k, 0) - before.get(target, {}).get(k, 0)
                    for k in set(after.get(target, {})) | set(before.get(target, {}))
                }
                for target in sorted(set(before) | set(after))
                if dict(before.get(target, {})) != dict(after.get(target, {}))
            }
        else:
            as_of = common.moment(args.as_of) if args.as_of else None
            out = ledger.state(as_of=as_of).summary()
            out["experience"] = {target: dict(c) for target, c in sorted(experience.counts_at(as_of).items())}
        print(json.dumps(out, indent=2, default=str))
        return 0


def cmd_events(args: argparse.Namespace) -> int:
    """List the store's replacement events (labelled and inferred) with how each acts, or confirm or reject one."""
    with common.open_store(args) as substrate:
        if args.action in ("confirm", "reject"):
            if not args.event:
                raise LCAError(f"lca events {args.action}: name the event id (lca events list shows them)")
            decision = "confirmed" if args.action == "confirm" else "rejected"
            event = substrate.decide_event(args.event, decision, by=args.by, reason=args.reason or "")
            common.show(f"{decision}: {event.id} ({event.kind} {event.of} by {event.by}), recorded in the ledger")
            return 0
        config = substrate.recall_config
        acting = substrate.events.replacements(hold=config.hold_confidence, mark=config.mark_confidence)
        status = {r.event.id: r.status for reps in acting.values() for r in reps}
        decisions = substrate.events.decisions()
        rows = [
            {**e.to_dict(), "acts": status.get(e.id, "no"), "decision": decisions.get(e.id)}
            for e in substrate.events.events()
            if args.all or e.id in status
        ]
        if args.json:
            print(json.dumps({"events": rows, "refused": substrate.events.refused()}, indent=2))
            return 0
        if not rows:
            common.show("no replacement events act in this store" + ("" if args.all else " (--all lists every one)"))
        for r in rows:
            decided = f", {r['decision']}" if r["decision"] else ""
            common.show(
                f"{r['id']}  {r['kind']} {r['of']} by {r['by']}  {r['origin']} ({r['detector']}, "
                f"{r['confidence']:.2f}{decided}): {r['acts']}" + (f"\n    {r['evidence']}" if r["evidence"] else "")
            )
        for line in substrate.events.refused():
            common.show(f"refused: {line}")
        return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from lca.insight.schema_gates import SchemaGateConfig
    from lca.insight.schemas import establish_schema, measure_schema, measure_trial, propose_schema, start_trial
    from lca.insight.taxonomy import refresh_taxonomy
    from lca.insight.trial_gate import TrialGateConfig

    kinds = {
        "propose": "schema_proposed",
        "deprecate": "schema_deprecated",
        "revise": "schema_revised",
    }
    settings = dict(_gate_setting(item) for item in args.gate or ())
    trial_names = {f.name for f in fields(TrialGateConfig)}
    gates = SchemaGateConfig.from_mapping({k: v for k, v in settings.items() if k not in trial_names})
    trial_gates = TrialGateConfig.from_mapping({k: v for k, v in settings.items() if k in trial_names})
    with common.open_store(args) as substrate:
        home = substrate.home
        if args.action == "evidence":
            current = Ledger(home).state().schemas.get(args.schema)
            # a candidate from an insight is gated on its way to trial, a schema on trial on its way to established
            trial = current is not None and current.state == "candidate" and bool(current.insight)
            report = (
                measure_trial(home, args.schema, trial_gates) if trial else measure_schema(home, args.schema, gates)
            )
            if args.json:
                print(json.dumps(json_safe(report.to_dict()), indent=2, ensure_ascii=False))
                return 0
            step = "candidate -> trial" if trial else "trial -> established"
            common.show(f"schema {args.schema} ({step}): " + ("every gate passes" if report.passed else "not yet"))
            for gate in report.gates:
                common.show(f"  {gate.gate}: {'pass' if gate.passed else 'FAIL'}: {gate.detail}")
            return 0
        if args.action == "trial":
            schema, _ = start_trial(home, args.schema, approver=args.approver, config=trial_gates)
        elif args.action == "establish":
            schema, _ = establish_schema(home, args.schema, approver=args.approver, config=gates)
        elif args.action == "propose" and (args.from_insight or args.records):
            records = [r.strip() for r in (args.records or "").split(",") if r.strip()]
            schema = propose_schema(
                home, args.schema, args.description or "", insight=args.from_insight, records=records
            )
        else:
            schema = Ledger(home).schema_event(
                kinds[args.action],
                args.schema,
                description=args.description,
                approver=args.approver,
                reason=args.reason,
            )
        tagged = refresh_taxonomy(home)  # an established schema tags its records now, a deprecated one untags them
        common.show(
            f"schema {schema.id}: {schema.state} (version {schema.version})"
            + (f", over {len(schema.members)} records" if schema.members else "")
            + (f"; {len(tagged)} record(s) carry an established schema's tag" if tagged else "")
        )
        return 0


def _gate_setting(item: str) -> tuple[str, float]:
    name, sep, value = item.partition("=")
    try:
        if not sep:
            raise ValueError
        return name.strip(), (int(value) if value.strip().isdigit() else float(value))
    except ValueError:
        raise LCAError(f"--gate takes NAME=NUMBER, got {item!r}") from None


def cmd_audit(args: argparse.Namespace) -> int:
    from protocols.audit import export_prevented_audit  # loads pandas and pyarrow

    with common.open_store(args) as substrate:
        manifest = export_prevented_audit(
            substrate, sample=args.sample, out_dir=Path(args.out), seed=args.seed, controls=args.controls
        )
        print(
            f"{manifest['claims']} claim(s) and {manifest['controls']} control(s) written to {args.out} "
            f"(items.csv and items.html for raters, key.jsonl kept apart; {manifest['events_available']} event(s) "
            f"available); then: lca audit import FILLED.csv... --dir {args.out}"
        )
        return 0


def cmd_audit_import(args: argparse.Namespace) -> int:
    """The filled audit sheets back: one line per problem and exit 2 (nothing written), else the report."""
    from protocols.audit import import_prevented_audit  # loads pandas and pyarrow

    try:
        record = import_prevented_audit(
            Path(args.dir), args.sheets, threshold=args.threshold, resamples=args.resamples, seed=args.seed
        )
    except SheetRefused as refused:
        for line in refused.lines():
            common.print_error(line)
        common.print_error(f"nothing imported: {len(refused.problems)} problem(s) in the sheet(s)")
        return common.USAGE_ERROR
    if args.json:
        print(json.dumps(json_safe(record), indent=2, ensure_ascii=False))
        return 0
    common.show(record["verdict"])
    print(f"written: {record['files']['json']}, {record['files']['markdown']}")
    return 0


def cmd_identity(args: argparse.Namespace) -> int:
    args.creates_store = args.action == "set"  # show reads; set writes, and may start a store
    with common.open_store(args) as substrate:
        store = IdentityStore(substrate.home)
        if args.action == "show":
            for name in [args.name] if args.name else IDENTITY_FILES:
                common.show(f"== {name} ({store.path_for(name)})\n{store.read(name) or '(empty)'}")
            return 0
        if not args.name or not args.file:
            raise LCAError("identity set needs NAME and --file")
        text = Path(args.file).read_text(encoding="utf-8")
        if args.approver:
            print(f"wrote {store.write(args.name, text, approver=args.approver)} (approved by {args.approver})")
        else:
            proposal = store.propose(args.name, text, why=args.why or "changed from the command line")
            print(f"no --approver: held as {proposal} (lca approve {proposal} --approver NAME)")
        return 0


def add_parsers(sub, common_args: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "checkpoint",
        parents=[common_args],
        help="run one consolidation cycle (elected trigger)",
        description="Consolidate the transcript written since the last checkpoint into memory, "
        "through the verification stage, with the local llama.cpp model.",
    )
    p.add_argument(
        "--model",
        default="smollm2",
        help="writer model: smollm2 (default), a GGUF path, or any "
        "inspect model string (lca-local/..., openai/..., ...)",
    )
    p.add_argument(
        "--reviewer-model", help="reviewer model, same forms (default: the writer model, in a separate call)"
    )
    p.add_argument("--approver", help="named approver for procedural writes (else they are held as proposals)")
    p.add_argument(
        "--trigger", default="elected", choices=["elected", "pre_compaction", "session_end", "context_pressure"]
    )
    p.add_argument("--session", help="session to log the checkpoint entry in (default: the last one read)")
    p.add_argument("--no-verify", action="store_true", help="ablation: write without the verification stage")
    p.add_argument("--unsupported", choices=["downgrade", "remove"], default="downgrade")
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: up to 2)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per generator call (default 120)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_checkpoint, creates_store=True)

    p = sub.add_parser("proposals", parents=[common_args], help="procedural writes waiting for a named approver")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_proposals)

    p = sub.add_parser("approve", parents=[common_args], help="apply a held proposal with a named approver")
    p.add_argument("proposal")
    p.add_argument("--approver", required=True)
    p.set_defaults(func=cmd_approve)

    p = sub.add_parser(
        "ledger",
        parents=[common_args],
        help="the learned state (replayed from its event log)",
        description="Replay the ledger into the learned state now, at a past time (--as-of), "
        "or diff two worldviews (--diff T1 T2). Times: ISO 8601 or epoch seconds.",
    )
    p.add_argument("--as-of")
    p.add_argument("--diff", nargs=2, metavar=("T1", "T2"))
    p.set_defaults(func=cmd_ledger)

    p = sub.add_parser(
        "events",
        parents=[common_args],
        help="turns later turns corrected or superseded (labelled or inferred): list, confirm, reject",
        description="List the replacement events recall acts on (--all: every one the store holds, with its "
        "confidence and what its detector read), or record a person's decision on one in the ledger: a confirmed "
        "event acts as a host's label, a rejected one never acts again. An unknown id changes nothing (exit 2).",
    )
    p.add_argument("action", choices=["list", "confirm", "reject"])
    p.add_argument("event", nargs="?", help="confirm, reject: the event id (ev-...)")
    p.add_argument("--by", default="cli", help="confirm, reject: who decides (recorded in the ledger)")
    p.add_argument("--reason", help="confirm, reject: why")
    p.add_argument("--all", action="store_true", help="list: also the events that do not act (rejected, below mark)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser(
        "schema",
        parents=[common_args],
        help="learned-schema lifecycle: candidate -> trial -> established -> deprecated",
    )
    p.add_argument("action", choices=["propose", "trial", "establish", "deprecate", "revise", "evidence"])
    p.add_argument("schema")
    p.add_argument("--description")
    p.add_argument("--from-insight", metavar="HYP", help="propose: over an insight hypothesis's records")
    p.add_argument("--records", help="propose: over these records (comma-separated ids)")
    p.add_argument("--approver", help="required for establish, and for trial of a schema proposed from no insight")
    p.add_argument("--reason", help="required for deprecate")
    p.add_argument(
        "--gate",
        action="append",
        metavar="NAME=NUMBER",
        help="trial, establish, evidence: a gate threshold other than its default (trial: min_margin, min_cycles, "
        "min_retained; establish: min_lift, min_recalls, min_anticipated, min_anticipation, min_compression, ...)",
    )
    p.add_argument("--json", action="store_true", help="evidence: print the gates as JSON")
    p.set_defaults(func=cmd_schema, creates_store=True)

    p = sub.add_parser(
        "identity",
        parents=[common_args],
        help="standing identity, user and instruction files (writes need a named approver)",
    )
    p.add_argument("action", choices=["show", "set"])
    p.add_argument("name", nargs="?", choices=["identity", "user", "instructions"])
    p.add_argument("--file", help="set: the new text")
    p.add_argument("--approver", help="set: the named approver (else the change is held as a proposal)")
    p.add_argument("--why", help="set: the reason recorded with a held proposal")
    p.set_defaults(func=cmd_identity)

    p = sub.add_parser("audit", parents=[common_args], help="exports for blind rating, and the report from the ratings")
    audit = p.add_subparsers(dest="audit", required=True)
    a = audit.add_parser(
        "prevented",
        parents=[common_args],
        help="a sample of prevented-mistake claims with their spans, mixed with controls, for blind rating",
    )
    a.add_argument("--sample", type=int, required=True)
    a.add_argument("--controls", type=float, default=0.5, help="share of control items (default 0.5)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--out", default="results/audit/prevented")
    a.set_defaults(func=cmd_audit)
    i = audit.add_parser(
        "import",
        help="read the filled audit sheets back and write the experiential-weight audit report",
        description="Read filled copies of an audit's items.csv (each row: rating yes, no or unsure, and the "
        "rater's name). Any problem is printed one line each, naming file, line and field, and nothing is written "
        "(exit 2). Otherwise report.json and report.md go to the audit folder: the share of claims raters confirm "
        "(Wilson 95% interval) against controls, the difference, and Krippendorff's alpha among the raters.",
    )
    i.add_argument("sheets", nargs="+", metavar="SHEET", help="filled sheets (CSV), one or more")
    i.add_argument("--dir", default="results/audit/prevented", help="the audit folder (key.jsonl, manifest.json)")
    i.add_argument("--threshold", type=float, help="alpha threshold for the raters' agreement (default 0.667)")
    i.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for alpha's interval")
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--json", action="store_true", help="print the report as JSON")
    i.set_defaults(func=cmd_audit_import)
