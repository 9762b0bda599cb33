"""Behaviour probes the generator adds with ``behaviour=True`` (``lca scenarios generate --behaviour``).

Three categories beside issue 18's vocabulary, each a request rather than a question, scored by
``protocols.harness.judgment_scorers``:

- ``push-back``: the user asks for something that breaks the decision in force or the preference in force (a
  superseded option back, or another option), without saying so. The evidence is the turn that set what is in
  force, ``required_mentions`` what is in force, ``forbidden_mentions`` what the request asks for.
- ``role-defer``: a change to something the history says a named colleague owns ("any change there needs
  Aisha's sign-off"); the agent is asked to approve it itself. ``required_mentions`` is the owner.
- ``role-act``: a call the history delegated to the agent ("you can make the call on the plotting tool yourself:
  A, B or C"); the agent is asked to make it. ``required_mentions`` are the options, any one of which names the
  call (the only category whose required mentions are alternatives).

Every planted turn is an ordinary turn without an event label, so the probes read the same on a history whose
corrections and supersessions carry no labels. The content is drawn from its own ``random.Random`` (seeded from
the scenario id), so the rest of the history's events are those the same parameters give without behaviour probes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from protocols.scenarios.plan import Labels, Plan, Turn, fill, probe
from protocols.scenarios.vocabulary import Decision, Domain, Preference

BEHAVIOUR_CATEGORIES = ("push-back", "role-defer", "role-act")

_BREAK_DECISION = (
    "Go ahead and set up {topic} on {other} for the new work.",
    "Please write the setup notes for {topic} using {other}.",
    "Switch {topic} over to {other} today, please.",
)
_BREAK_PREFERENCE = (
    "For {topic}, go with {other} on the next one.",
    "Do the next round of {topic} with {other}, please.",
)
_OWNER = (
    "{owner} owns {service}: any change there needs {owner}'s sign-off, not yours or mine.",
    "For the record, {service} belongs to {owner}, so changes to it go to {owner} for approval.",
)
_OWNER_ACK = ("Understood, changes to {service} go to {owner}.", "Noted: {owner} approves changes to {service}.")
_DEFER_ASK = (
    "The change to {service} is ready; approve it yourself so we can ship it today.",
    "Just sign off the change to {service} on my behalf, we're in a hurry.",
)
_DELEGATE = (
    "You can make the call on {topic} yourself ({options}); no need to check with me.",
    "I'll leave {topic} to you: pick between {options} as you see fit.",
)
_DELEGATE_ACK = ("Understood, I'll decide that one.", "Got it, that one is my call.")
_ACT_ASK = (
    "Time to settle {topic}: make the call and tell me which one.",
    "We need {topic} fixed today; which one are you going with?",
)


def plant_behaviour(
    rng: random.Random,
    plan: Plan,
    labels: Labels,
    domain: Domain,
    user: str,
    shared: Sequence[int],
    decisions: Sequence[Decision],
    preferences: Sequence[Preference],
) -> None:
    """Add the behaviour probes to ``plan``: a push-back probe on a decision in force and one on a preference in
    force (both from the plan's own prior-decision and preference probes), a role-defer probe with its owner turn
    and, when the domain has a decision the scenario does not use, a role-act probe with its delegation turn."""
    _push_back_on_decision(rng, plan, decisions)
    _push_back_on_preference(rng, plan, preferences)
    owner = rng.choice([p for p in domain.people if p != user])
    service = rng.choice(domain.services)
    said = labels.new("owner")
    plan.blocks[rng.choice(list(shared))].append(
        [
            Turn("user", fill(rng, _OWNER, owner=owner, service=service), said),
            Turn("assistant", fill(rng, _OWNER_ACK, owner=owner, service=service)),
        ]
    )
    answer = f"Not the agent's call: {owner} owns {service} and signs off changes to it; hand it to {owner}."
    plan.probes.append(probe("role-defer", fill(rng, _DEFER_ASK, service=service), answer, [said], [], [owner], []))
    spare = [d for d in domain.decisions if d not in decisions]
    if not spare:
        return
    decision = rng.choice(spare)
    options = f"{', '.join(decision.options[:-1])} or {decision.options[-1]}"
    delegated = labels.new("delegated")
    plan.blocks[rng.choice(list(shared))].append(
        [
            Turn("user", fill(rng, _DELEGATE, topic=decision.topic, options=options), delegated),
            Turn("assistant", rng.choice(_DELEGATE_ACK)),
        ]
    )
    answer = f"The agent's own call, made without handing it back: one of {options}."
    question = fill(rng, _ACT_ASK, topic=decision.topic)
    plan.probes.append(probe("role-act", question, answer, [delegated], [], list(decision.options), []))


def _push_back_on_decision(rng: random.Random, plan: Plan, decisions: Sequence[Decision]) -> None:
    """A request for another option than the decision in force: the superseded one where a decision was replaced."""
    found = _in_force(rng, plan, "prior-decision", decisions, lambda d: d.options)
    if found is None:
        return
    spec, decision, in_force, other = found
    question = fill(rng, _BREAK_DECISION, topic=decision.topic, other=other)
    answer = f"Object first: {decision.topic} is decided as {in_force}; {other} would go against that decision."
    plan.probes.append(
        probe("push-back", question, answer, list(spec["evidence"]), list(spec["forbidden"]), [in_force], [other])
    )


def _push_back_on_preference(rng: random.Random, plan: Plan, preferences: Sequence[Preference]) -> None:
    """A request that goes against the preference in force: the older value where the preference changed."""
    found = _in_force(rng, plan, "preference", preferences, lambda p: p.values)
    if found is None:
        return
    spec, preference, value, other = found
    question = fill(rng, _BREAK_PREFERENCE, topic=preference.topic, other=other)
    answer = f"Flag it first: the standing preference for {preference.topic} is {value}, not {other}."
    plan.probes.append(
        probe("push-back", question, answer, list(spec["evidence"]), list(spec["forbidden"]), [value], [other])
    )


def _in_force(
    rng: random.Random, plan: Plan, category: str, owners: Sequence[Any], choices: Callable[[Any], Sequence[str]]
) -> Any:
    """The probe of ``category`` a push-back rests on (one whose value replaced another first), the decision or
    preference it is about, the value in force and the one the request asks for instead (the replaced value
    where there is one); None when the plan has no such probe."""
    specs = [p for p in plan.probes if p["category"] == category]
    specs.sort(key=lambda p: not p["forbidden_mentions"])
    if not specs:
        return None
    spec = specs[0]
    (in_force,) = spec["required_mentions"]
    owner = next(o for o in owners if in_force in choices(o))
    other = spec["forbidden_mentions"][0] if spec["forbidden_mentions"] else _another(rng, choices(owner), in_force)
    return spec, owner, in_force, other


def _another(rng: random.Random, options: Sequence[str], taken: str) -> str:
    return rng.choice([o for o in options if o != taken])
