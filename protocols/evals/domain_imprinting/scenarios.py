"""A seeded generator of longitudinal histories for domain imprinting (issue 18, protocol 7).

Identical agents (the same identity, the same onboarding session) each work for a long stretch in one domain. The
stretch is cut into epochs of in-domain working sessions; after onboarding and after each epoch there is a
checkpoint where every agent is tested on the same novel cases from every domain: new work on a project the
histories never name, where one lesson of a domain applies (protocols/scenarios/lessons.py). So each agent is tested
in its own domain and out of it on identical questions.

A domain's lessons are its recurring mistakes (the agent uses the wrong value, the user corrects it: a ``correction``
event) and decisions the agent proposed and the user approved (an ``approval`` event). Lessons are introduced over
the epochs (coverage grows epoch by epoch) and, once introduced, reinforced in a later epoch with probability
``reinforce``: the agent applies the lesson in new work and the user approves it (``approval``), or, for a
correction, the mistake recurs and is corrected again. Approvals and corrections are what the experiential term E
learns from (lca/experience.py), so a lesson's E grows with its reinforcements.

The set holds one scenario per (agent, checkpoint): ``imprint-<short>-c<k>``, whose sessions are onboarding and
epochs 1..k (each checkpoint's history is a prefix of the next one's) and whose probes are checkpoint k's cases. A
probe ``<short>-<lesson>`` is ``in-domain`` for the agent of its domain, with the turns that teach the lesson so far
as evidence (none before the lesson is introduced), the agent's mistaken turns as forbidden, the right value
required and the wrong value forbidden; ``out-of-domain`` for the other agents, with no evidence (they never
worked there) and the same mentions. The same arguments give the same bytes (one ``random.Random(seed)``).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from protocols.scenarios.card import card_header, scenario_lines, write_with_card
from protocols.scenarios.domains import DOMAINS
from protocols.scenarios.lessons import FRESH_PROJECTS, Lesson, correction_lessons, decision_lesson
from protocols.scenarios.plan import Turn as _Turn
from protocols.scenarios.plan import chatter

GENERATOR_VERSION = "1"
CATEGORIES = ("in-domain", "out-of-domain")
IDENTITY = {
    "identity": "A long-running work assistant that keeps continuity across sessions.",
    "user": "A team lead who works with the assistant over several months.",
}
ONBOARDING = (
    ("Welcome aboard. We'll be working together for the next few months.", "Thanks, glad to start."),
    ("Keep notes of what we agree, and ask when something is unclear.", "Understood, I will."),
    ("Most days we'll go through the work queue in order.", "Sounds good."),
)
_ASK = ("Next item on {project}, go ahead.", "Let's move on to the {project} work.", "Another one for {project}.")
_APPROVE = ("Yes, that's right.", "Approved, go ahead.", "Exactly, thanks.")
_AGAIN = ("Again: ", "As I said before: ", "Same mistake as last time. ")
_THANKS = ("Thanks, corrected.", "Right, fixed.")
_ID = re.compile(r"^imprint-(?P<short>[a-z]+)-c(?P<checkpoint>\d+)$")
_PROBE_ID = re.compile(r"^(?P<short>[a-z]+)-(?P<lesson>[a-z]+-\d+)$")


@dataclass(frozen=True)
class Parameters:
    seed: int
    domains: tuple[str, ...] = tuple(DOMAINS)
    epochs: int = 4
    sessions_per_epoch: int = 2
    decisions: int = 3  # decision lessons per domain, besides its corrections
    reinforce: float = 0.5  # chance a lesson introduced earlier is reinforced in a later epoch

    def check(self) -> None:
        """Bad parameters are refused naming the parameter and what it takes."""
        unknown = [d for d in self.domains if d not in DOMAINS]
        if len(self.domains) < 2 or unknown:
            raise ValueError(f"domains: at least two of {', '.join(DOMAINS)}; unknown: {', '.join(unknown) or 'none'}")
        if len(set(self.domains)) != len(self.domains):
            raise ValueError("domains: each at most once")
        if self.epochs < 1 or self.sessions_per_epoch < 1:
            raise ValueError(f"epochs and sessions_per_epoch: at least 1, not {self.epochs}, {self.sessions_per_epoch}")
        if not 0 <= self.decisions <= min(len(DOMAINS[d].decisions) for d in self.domains):
            raise ValueError(f"decisions: between 0 and the decisions a domain holds, not {self.decisions}")
        if not 0.0 <= self.reinforce <= 1.0:
            raise ValueError(f"reinforce: a probability in [0, 1], not {self.reinforce}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "domains": list(self.domains),
            "epochs": self.epochs,
            "sessions_per_epoch": self.sessions_per_epoch,
            "decisions": self.decisions,
            "reinforce": self.reinforce,
        }


@dataclass
class _Agent:
    """One agent's history while it is written: its lessons and, per epoch, its sessions' blocks."""

    short: str
    lessons: list[Lesson]
    intro: dict[str, int]
    teaching: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # lesson -> (epoch, evidence label)
    mistakes: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # lesson -> (epoch, mistake label)
    schedule: dict[str, list[str]] = field(default_factory=dict)  # lesson -> exposure kind per epoch ("" = none)
    sessions: list[dict[str, Any]] = field(default_factory=list)


def parse_scenario_id(scenario_id: str) -> tuple[str, int]:
    """``imprint-se-c2`` -> (``software-engineering``, 2); anything else is refused naming it."""
    match = _ID.match(scenario_id)
    by_short = {d.short: d.name for d in DOMAINS.values()}
    if not match or match["short"] not in by_short:
        raise ValueError(f"'{scenario_id}' is not a domain-imprinting scenario id (imprint-<domain>-c<checkpoint>)")
    return by_short[match["short"]], int(match["checkpoint"])


def parse_probe_id(probe_id: str) -> tuple[str, str]:
    """``ir-correction-2`` -> (``incident-response``, ``correction-2``)."""
    match = _PROBE_ID.match(probe_id)
    by_short = {d.short: d.name for d in DOMAINS.values()}
    if not match or match["short"] not in by_short:
        raise ValueError(f"'{probe_id}' is not a domain-imprinting probe id (<domain>-<lesson>)")
    return by_short[match["short"]], match["lesson"]


def generate(params: Parameters) -> list[dict[str, Any]]:
    """The set's scenarios: for each domain in order, checkpoints 0..epochs. Plain dicts valid under
    ``protocols.harness.scenario.Scenario``; deterministic for ``params``."""
    params.check()
    master = random.Random(params.seed)
    agents = [_plan(random.Random(master.getrandbits(64)), name, params) for name in params.domains]
    probe_rng = random.Random(master.getrandbits(64))
    cases = [_cases(probe_rng, agents, k) for k in range(params.epochs + 1)]
    start = datetime(2026, 1, 5, 9, 0)
    out = []
    for agent in agents:
        for k in range(params.epochs + 1):
            out.append(_scenario(agent, agents, k, cases[k], params, start))
    return out


# ---- one agent's history -------------------------------------------------------------------------------------
def _plan(rng: random.Random, name: str, params: Parameters) -> _Agent:
    domain = DOMAINS[name]
    lessons = correction_lessons(domain)
    for n, index in enumerate(sorted(rng.sample(range(len(domain.decisions)), params.decisions)), 1):
        options = domain.decisions[index].options
        lessons.append(decision_lesson(domain, index, rng.randrange(len(options)), f"decision-{n}"))
    order = list(lessons)
    rng.shuffle(order)  # which lessons come early: coverage grows by about len/epochs an epoch
    intro = {lesson.key: 1 + (n * params.epochs) // len(order) for n, lesson in enumerate(order)}
    agent = _Agent(domain.short, lessons, intro)
    labels = Counter[str]()

    def label(kind: str) -> str:
        labels[kind] += 1
        return f"{kind}-{labels[kind]}"

    for epoch in range(1, params.epochs + 1):
        blocks: list[list[_Turn]] = []
        for lesson in lessons:
            kind = ""
            if intro[lesson.key] == epoch:
                kind = "taught"
            elif intro[lesson.key] < epoch and rng.random() < params.reinforce:
                kind = "recurred" if lesson.kind == "correction" and rng.random() < 0.25 else "applied"
            agent.schedule.setdefault(lesson.key, []).append(kind)
            if kind:
                blocks.append(_exposure(rng, agent, lesson, kind, epoch, rng.choice(domain.projects), label))
        rng.shuffle(blocks)
        per_session: list[list[list[_Turn]]] = [[] for _ in range(params.sessions_per_epoch)]
        for block in blocks:
            rng.choice(per_session).append(block)
        for s, session_blocks in enumerate(per_session, 1):
            turns: list[_Turn] = []
            for block in session_blocks:
                turns += chatter(rng, domain, (1, 2), domain.people) + block
            turns += chatter(rng, domain, (1 if turns else 2, 2), domain.people)
            agent.sessions.append(
                {"id": f"e{epoch}s{s}", "epoch": epoch, "project": rng.choice(domain.projects), "turns": turns}
            )
    return agent


def _exposure(rng, agent: _Agent, lesson: Lesson, kind: str, epoch: int, project: str, label) -> list[_Turn]:
    """The turns of one exposure to a lesson, with labels for the gold: the teaching turn, or an approved
    application; a correction's mistaken turn as forbidden."""
    if kind == "applied":
        applied = label("applied")
        agent.teaching.setdefault(lesson.key, []).append((epoch, applied))
        text = rng.choice(lesson.applied).format(project=project)
        return [
            _Turn("user", rng.choice(_ASK).format(project=project)),
            _Turn("assistant", text, applied),
            _Turn("user", rng.choice(_APPROVE), None, ("approval", applied, None)),
        ]
    if lesson.kind == "decision":
        proposal = label("proposal")
        agent.teaching.setdefault(lesson.key, []).append((epoch, proposal))
        return [
            _Turn("user", rng.choice(_ASK).format(project=project)),
            _Turn("assistant", lesson.teach, proposal),
            _Turn("user", rng.choice(_APPROVE), None, ("approval", proposal, None)),
        ]
    mistake, fix = label("mistake"), label("fix")
    agent.mistakes.setdefault(lesson.key, []).append((epoch, mistake))
    agent.teaching.setdefault(lesson.key, []).append((epoch, fix))
    said = lesson.teach if kind == "taught" else rng.choice(_AGAIN) + lesson.teach
    return [
        _Turn("assistant", lesson.mistake or "", mistake),
        _Turn("user", said, fix, ("correction", mistake, lesson.right)),
        _Turn("assistant", rng.choice(_THANKS)),
    ]


# ---- the cases of a checkpoint -------------------------------------------------------------------------------
def _cases(rng: random.Random, agents: Sequence[_Agent], checkpoint: int) -> list[dict[str, Any]]:
    """One novel case per lesson of every agent's domain: a situation on a fresh project, the same question for
    every agent."""
    out = []
    for agent in agents:
        for lesson in agent.lessons:
            project = rng.choice(FRESH_PROJECTS)
            out.append(
                {
                    "agent": agent.short,
                    "lesson": lesson,
                    "question": rng.choice(lesson.situations).format(project=project),
                    "project": project,
                }
            )
    return out


# ---- writing a scenario out ----------------------------------------------------------------------------------
def _scenario(
    agent: _Agent, agents: Sequence[_Agent], k: int, cases: list[dict[str, Any]], params: Parameters, start
) -> dict[str, Any]:
    domain = next(d for d in DOMAINS.values() if d.short == agent.short)
    where: dict[str, dict[str, Any]] = {}
    sessions = [
        {
            "id": "onboarding",
            "started_at": start.isoformat(),
            "channel": "team",
            "turns": [{"role": r, "content": t} for pair in ONBOARDING for r, t in zip(("user", "assistant"), pair)],
        }
    ]
    at = start
    for session in agent.sessions:
        at = _session_start(params.seed, agent.short, session["id"], at)
        if session["epoch"] > k:
            continue
        turns = []
        for number, turn in enumerate(session["turns"], 1):
            if turn.label:
                where[turn.label] = {"session": session["id"], "turn": number}
            record: dict[str, Any] = {"role": turn.role, "content": turn.content}
            if turn.event is not None:
                kind, of, right = turn.event
                record["event"] = {"type": kind, "of": where[of], **({"right": right} if right else {})}
            turns.append(record)
        sessions.append(
            {
                "id": session["id"],
                "started_at": at.isoformat(),
                "channel": "team",
                "project": session["project"],
                "role": domain.role,
                "turns": turns,
            }
        )
    last = max(datetime.fromisoformat(s["started_at"]) for s in sessions)
    asked = (last + timedelta(days=1)).replace(hour=10, minute=0)
    probes = []
    for number, case in enumerate(cases):
        lesson: Lesson = case["lesson"]
        own = case["agent"] == agent.short
        evidence = [where[lab] for e, lab in agent.teaching.get(lesson.key, []) if e <= k] if own else []
        forbidden = [where[lab] for e, lab in agent.mistakes.get(lesson.key, []) if e <= k] if own else []
        probe_domain = next(d for d in DOMAINS.values() if d.short == case["agent"])
        probes.append(
            {
                "id": f"{case['agent']}-{lesson.key}",
                "question": case["question"],
                "answer": lesson.right,
                "evidence": evidence,
                "asked_at": (asked + timedelta(minutes=number)).isoformat(),
                "category": "in-domain" if own else "out-of-domain",
                "channel": "team",
                "project": case["project"],
                "role": probe_domain.role,
                "forbidden": forbidden,
                "required_mentions": [lesson.right],
                "forbidden_mentions": [lesson.wrong] if lesson.wrong else [],
            }
        )
    epochs = f"epochs 1..{k}" if k else "no epoch yet"
    return {
        "schema_version": 2,
        "id": f"imprint-{agent.short}-c{k}",
        "description": f"Domain imprinting (longitudinal generator v{GENERATOR_VERSION}): the {domain.name} agent at "
        f"checkpoint {k} of {params.epochs} (onboarding, {epochs}); {len(probes)} novel cases from "
        f"{len(agents)} domains.",
        "identity": dict(IDENTITY),
        "sessions": sessions,
        "probes": probes,
    }


def _session_start(seed: int, short: str, session_id: str, previous: datetime) -> datetime:
    """Sessions a few days apart, the spacing a function of the seed, agent and session (so every checkpoint's
    copy of a session has the same date)."""
    digest = hashlib.sha256(f"{seed}:{short}:{session_id}".encode()).digest()
    return (previous + timedelta(days=2 + digest[0] % 5)).replace(hour=8 + digest[1] % 8, minute=0)


# ---- the set and its card ------------------------------------------------------------------------------------
def lesson_schedule(params: Parameters) -> dict[str, dict[str, Any]]:
    """Per domain, per lesson: its kind, right value, the epoch it is introduced and the exposure per epoch."""
    params.check()
    master = random.Random(params.seed)
    out: dict[str, dict[str, Any]] = {}
    for name in params.domains:
        agent = _plan(random.Random(master.getrandbits(64)), name, params)
        out[name] = {
            lesson.key: {
                "kind": lesson.kind,
                "right": lesson.right,
                "introduced": agent.intro[lesson.key],
                "exposures": agent.schedule[lesson.key],
            }
            for lesson in agent.lessons
        }
    return out


def set_card(scenarios: Sequence[Mapping[str, Any]], params: Parameters, *, file: str | None) -> dict[str, Any]:
    """The card as JSON: generator, version, parameters, sha256, counts and the lesson schedule."""
    raw = scenario_lines(scenarios)
    events: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    turns = 0
    for scenario in scenarios:
        for session in scenario["sessions"]:
            turns += len(session["turns"])
            events.update(t["event"]["type"] for t in session["turns"] if t.get("event"))
        categories.update(p["category"] for p in scenario["probes"])
    return {
        "generator": "protocols.evals.domain_imprinting.scenarios",
        "generator_version": GENERATOR_VERSION,
        "parameters": params.as_dict(),
        "file": file,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "counts": {
            "scenarios": len(scenarios),
            "agents": len(params.domains),
            "checkpoints": params.epochs + 1,
            "sessions": sum(len(s["sessions"]) for s in scenarios),
            "turns": turns,
            "events_by_type": dict(sorted(events.items())),
            "probes": sum(categories.values()),
            "probes_by_category": {c: categories[c] for c in CATEGORIES},
        },
        "schedule": lesson_schedule(params),
    }


def regenerate_command(params: Mapping[str, Any], out: str) -> str:
    p = params
    return (
        f"lca scenarios longitudinal --seed {p['seed']} --domains {','.join(p['domains'])} --epochs {p['epochs']} "
        f"--sessions-per-epoch {p['sessions_per_epoch']} --decisions {p['decisions']} --reinforce {p['reinforce']} "
        f"--out {out}"
    )


def card_markdown(card: Mapping[str, Any]) -> str:
    c, p = card["counts"], card["parameters"]
    name = Path(card["file"] or "imprinting.jsonl").name
    lines = [
        *card_header(
            card, name, regenerate_command(p, card["file"] or name), protocol="protocols/evals/domain_imprinting"
        ),
        "| count | value |",
        "| --- | --- |",
        *(f"| {k} | {v} |" for k, v in c.items() if not isinstance(v, dict)),
        *(f"| events: {k} | {v} |" for k, v in c["events_by_type"].items()),
        *(f"| probes: {k} | {v} |" for k, v in c["probes_by_category"].items()),
        "",
        "## Lesson schedule",
        "",
        "Per agent and lesson: the epoch it is introduced, then per epoch `taught`, `applied` (an approved "
        "application), `recurred` (the mistake again, corrected again) or `-` (not exposed).",
        "",
        "| agent | lesson | kind | right | introduced | exposures by epoch |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for domain, lessons in card["schedule"].items():
        for key, s in lessons.items():
            shown = ", ".join(e or "-" for e in s["exposures"])
            lines.append(f"| {domain} | {key} | {s['kind']} | {s['right']} | {s['introduced']} | {shown} |")
    lines += [
        "",
        "## How it was made",
        "",
        "Identical agents (same identity, same onboarding session) each work in one domain; their histories are "
        "cut into epochs of working sessions with routine chatter between lessons. A lesson is a recurring mistake "
        "the user corrects (`correction` event; the correction is evidence, the mistaken turn is forbidden) or a "
        "decision the agent proposes and the user approves (`approval`); once introduced it may be reinforced in a "
        "later epoch by an approved application in new work or, for a correction, by the mistake recurring. "
        "Scenario `imprint-<domain>-c<k>` is the agent after onboarding and epochs 1..k; its probes are checkpoint "
        "k's novel cases (a fresh project name, a situation where a lesson applies, never its right value), the "
        "same for every agent: `in-domain` with the lesson's teaching turns so far as evidence, `out-of-domain` with "
        "none.",
        "",
    ]
    return "\n".join(lines)


def write_set(out: Path | str, params: Parameters) -> tuple[Path, Path, Path, dict[str, Any]]:
    """Generate a set and write it with its card (``F.card.md``, ``F.card.json``)."""
    out = Path(out)
    generated = generate(params)
    card = set_card(generated, params, file=out.as_posix())
    markdown, card_json = write_with_card(out, scenario_lines(generated), card, card_markdown(card))
    return out, markdown, card_json, card
