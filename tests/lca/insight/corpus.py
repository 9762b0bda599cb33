"""A small planted corpus for the insight tests: three domains with their own words, one structural rhyme planted
across two of them (one skeleton, disjoint words), and one record that borrows another domain's words with a
skeleton of its own (a pure vocabulary match). Signatures come from a scripted fake generator keyed by the text."""

from __future__ import annotations

import json
from datetime import datetime

from lca.memory import Authority, MemoryRecord, MemoryStore, MemoryType, Privacy
from tests.fakes import FakeScriptedGenerator


def _sig(kinds, relations, dynamics, thresholds=()):
    names = "ABCD"
    return {
        "variables": [{"name": names[i], "kind": k} for i, k in enumerate(kinds)],
        "relations": [{"source": s, "effect": e, "target": t} for s, e, t in relations],
        "thresholds": [{"variable": v, "side": side, "consequence": c} for v, side, c in thresholds],
        "dynamics": list(dynamics),
        "pattern": "",
    }


SKELETONS = {
    # predator and prey: a balancing loop that oscillates
    "oscillator": _sig(
        ["population", "population"], [("A", "increases", "B"), ("B", "decreases", "A")], ["oscillation", "delay"]
    ),
    "runaway": _sig(["quantity", "rate"], [("A", "increases", "B"), ("B", "increases", "A")], ["growth", "cascade"]),
    "reservoir": _sig(
        ["resource", "rate", "rate"],
        [("B", "increases", "A"), ("C", "decreases", "A")],
        ["accumulation", "equilibrium"],
        [("A", "above", "release")],
    ),
    "capacity": _sig(["agent", "capacity"], [("B", "decreases", "A")], ["saturation"], [("A", "above", "shutdown")]),
    "decay": _sig(["signal"], [("A", "decreases", "A")], ["decay"]),
    "switch": _sig(
        ["pressure", "signal", "agent"],
        [("A", "increases", "B"), ("C", "decreases", "A")],
        ["tipping point"],
        [("B", "below", "switch"), ("A", "above", "surge")],
    ),
    "chain": _sig(
        ["quantity", "resource", "signal", "pressure"],
        [("A", "increases", "B"), ("B", "increases", "C"), ("C", "increases", "D")],
        ["cascade"],
    ),
    "collapse": _sig(
        ["population", "resource"], [("A", "decreases", "B")], ["tipping point"], [("B", "below", "collapse")]
    ),
    "surge": _sig(["rate", "pressure"], [("B", "increases", "A")], ["growth"], [("A", "above", "surge")]),
    "standoff": _sig(["agent", "agent"], [("A", "decreases", "B"), ("B", "decreases", "A")], ["equilibrium"]),
    "lag": _sig(["quantity", "capacity"], [("A", "increases", "B")], ["delay", "accumulation"]),
}

# (id, domain, text, skeleton): every skeleton once, but the planted one
ECOLOGY = [
    (
        "eco-wolves",
        "ecology",
        "Wolves hunt deer across valley forest; deer herds feed wolf packs, wolf packs thin deer herds.",
        "oscillator",
    ),
    (
        "eco-meadow",
        "ecology",
        "Deer herds overgraze valley meadow grass until meadow grass dies back across valley forest.",
        "collapse",
    ),
    (
        "eco-herd",
        "ecology",
        "Valley forest deer herds grow on meadow grass until valley forest carrying limit halts deer herds.",
        "capacity",
    ),
    (
        "eco-scent",
        "ecology",
        "Wolf packs mark valley forest trails; wolf scent fades across meadow grass trails.",
        "decay",
    ),
]
FINANCE = [
    (
        "fin-rally",
        "finance",
        "Bond traders chase rising yields; rising yields lure bond traders into market rally margin debt.",
        "runaway",
    ),
    (
        "fin-reserve",
        "finance",
        "Bank reserve fills with deposits, drains with loans; central bank lends bank reserve above target.",
        "reservoir",
    ),
    (
        "fin-margin",
        "finance",
        "Margin calls hit bond traders when market prices fall below margin level; bank sells bond collateral.",
        "switch",
    ),
    (
        "fin-credit",
        "finance",
        "Bank credit desks and bond traders undercut each other on market spreads, holding bond spreads level.",
        "standoff",
    ),
]
KITCHEN = [
    ("kit-dough", "kitchen", "Oven heat drives dough rising; dough overflows baking tin above tin rim.", "surge"),
    ("kit-oven", "kitchen", "Kitchen stove heats pan oil, pan oil sears onions, seared onions brown sauce.", "chain"),
]
# the planted rhyme: the predator-prey skeleton told in the kitchen's words
PLANTED = (
    "kit-sourdough",
    "kitchen",
    "Sourdough yeast consumes jar flour; yeast blooms, jar flour dwindles, starving yeast until cook replenishes flour.",
    "oscillator",
)
# the vocabulary match: finance told in the ecology's words, with a skeleton of its own
BORROWED = (
    "fin-wildlife-fund",
    "finance",
    "Valley Forest Wolves fund invests in deer herds and meadow grass across valley forest trails.",
    "lag",
)

CORPUS = [*ECOLOGY, *FINANCE, *KITCHEN, PLANTED, BORROWED]


def write_memories(home, rows):
    store = MemoryStore(home)
    for memory_id, domain, text, _ in rows:
        record = MemoryRecord(
            id=memory_id,
            type=MemoryType.LESSON,
            projects=(domain,),
            created=datetime(2026, 1, 1),
            authority=Authority.REVIEWED,
            privacy=Privacy.PRIVATE,
        )
        store.write(record, text + "\n")


def note_of(messages) -> str:
    """The record text a signer's prompt carries (the last user message, after 'Note: ')."""
    return messages[-1]["content"].removeprefix("Note: ")


def fake_signer_generator(rows, *, overrides=None, model_id="fake-signer") -> FakeScriptedGenerator:
    """A scripted fake summarizer: for each record's text, its skeleton's signature as JSON, unless ``overrides``
    (text -> reply, or an exception to raise) says otherwise."""
    by_text = {" ".join(text.split()): json.dumps(SKELETONS[skeleton]) for _, _, text, skeleton in rows}
    overrides = {" ".join(k.split()): v for k, v in (overrides or {}).items()}

    def respond(messages):
        note = note_of(messages)
        return overrides.get(note, by_text.get(note, "not a signature"))

    return FakeScriptedGenerator(respond, model_id=model_id)
