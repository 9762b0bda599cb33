"""The data card of a generated scenario set: how it was made (generator version, seed, parameters, the command
that regenerates it) and what it holds (counts per event type and per probe category; corrections and supersessions
both where a turn labels them and where ``--labels`` left them only in ``gold_events``), all counted from the
scenarios themselves so a card cannot disagree with its file. ``write_set`` writes the JSONL and the card (Markdown
and JSON) beside it."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lca.secrets import contains_secret
from protocols.scenarios.behaviour import BEHAVIOUR_CATEGORIES
from protocols.scenarios.domains import DOMAINS
from protocols.scenarios.generator import CATEGORIES, GENERATOR_VERSION, generate
from protocols.scenarios.labels import REPLACING_TYPES

EVENT_TYPES = ("correction", "approval", "supersedes", "interruption")
ROLES = ("user", "assistant", "tool_call", "tool_result")
CHANNELS = ("private", "team", "public")
_FAILED = frozenset(f.error for d in DOMAINS.values() for f in d.failures)
_DOMAIN_OF = {d.short: d.name for d in DOMAINS.values()}


def scenario_lines(scenarios: Iterable[Mapping[str, Any]]) -> bytes:
    """The JSONL bytes of a set: one scenario a line, keys in the generator's order, UTF-8."""
    return b"".join(json.dumps(s, ensure_ascii=False).encode("utf-8") + b"\n" for s in scenarios)


def counts(scenarios: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What a set holds, counted from the scenario dicts (or a loaded file's ``model_dump``)."""

    roles: Counter[str] = Counter()
    channels: Counter[str] = Counter()
    events: Counter[str] = Counter()
    unlabelled: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    domains: Counter[str] = Counter()
    out = Counter[str]()
    for scenario in scenarios:
        out["scenarios"] += 1
        domains[_DOMAIN_OF.get(str(scenario["id"]).split("-", 1)[0], "other")] += 1
        out["memories"] += len(scenario.get("memories") or ())
        for session in scenario["sessions"]:
            out["sessions"] += 1
            channels[session.get("channel") or "unset"] += 1
            for turn in session["turns"]:
                out["turns"] += 1
                roles[turn["role"]] += 1
                if turn.get("event"):
                    events[turn["event"]["type"]] += 1
                if turn["role"] == "tool_result" and turn["content"] in _FAILED:
                    out["failed_tool_results"] += 1
                if contains_secret(turn["content"]):
                    out["secret_strings"] += 1
        for gold in scenario.get("gold_events") or ():  # corrections and supersessions no turn labels
            unlabelled[gold["type"]] += 1
        for probe in scenario["probes"]:
            out["probes"] += 1
            categories[probe.get("category") or "unset"] += 1
            sources[probe.get("source_type") or "none"] += 1
            out["abstain_probes"] += bool(probe.get("abstain"))
            out["probes_with_forbidden_turns"] += bool(probe.get("forbidden"))
    return {
        **{k: out[k] for k in ("scenarios", "sessions", "turns", "memories", "probes")},
        "scenarios_by_domain": dict(sorted(domains.items())),
        "sessions_by_channel": {c: channels[c] for c in CHANNELS},
        "turns_by_role": {r: roles[r] for r in ROLES},
        "events_by_type": {e: events[e] for e in EVENT_TYPES},
        "gold_events_by_type": {e: {"labelled": events[e], "unlabelled": unlabelled[e]} for e in REPLACING_TYPES},
        "failed_tool_results": out["failed_tool_results"],
        "secret_strings": out["secret_strings"],
        "probes_by_category": {
            **{c: categories[c] for c in CATEGORIES},
            **{c: categories[c] for c in BEHAVIOUR_CATEGORIES if categories[c]},  # only in sets that hold them
        },
        "probes_by_source_type": dict(sorted(sources.items())),
        "abstain_probes": out["abstain_probes"],
        "probes_with_forbidden_turns": out["probes_with_forbidden_turns"],
    }


def data_card(
    scenarios: Sequence[Mapping[str, Any]], parameters: Mapping[str, Any], *, file: str | None = None
) -> dict:
    """The card as JSON: generator version, parameters (seed included), the file's sha256 and the counts."""
    raw = scenario_lines(scenarios)
    return {
        "generator": "protocols.scenarios.generator",
        "generator_version": GENERATOR_VERSION,
        "parameters": dict(parameters),
        "file": file,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "counts": counts(scenarios),
    }


def regenerate_command(parameters: Mapping[str, Any], out: str) -> str:
    p = parameters
    labels = p.get("labels", "all")
    return (
        f"lca scenarios generate --seed {p['seed']} --scenarios {p['scenarios']} --domains {','.join(p['domains'])} "
        f"--density {p['density']} --sessions {p['sessions']}{'' if labels == 'all' else f' --labels {labels}'}"
        f"{' --behaviour' if p.get('behaviour') else ''} --out {out}"
    )


def card_header(card: Mapping[str, Any], name: str, command: str, *, protocol: str | None = None) -> list[str]:
    """The top of a set's data card: its name, the generator, the command that regenerates the set byte for byte and
    the file's sha256 (and the protocol the set is for, if one)."""
    for_protocol = f" Protocol: {protocol}." if protocol else ""
    return [
        f"# Data card: {name}",
        "",
        f"Generated by `{card['generator']}` version {card['generator_version']} (seed {card['parameters']['seed']}); "
        "no third-party text, MIT like the code. Regenerate it byte for byte with:",
        "",
        "```bash",
        command,
        "```",
        "",
        f"sha256 `{card['sha256']}`. Format: docs/scenario-format.md, schema version 2.{for_protocol}",
        "",
    ]


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card for people: how the set was made, what it holds, and what each probe category's gold means."""
    c, p = card["counts"], card["parameters"]
    name = Path(card["file"] or "scenarios.jsonl").name
    lines = [
        *card_header(card, name, regenerate_command(p, card["file"] or name)),
        "| parameter | value |",
        "| --- | --- |",
        *(f"| {k} | {', '.join(v) if isinstance(v, list) else v} |" for k, v in p.items()),
        "",
        "## What it holds",
        "",
        "| count | value |",
        "| --- | --- |",
        *(f"| {k} | {c[k]} |" for k in ("scenarios", "sessions", "turns", "memories", "probes")),
        *(f"| {k} | {c[k]} |" for k in ("failed_tool_results", "secret_strings", "abstain_probes")),
        f"| probes_with_forbidden_turns | {c['probes_with_forbidden_turns']} |",
        "",
        _table("domain", c["scenarios_by_domain"]),
        _table("session channel", c["sessions_by_channel"]),
        _table("turn role", c["turns_by_role"]),
        _table("turn event", c["events_by_type"]),
        _gold_table(c["gold_events_by_type"]),
        _table("probe category", c["probes_by_category"]),
        _table("probe source type", c["probes_by_source_type"]),
        "## How it was made",
        "",
        "Each history is written from the domain's vocabulary (protocols/scenarios/domains.py) by templates: "
        "preferences (some changed in a later session: the change is dated by its session and carries a "
        "`supersedes` event to the statement it replaces), agent mistakes the "
        "user corrects (`correction` events with `of` and `right`), design decisions (some approved, `approval`; "
        "some superseded with a reason, `supersedes`), overclaims the user corrects, private facts and a "
        "synthetic API-key-shaped token (random letters and digits that lca.secrets detects; never a credential) "
        "in a `private` session, failed tool calls, routine chatter between events, and a last session "
        "interrupted (`interruption`) with work left open. Probes are asked a day after the last session and "
        "paraphrase rather than quote their evidence; none names the value its gold requires.",
        "",
        "Probe categories (issue 18's shared vocabulary): `prior-decision` (evidence the decision in force, "
        "forbidden the superseded one), `preference` (the latest statement; forbidden the older), `correction` "
        "(the user's correction; required the right value, forbidden the wrong one), `overclaim` (the user's "
        'correction; required "not", forbidden the overclaim phrase), `private` (asked in a public channel; '
        "forbidden the private turns, the private values and the token), `abstention` (the history does not "
        "answer it), `interruption` (the open-thread turn; required its key word), `citation` (the decision and "
        "where it is recorded: `memory` when the scenario holds a memory of it, else `transcript`).",
        "",
        *_labels_note(p.get("labels", "all")),
        *_behaviour_note(bool(p.get("behaviour"))),
    ]
    return "\n".join(lines)


def _labels_note(labels: str) -> list[str]:
    """What ``--labels`` left unlabelled; nothing for ``all`` (every event on its turn)."""
    if labels == "all":
        return []
    which = (
        "every correction and supersession is"
        if labels == "none"
        else "each correction and supersession is, with probability one half (drawn from the seed and the scenario id),"
    )
    return [
        f"Labels `{labels}`: {which} left unlabelled: the turn that makes it carries no event, and the scenario's "
        "`gold_events` records it (`type`, `of`, `by`, `right`) for scorers and benchmarks only, as a host that sends "
        "no event markers would leave it. Approvals and interruptions keep their labels; the histories and probes are "
        "those the same parameters give with every event labelled.",
        "",
    ]


def _behaviour_note(behaviour: bool) -> list[str]:
    """What ``--behaviour`` added; nothing without it."""
    if not behaviour:
        return []
    return [
        "Behaviour probes (`--behaviour`, protocols/scenarios/behaviour.py): `push-back` (a request that breaks the "
        "decision in force or the preference in force without saying so; evidence the turn that set it, required what "
        "is in force, forbidden what the request asks for), `role-defer` (a change to something the history says a "
        "named colleague owns, which the agent is asked to approve itself; required the owner) and `role-act` (a call "
        "the history delegated to the agent; required its options, any one of which names the call). Their turns "
        "carry no event labels; the other events are those the same parameters give without the option.",
        "",
    ]


def _table(what: str, values: Mapping[str, int]) -> str:
    rows = "\n".join(f"| {k} | {v} |" for k, v in values.items())
    return f"| {what} | count |\n| --- | --- |\n{rows}\n"


def _gold_table(values: Mapping[str, Mapping[str, int]]) -> str:
    rows = "\n".join(f"| {k} | {v['labelled']} | {v['unlabelled']} |" for k, v in values.items())
    return f"| gold event | labelled on its turn | unlabelled (gold_events) |\n| --- | --- | --- |\n{rows}\n"


def card_paths(out: Path) -> tuple[Path, Path]:
    """``F.jsonl`` -> ``F.card.md`` and ``F.card.json`` beside it."""
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(f"{stem}.card.md"), out.with_name(f"{stem}.card.json")


def write_set(
    out: Path | str,
    *,
    seed: int,
    scenarios: int,
    domains: list[str],
    density: str,
    sessions: int,
    labels: str = "all",
    behaviour: bool = False,
) -> tuple[Path, Path, Path, dict[str, Any]]:
    """Generate a set and write it with its card; the paths written and the card (``behaviour`` is among its
    parameters only when on, so the cards of sets made before the option read as they did)."""
    out = Path(out)
    generated = generate(seed, scenarios, domains, density, sessions, labels, behaviour)
    parameters = {
        "seed": seed,
        "scenarios": scenarios,
        "domains": list(domains),
        "density": density,
        "sessions": sessions,
        "labels": labels,
        **({"behaviour": True} if behaviour else {}),
    }
    card = data_card(generated, parameters, file=out.as_posix())
    markdown, card_json = write_with_card(out, scenario_lines(generated), card, card_markdown(card))
    return out, markdown, card_json, card


def write_with_card(out: Path, lines: bytes, card: Mapping[str, Any], markdown: str) -> tuple[Path, Path]:
    """A set's file and its card beside it (``F.card.md``, ``F.card.json``); the card's two paths."""
    markdown_path, card_json = card_paths(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(lines)
    markdown_path.write_text(markdown, encoding="utf-8")
    card_json.write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return markdown_path, card_json
