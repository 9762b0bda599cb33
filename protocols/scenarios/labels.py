"""Leaving a history's corrections and supersessions unlabelled: the same turns and gold, with the events a
host rarely sends moved out of the turns into the scenario's ``gold_events`` (docs/scenario-format.md).

One transform over the plain scenario dict, used by the generator (``--labels``) and by the harness and
benchmarks (``protocols.harness.scenario.without_labels``), so a generated unlabelled set and a labelled set read
unlabelled are the same thing.
"""

from __future__ import annotations

import copy
import random
from typing import Any

LABEL_MODES = ("all", "none", "mixed")
REPLACING_TYPES = ("correction", "supersedes")  # the event types that make an earlier turn stale


def unlabel(scenario: dict[str, Any], labels: str = "none", *, seed: int = 0) -> dict[str, Any]:
    """A copy of ``scenario`` (a version 2 scenario dict) with its corrections and supersessions left unlabelled:
    ``none`` moves every such turn event into ``gold_events``; ``mixed`` moves each with probability one half,
    drawn from ``seed`` and the scenario id (the same arguments give the same scenario); ``all`` changes nothing.
    Approvals and interruptions keep their labels: a host that sends none of the others may still send those."""
    if labels not in LABEL_MODES:
        raise ValueError(f"labels must be one of {', '.join(LABEL_MODES)}, got {labels!r}")
    data = copy.deepcopy(scenario)
    if labels == "all":
        return data
    rng = random.Random(f"{seed}:{data.get('id', '')}")
    gold = list(data.get("gold_events") or ())
    for session in data.get("sessions", ()):
        for n, turn in enumerate(session.get("turns", ()), 1):
            event = turn.get("event")
            if not isinstance(event, dict) or event.get("type") not in REPLACING_TYPES:
                continue
            if labels == "mixed" and rng.random() < 0.5:
                continue
            moved: dict[str, Any] = {
                "type": event["type"],
                "of": event["of"],
                "by": {"session": session["id"], "turn": n},
            }
            if event.get("right") is not None:
                moved["right"] = event["right"]
            gold.append(moved)
            del turn["event"]
    if gold:
        data["gold_events"] = gold
    return data
