"""A real integration cycle: SmolLM2-135M through llama.cpp as the summarizer that signs, the real MiniLM embedder.

A 135M model is a plumbing-grade signer (its signatures echo the prompt's worked example; docs/insight.md), so this
checks what must hold whatever it says: every record is signed or refused with a counted reason, what is stored
holds none of the record's own words, the cycle runs end to end, and a rebuild reproduces the stored signatures.
"""

from __future__ import annotations

import pytest

from lca.insight import IntegrationConfig, SignatureStore, SummarizerSigner, integrate
from lca.insight.signatures import REFUSAL_REASONS, STRUCTURAL_WORDS
from lca.layout import StoreLayout
from lca.ledger import key_terms
from tests.lca.insight.corpus import CORPUS, write_memories

pytestmark = pytest.mark.slow
RECORDS = [row for row in CORPUS if row[0] in ("eco-wolves", "eco-meadow", "fin-rally", "kit-sourdough")]


@pytest.fixture(scope="module")
def generator():
    from lca.generators import LlamaCppGenerator

    with LlamaCppGenerator(timeout_s=120) as g:
        yield g


def test_smollm2_signs_every_record_or_refuses_it_and_a_rebuild_reproduces_the_signatures(
    tmp_path, real_embedder, generator
):
    write_memories(tmp_path, RECORDS)
    result = integrate(tmp_path, SummarizerSigner(generator), real_embedder, IntegrationConfig(null_shuffles=50))
    report = result.distill
    assert report.model == generator.model_id
    assert set(report.refused) == set(REFUSAL_REASONS)
    assert report.signed + sum(report.refused.values()) == len(RECORDS)  # nothing lost unsaid
    stored = SignatureStore(tmp_path)
    assert len(stored.signatures()) == report.signed and len(stored.quarantine()) == sum(report.refused.values())
    text_of = {memory_id: text for memory_id, _, text, _ in RECORDS}
    for row in stored.signatures().values():  # the domain's words are gone from what the structural space embeds
        assert not (key_terms(row.text) & (key_terms(text_of[row.source]) - STRUCTURAL_WORDS))
    assert StoreLayout(tmp_path).integration_report(result.cycle_id).exists()
    # greedy decoding from an empty cache: the same record, model and prompt give the same signature
    signatures = StoreLayout(tmp_path).signatures.read_bytes()
    again = integrate(
        tmp_path, SummarizerSigner(generator), real_embedder, IntegrationConfig(null_shuffles=50), rebuild=True
    )
    assert again.distill.reused == 0 and again.distill.signed == report.signed
    assert StoreLayout(tmp_path).signatures.read_bytes() == signatures
