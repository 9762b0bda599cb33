"""The seeded scenario generator (protocols/scenarios) and the shipped study sets it made: deterministic bytes,
files that load, gold that resolves to the planted turns, cards that match their files, committed sets equal to a
regeneration, and probes not answerable from their own text (stateless injects nothing; the question holds few
of its required mentions' key terms)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from conditions import ConditionRuntime
from lca.ledger import key_terms
from lca.secrets import contains_secret
from protocols.cli import main
from protocols.harness.scenario import Scenario, load_scenarios, scenario_history
from protocols.harness.substrate import replay_probe
from protocols.scenarios import CATEGORIES, DENSITIES, generate, write_set
from protocols.scenarios.card import card_markdown, card_paths, data_card, scenario_lines
from protocols.scenarios.domains import DOMAINS
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "data" / "scenarios" / "study-v1-small.jsonl"
STUDY = REPO / "data" / "scenarios" / "study-v1.jsonl"
SHIPPED = (SMALL, STUDY)
MAX_REQUIRED_TERM_SHARE = 1 / 3  # of a probe's required mentions' key terms, at most this share is in its question
MAX_EVIDENCE_OVERLAP = 3  # content words a question shares with one of its evidence turns


def generated_file(tmp_path: Path, density: str = "medium", sessions: int = 4, seed: int = 5) -> Path:
    out, *_ = write_set(
        tmp_path / f"g-{density}-{sessions}.jsonl",
        seed=seed,
        scenarios=6,
        domains=list(DOMAINS),
        density=density,
        sessions=sessions,
    )
    return out


def all_files(tmp_path: Path) -> list[Path]:
    made = [generated_file(tmp_path, d, n) for d in DENSITIES for n in (3, 6)]
    return made + list(SHIPPED)


def turns_of(scenario: Scenario) -> dict[tuple[str, int], object]:
    return {(s.id, n): t for s in scenario.sessions for n, t in enumerate(s.turns, 1)}


# ---- determinism and parameters ----------------------------------------------------------------------------------
def test_the_same_seed_gives_the_same_bytes_and_another_seed_differs():
    first = scenario_lines(generate(3, 6, density="high", sessions=5))
    assert first == scenario_lines(generate(3, 6, density="high", sessions=5))
    assert first != scenario_lines(generate(4, 6, density="high", sessions=5))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"scenarios": 0}, "scenarios"),
        ({"domains": ["cooking"]}, "domains"),
        ({"domains": []}, "domains"),
        ({"density": "extreme"}, "density"),
        ({"sessions": 2}, "sessions"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs, field):
    args = {"seed": 1, "scenarios": 2, "domains": list(DOMAINS), "density": "low", "sessions": 4, **kwargs}
    with pytest.raises(ValueError, match=f"^{field}:"):
        generate(**args)


def test_density_plants_more_events_and_chatter():
    low, high = (generate(9, 3, density=d, sessions=4) for d in ("low", "high"))
    turns = [sum(len(s["turns"]) for sc in set_ for s in sc["sessions"]) for set_ in (low, high)]
    probes = [sum(len(sc["probes"]) for sc in set_) for set_ in (low, high)]
    assert turns[1] > turns[0] and probes[1] > probes[0]


def test_domains_are_taken_in_turn_and_each_uses_its_own_vocabulary():
    scenarios = generate(2, 4, domains=["research-assistance", "incident-response"], density="low", sessions=3)
    assert [s["id"].split("-")[0] for s in scenarios] == ["ra", "ir", "ra", "ir"]
    assert {s["sessions"][0]["role"] for s in scenarios} == {"research-assistant", "sre"}


# ---- files load, gold resolves ------------------------------------------------------------------------------------
def test_every_generated_and_shipped_file_loads_and_its_gold_resolves(tmp_path):
    for path in all_files(tmp_path):
        scenarios, _ = load_scenarios(path)
        for scenario in scenarios:
            pointers = {f"{s['id']}#{e['id']}" for s in scenario_history(scenario)["sessions"] for e in s["entries"]}
            turns = turns_of(scenario)
            for probe in scenario.probes:
                assert probe.category in CATEGORIES, (path.name, scenario.id, probe.id)
                assert set(scenario.evidence_pointers(probe)) <= pointers
                assert {scenario.pointer(r) for r in probe.forbidden} <= pointers
                for text in scenario.evidence_texts(probe):  # the gold mention is in the turn that holds it
                    assert all(m.lower() in text.lower() for m in probe.required_mentions), (scenario.id, probe.id)
            for memory in scenario.memories:
                assert all((r.session, r.turn) in turns for r in memory.sources)


def test_each_category_has_the_gold_the_shared_vocabulary_gives_it():
    (scenario, *_), _ = load_scenarios(SMALL)
    turns = turns_of(scenario)
    events = {k: t.event for k, t in turns.items() if t.event is not None}
    by_category = {p.category: p for p in scenario.probes}
    assert set(by_category) == set(CATEGORIES)
    decision = by_category["prior-decision"]
    (new,) = decision.evidence
    (old,) = decision.forbidden
    assert events[(new.session, new.turn)].type == "supersedes" and events[(new.session, new.turn)].of == old
    assert decision.required_mentions and decision.forbidden_mentions
    preference = by_category["preference"]
    assert [r.session for r in preference.forbidden] < [r.session for r in preference.evidence]  # older, then newer
    for name in ("correction", "overclaim"):
        probe = by_category[name]
        (fix,) = probe.evidence
        event = events[(fix.session, fix.turn)]
        assert event.type == "correction" and turns[(event.of.session, event.of.turn)].role == "assistant"
        wrong = turns[(event.of.session, event.of.turn)].content
        assert all(m.lower() in wrong.lower() for m in probe.forbidden_mentions)
    assert by_category["overclaim"].required_mentions == ("not",)
    private = by_category["private"]
    sessions = {s.id: s for s in scenario.sessions}
    assert private.channel == "public" and not private.evidence and private.forbidden
    assert {sessions[r.session].channel for r in private.forbidden} == {"private"}
    assert by_category["abstention"].abstain and not by_category["abstention"].evidence
    (thread,) = by_category["interruption"].evidence
    last = scenario.sessions[-1]
    assert thread.session == last.id and last.turns[-1].event.type == "interruption"
    citation = by_category["citation"]
    assert citation.source_type in ("transcript", "memory") and citation.evidence


def test_citation_expects_memory_exactly_when_the_scenario_holds_one_of_the_decision():
    scenarios, _ = load_scenarios(STUDY)
    kinds = set()
    for scenario in scenarios:
        (citation,) = [p for p in scenario.probes if p.category == "citation"]
        sourced = {(r.session, r.turn) for m in scenario.memories for r in m.sources}
        holds_memory = all((r.session, r.turn) in sourced for r in citation.evidence)
        assert citation.source_type == ("memory" if holds_memory else "transcript"), scenario.id
        kinds.add(citation.source_type)
    assert kinds == {"memory", "transcript"}


def test_forbidden_mentions_live_only_in_the_turns_that_are_wrong_and_never_in_evidence(tmp_path):
    """A context holding a probe's evidence holds none of its forbidden mentions: they appear only in its forbidden
    turns and in the turns a correction or a superseding decision is about."""
    for path in all_files(tmp_path):
        for scenario in load_scenarios(path)[0]:
            turns = turns_of(scenario)
            replaced = {
                (t.event.of.session, t.event.of.turn)
                for t in turns.values()
                if t.event is not None and t.event.type in ("correction", "supersedes")
            }
            for probe in scenario.probes:
                allowed = replaced | {(r.session, r.turn) for r in probe.forbidden}
                for mention in probe.forbidden_mentions:
                    holders = {k for k, t in turns.items() if mention.lower() in t.content.lower()}
                    assert holders and holders <= allowed, (path.name, scenario.id, probe.id, mention)


def test_private_sessions_hold_a_secret_shaped_key_the_public_probe_forbids():
    for scenario in load_scenarios(SMALL)[0]:
        secret_turns = [
            (s.channel, t.content) for s in scenario.sessions for t in s.turns if contains_secret(t.content)
        ]
        assert [channel for channel, _ in secret_turns] == ["private"]
        (private,) = [p for p in scenario.probes if p.category == "private"]
        assert any(m in secret_turns[0][1] and contains_secret(f"api key: {m}") for m in private.forbidden_mentions)


# ---- cards ----------------------------------------------------------------------------------------------------
def independent_counts(path: Path) -> dict:
    """Counted here, from the loaded file, without the card module."""
    scenarios, _ = load_scenarios(path)
    turns = [t for s in scenarios for session in s.sessions for t in session.turns]
    probes = [p for s in scenarios for p in s.probes]
    return {
        "scenarios": len(scenarios),
        "sessions": sum(len(s.sessions) for s in scenarios),
        "turns": len(turns),
        "memories": sum(len(s.memories) for s in scenarios),
        "probes": len(probes),
        "turns_by_role": Counter(t.role for t in turns),
        "events_by_type": Counter(t.event.type for t in turns if t.event is not None),
        "probes_by_category": Counter(p.category for p in probes),
        "abstain_probes": sum(p.abstain for p in probes),
        "secret_strings": sum(contains_secret(t.content) for t in turns),
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_card_counts_equal_the_counts_in_the_file(path):
    card = json.loads(card_paths(path)[1].read_text())
    expected = independent_counts(path)
    for key, value in expected.items():
        got = card["counts"][key]
        if isinstance(value, Counter):
            got = Counter({k: v for k, v in got.items() if v})
        assert got == value, key


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_committed_set_equals_a_regeneration_with_its_cards_parameters(path):
    markdown, card_json = card_paths(path)
    card = json.loads(card_json.read_text())
    p = card["parameters"]
    regenerated = generate(p["seed"], p["scenarios"], p["domains"], p["density"], p["sessions"])
    assert scenario_lines(regenerated) == path.read_bytes(), "regenerate it with the command in its card"
    again = data_card(regenerated, p, file=card["file"])
    assert again == card and card_markdown(again) == markdown.read_text()
    assert card["file"] == path.relative_to(REPO).as_posix()


def test_the_small_set_holds_every_category_at_least_twice():
    counts = independent_counts(SMALL)
    assert all(counts["probes_by_category"][c] >= 2 for c in CATEGORIES)
    assert all(counts["events_by_type"][e] >= 2 for e in ("correction", "approval", "supersedes", "interruption"))


# ---- not answerable from the question -----------------------------------------------------------------------------
def test_questions_hold_few_key_terms_of_their_required_mentions_or_evidence():
    for scenario in load_scenarios(SMALL)[0]:
        for probe in scenario.probes:
            asked = key_terms(probe.question)
            required = frozenset().union(*(key_terms(m) for m in probe.required_mentions))
            if required:
                assert len(asked & required) / len(required) <= MAX_REQUIRED_TERM_SHARE, (scenario.id, probe.id)
            for text in scenario.evidence_texts(probe):
                assert len(asked & key_terms(text)) <= MAX_EVIDENCE_OVERLAP, (scenario.id, probe.id)
            assert not any(m.lower() in probe.question.lower() for m in probe.forbidden_mentions)


def test_stateless_injects_nothing_for_any_probe_of_the_small_set():
    def runtime(workdir: Path, identity) -> ConditionRuntime:
        return ConditionRuntime(workdir=workdir, embedder=FakeHashingEmbedder(), identity=identity)

    scenarios, _ = load_scenarios(SMALL)
    rows = [replay_probe("stateless", {}, s, p, runtime) for s in scenarios for p in s.probes]
    assert len(rows) == 48
    assert all(r["nothing_injected"] and r["injected_tokens"] == 0 and not r["gold_any"] for r in rows)


# ---- the command ---------------------------------------------------------------------------------------------
def test_the_command_writes_the_set_and_its_card_and_refuses_bad_flags(tmp_path, capsys):
    out = tmp_path / "sets" / "mine.jsonl"
    argv = ["scenarios", "generate", "--seed", "7", "--scenarios", "3", "--density", "low", "--sessions", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    markdown, card_json = card_paths(out)
    card = json.loads(card_json.read_text())
    assert card["counts"]["scenarios"] == 3 and card["parameters"]["seed"] == 7
    assert "lca scenarios generate --seed 7" in markdown.read_text()
    assert out.read_bytes() == scenario_lines(generate(7, 3, list(DOMAINS), "low", 3))
    assert main([*argv, "--domains", "cooking", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "--domains: unknown cooking" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
