"""The insight protocol's planted corpus and measures: the generator is deterministic by seed, its gold is exactly
the cross-domain pairs on one skeleton, the committed corpora regenerate from their cards, and the measures of a
cycle on a tiny corpus with scripted signatures are the ones its gold implies."""

from __future__ import annotations

import json
import math
from itertools import combinations
from pathlib import Path

import pytest

from lca.errors import LCAError, RecordFormatError
from lca.insight import IntegrationConfig
from lca.insight.signatures import StructuralSignature, canonical_text
from lca.ledger import key_terms
from protocols.evals.insight import vocabulary
from protocols.evals.insight.card import main as card_main
from protocols.evals.insight.card import parse_corpora
from protocols.evals.insight.corpus import (
    CorpusSpec,
    GeneratorSigner,
    PlantedRecord,
    generate,
    gold_pairs,
    load_corpora,
    topical_pairs,
    write_corpus,
)
from protocols.evals.insight.measure import content_only, cycle_measures, measure_cycle, planted_store
from protocols.evals.insight.scorer import measure_values
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import BORROWED, CORPUS, SKELETONS

REPO = Path(__file__).resolve().parents[2]


def test_the_generator_is_deterministic_by_seed_and_differs_across_seeds(tmp_path):
    spec = CorpusSpec("c", 5, 200)
    first, again, other = generate(spec), generate(spec), generate(CorpusSpec("c", 6, 200))
    assert write_corpus(first, tmp_path / "a.jsonl") == write_corpus(again, tmp_path / "b.jsonl")
    assert [r.text for r in first] != [r.text for r in other]
    assert len({r.text for r in first}) == len(first)  # a text names its record for the generator's signer


def test_gold_is_exactly_the_cross_domain_pairs_on_one_skeleton():
    records = generate(CorpusSpec("c", 3, 300))
    gold = gold_pairs(records)
    canonical = {r.id: canonical_text(StructuralSignature.model_validate(r.signature)) for r in records}
    expected = {
        (min(a.id, b.id), max(a.id, b.id))
        for a, b in combinations(records, 2)
        if a.domain != b.domain and canonical[a.id] == canonical[b.id]
    }
    assert gold == expected and len(gold) >= 10
    roles = {r.id: r.role for r in records}
    assert all(roles[a] == roles[b] == "rhyme" for a, b in gold)
    # every rhyme group is told in distinct domains whose words do not meet
    for a, b in gold:
        ra, rb = next(r for r in records if r.id == a), next(r for r in records if r.id == b)
        nouns_a = key_terms(" ".join(vocabulary.DOMAIN_NOUNS[ra.domain]))
        assert not (key_terms(rb.text) & nouns_a)
    # a topical pair shares its words and not its skeleton, across two domains
    topical = topical_pairs(records)
    assert len(topical) == 15
    by_id = {r.id: r for r in records}
    for a, b in topical:
        assert by_id[a].domain != by_id[b].domain and canonical[a] != canonical[b]
        assert len(key_terms(by_id[a].text) & key_terms(by_id[b].text)) >= 3


def test_domain_vocabularies_share_no_content_word_with_each_other_or_the_structural_phrases():
    prepositions = {"across", "along", "through", "inside", "behind"}  # how a place is said, in any domain
    terms = {
        d: key_terms(" ".join(vocabulary.DOMAIN_NOUNS[d] + vocabulary.DOMAIN_PLACES[d])) - prepositions
        for d in vocabulary.DOMAIN_NOUNS
    }
    for a, b in combinations(terms, 2):
        assert not terms[a] & terms[b], (a, b, terms[a] & terms[b])
    phrases = [
        *vocabulary.INCREASE_VERBS,
        *vocabulary.DECREASE_VERBS,
        *vocabulary.SELF_INCREASE,
        *vocabulary.SELF_DECREASE,
    ]
    for table in (vocabulary.THRESHOLD_OPENINGS, vocabulary.CONSEQUENCES, vocabulary.DYNAMIC_PHRASES):
        phrases += [p for options in table.values() for p in options]
    structural = key_terms(" ".join(phrases) + " over the season the whole")
    for domain, words in terms.items():
        assert not words & structural, (domain, words & structural)


@pytest.mark.parametrize("name", ["insight-planted-v1", "insight-planted-fixture"])
def test_the_committed_corpora_regenerate_byte_for_byte_from_their_cards(name, tmp_path, monkeypatch):
    card = json.loads((REPO / "data" / "insight" / f"{name}.card.json").read_text())
    corpora = ",".join(f"{c['corpus']}:{c['seed']}:{c['records']}" for c in card["parameters"]["corpora"])
    out = tmp_path / f"{name}.jsonl"
    assert card_main(["--corpora", corpora, "--out", str(out)]) == 0
    assert out.read_bytes() == (REPO / "data" / "insight" / f"{name}.jsonl").read_bytes()
    assert set(load_corpora(out)) == {c["corpus"] for c in card["parameters"]["corpora"]}


def test_bad_specs_and_lines_are_refused_naming_them(tmp_path):
    with pytest.raises(RecordFormatError, match="records"):
        CorpusSpec("c", 1, 5)
    with pytest.raises(RecordFormatError, match="domains"):
        CorpusSpec("c", 1, 100, domains=("ecology", "atlantis", "finance"))
    with pytest.raises(LCAError, match="NAME:SEED:RECORDS"):
        parse_corpora("a:1")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(generate(CorpusSpec("c", 1, 12))[0].to_json() + "\n" + json.dumps({"corpus": "c"}) + "\n")
    with pytest.raises(RecordFormatError, match=r"bad.jsonl.*line 2|line 2.*bad.jsonl"):
        load_corpora(bad)


def test_the_generators_signer_knows_only_its_own_texts():
    records = generate(CorpusSpec("c", 1, 12))
    signer = GeneratorSigner(records)
    assert json.loads(signer.sign(records[0].text)) == records[0].signature
    with pytest.raises(LCAError, match="only the texts it generated"):
        signer.sign("A note from a user's store.")


def _scripted_corpus() -> list[PlantedRecord]:
    """The insight tests' hand-written corpus as planted records: one rhyme (the oscillator in ecology and the
    kitchen), one topical pair (the borrowed wildlife fund and the herd note it takes its words from)."""
    roles = {"eco-wolves": "rhyme", "kit-sourdough": "rhyme", BORROWED[0]: "borrower", "eco-herd": "anchor"}
    out = []
    for record_id, domain, text, skeleton in CORPUS:
        role = roles.get(record_id, "noise")
        group = {"rhyme": "rhyme-0", "anchor": "topical-0", "borrower": "topical-0"}.get(role)
        out.append(PlantedRecord("tiny", record_id, domain, text, role, group, skeleton, SKELETONS[skeleton]))
    return out


def test_the_measures_of_a_cycle_on_a_tiny_scripted_corpus(tmp_path):
    records = _scripted_corpus()
    assert gold_pairs(records) == {("eco-wolves", "kit-sourdough")}
    assert topical_pairs(records) == {("eco-herd", BORROWED[0])}
    planted_store(records, tmp_path)
    embedder = FakeHashingEmbedder(dimension=512, max_input_tokens=512)
    result, measured = measure_cycle(tmp_path, records, GeneratorSigner(records), embedder, IntegrationConfig())
    assert measured["gold_pairs"] == 1 and measured["topical_pairs"] == 1
    assert measured["above_threshold_pairs"] == 1 and measured["true_discoveries"] == 1
    assert measured["precision"] == 1.0 and measured["recall"] == 1.0 and measured["false_discoveries"] == 0
    assert measured["signature_valid_share"] == 1.0
    # the topical pair is scored although the cycle did not pair it, and lies under the threshold
    assert measured["topical_differential"]["n"] == 1
    assert measured["topical_differential"]["max"] < measured["threshold"]
    assert measured["rhyme_differential"]["min"] > measured["threshold"]
    assert cycle_measures(result, records) == measured
    # the content-only detector on a fresh copy: content alone puts the topical pair above the rhyme
    other = tmp_path / "content-only"
    planted_store(records, other)
    _, baseline = measure_cycle(other, records, GeneratorSigner(records), embedder, content_only(IntegrationConfig()))
    assert baseline["topical_differential"]["mean"] > baseline["rhyme_differential"]["mean"]
    values = measure_values({"cycle": measured, "content_only": baseline})
    assert values["precision"] == 1.0 and values["topical_differential"] == measured["topical_differential"]["mean"]
    assert math.isnan(measure_values({})["precision"])  # nothing measured: not applicable, never 0
