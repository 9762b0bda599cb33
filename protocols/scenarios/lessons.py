"""The lessons a domain teaches over sustained work, for the longitudinal generator (protocols/evals/domain_imprinting/scenarios.py).

A lesson is what an agent can carry from one piece of work to the next in its domain: a recurring mistake the user
corrects (a domain's ``Correction``) or a decision the user approved (a domain's ``Decision``). Each lesson has the
turns that teach it (the correction, the approved proposal, later approved applications in new work) and the novel
situations that test it: new work, on a project the history never names, where the lesson applies. Applications and
situations are written here, per correction, because the domain vocabulary holds only the mistake and its fix;
decisions share templates. No situation names the value its gold requires. Written for this project.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols.scenarios.domains import DOMAINS
from protocols.scenarios.vocabulary import Domain

# projects the working histories never name: each probe is new work on one of them
FRESH_PROJECTS = (
    "orion",
    "juniper",
    "kestrel",
    "lumen",
    "marlin",
    "nimbus",
    "opal",
    "pylon",
    "quasar",
    "rowan",
    "sierra",
    "tundra",
    "umber",
    "vesper",
    "willow",
    "zephyr",
)

# per correction (by its right value): how the agent applies it in new work, and new situations that test it
_APPLIED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "6543": (
        ("Connecting the {project} backfill to the staging database on port 6543, as you said.",),
        ("The {project} team needs a one-off data repair run against staging; what goes in the connection string?",),
    ),
    "release/2.x": (
        ("Starting the {project} hotfix branch from release/2.x.",),
        ("A customer-facing bug in {project} needs an emergency patch; which branch do I start the fix from?",),
    ),
    "eu-central-1": (
        ("Creating the {project} export bucket in eu-central-1 so the data stays where it must.",),
        ("Set up object storage for the {project} nightly exports; where should it live?",),
    ),
    "Aiko": (
        ("Paging Aiko about the ledger database alert on {project}.",),
        ("The ledger store is lagging badly during the {project} rollout; who needs to be woken up?",),
    ),
    "9090": (
        ("Pointing the {project} liveness check at the edge proxy's health port 9090.",),
        ("Write the health check settings for the front proxy in the {project} cluster.",),
    ),
    "ap-southeast-2": (
        ("Draining payments in ap-southeast-2 first for the {project} drill, since that is the primary.",),
        ("Card payments are failing during {project}; where does the primary run, so we drain it first?",),
    ),
    "2019": (
        ("Citing the Okafor cohort paper as 2019 in the {project} draft.",),
        ("Add the Okafor cohort study to the {project} reference list with its year.",),
    ),
    "412": (
        ("Reporting 412 cohort participants in the {project} methods section.",),
        ("How large was the cohort? I need the number for the {project} power analysis.",),
    ),
    "Table 4": (
        ("Taking the pooled effect sizes from Table 4 of the meta-analysis for {project}.",),
        ("Where in the meta-analysis do I find the pooled estimates for the {project} comparison?",),
    ),
}
_DECISION_APPLIED = (
    "For {project} I'll use {choice} for {topic}, as we agreed.",
    "Setting up {project} with {choice} for {topic}, the approved choice.",
)
_DECISION_SITUATION = ("New work on {project}. {ask}", "We're starting {project}. {ask}")


@dataclass(frozen=True)
class Lesson:
    """One lesson of a domain. ``teach`` is the turn that first teaches it: the user's correction of ``mistake``,
    or the agent's proposal the user approves; ``applied`` the agent applying it in new work (templates with
    ``{project}``); ``situations`` novel work where it applies (the probe questions, also with ``{project}``).
    ``right`` is what an answer must hold; ``wrong`` (corrections only) what it must not assert."""

    key: str  # unique within its domain: correction-1, decision-2, ...
    kind: str  # correction | decision
    domain: str
    topic: str
    teach: str
    right: str
    applied: tuple[str, ...]
    situations: tuple[str, ...]
    mistake: str | None = None
    wrong: str | None = None


def correction_lessons(domain: Domain) -> list[Lesson]:
    """Every correction of the domain as a lesson (its fix teaches it; the mistake may recur)."""
    out = []
    for n, c in enumerate(domain.corrections, 1):
        if c.right not in _APPLIED:
            raise KeyError(f"no applications written for the {domain.name} correction to '{c.right}'")
        applied, situations = _APPLIED[c.right]
        topic = c.asks[0]
        out.append(
            Lesson(
                key=f"correction-{n}",
                kind="correction",
                domain=domain.name,
                topic=topic,
                teach=c.fix,
                right=c.right,
                applied=applied,
                situations=(*situations, *(f"On {{project}}: {ask}" for ask in c.asks)),
                mistake=c.mistake,
                wrong=c.wrong,
            )
        )
    return out


def decision_lesson(domain: Domain, index: int, choice_index: int, key: str) -> Lesson:
    """The domain's decision ``index`` with option ``choice_index`` chosen, as a lesson (taught by the approved
    proposal)."""
    d = domain.decisions[index]
    choice = d.options[choice_index]
    return Lesson(
        key=key,
        kind="decision",
        domain=domain.name,
        topic=d.topic,
        teach=f"I suggest {choice} for {d.topic}.",
        right=choice,
        applied=tuple(t.replace("{choice}", choice).replace("{topic}", d.topic) for t in _DECISION_APPLIED),
        situations=tuple(t.replace("{ask}", ask) for t in _DECISION_SITUATION for ask in d.asks),
    )


def check_vocabulary() -> None:
    """Every domain's corrections have applications and situations, and no situation names its right value."""
    for domain in DOMAINS.values():
        for lesson in correction_lessons(domain):
            for text in lesson.situations:
                if lesson.right.lower() in text.lower():
                    raise AssertionError(f"{domain.name} {lesson.key}: situation names '{lesson.right}'")
