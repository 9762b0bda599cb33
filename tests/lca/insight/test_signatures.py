"""Structural signatures: the schema, the loops read off the relations, the canonical text, and the distillation
pass that stores a validated signature with its provenance or quarantines the answer with a counted reason."""

from __future__ import annotations

import json
import typing

import jsonschema
import pytest

from lca.errors import RecordFormatError
from lca.insight.distill import DEMO_ANSWER, SIGNATURE_PROMPT_VERSION, SummarizerSigner, distill
from lca.insight.signatures import (
    SIGNATURE_JSON_SCHEMA,
    StructuralSignature,
    canonical_text,
    feedback_loops,
    validate_signature,
)
from lca.insight.store import SignatureStore, insight_records
from lca.layout import StoreLayout
from lca.ports import StructuralSigner
from tests.lca.insight.corpus import CORPUS, ECOLOGY, SKELETONS, fake_signer_generator, write_memories


def test_the_json_schema_and_the_model_agree_on_the_closed_vocabulary():
    variable = SIGNATURE_JSON_SCHEMA["properties"]["variables"]["items"]["properties"]
    field = StructuralSignature.model_fields["variables"].annotation
    (item,) = typing.get_args(field)[:1]
    kind_type = item.model_fields["kind"].annotation
    assert variable["kind"]["enum"] == list(typing.get_args(kind_type))
    demo = json.loads(DEMO_ANSWER)
    jsonschema.validate(demo, SIGNATURE_JSON_SCHEMA)  # the prompt's own example is an answer the grammar allows
    StructuralSignature.model_validate(demo)
    for skeleton in SKELETONS.values():
        jsonschema.validate(skeleton, SIGNATURE_JSON_SCHEMA)


def test_loops_and_their_signs_are_read_off_the_relations():
    predator = StructuralSignature.model_validate(SKELETONS["oscillator"])
    assert [loop.label for loop in feedback_loops(predator)] == ["balancing loop of population -> population"]
    runaway = StructuralSignature.model_validate(SKELETONS["runaway"])
    assert [loop.sign for loop in feedback_loops(runaway)] == [1]
    standoff = StructuralSignature.model_validate(SKELETONS["standoff"])  # two decreases make a reinforcing loop
    assert [loop.sign for loop in feedback_loops(standoff)] == [1]
    chain = StructuralSignature.model_validate(SKELETONS["chain"])
    assert feedback_loops(chain) == []


def test_the_canonical_text_does_not_depend_on_the_letters():
    relettered = {
        "variables": [{"name": "D", "kind": "population"}, {"name": "C", "kind": "population"}],
        "relations": [
            {"source": "D", "effect": "increases", "target": "C"},
            {"source": "C", "effect": "decreases", "target": "D"},
        ],
        "thresholds": [],
        "dynamics": ["delay", "oscillation"],
        "pattern": "",
    }
    original = StructuralSignature.model_validate(SKELETONS["oscillator"])
    assert canonical_text(StructuralSignature.model_validate(relettered)) == canonical_text(original)
    assert canonical_text(original) != canonical_text(StructuralSignature.model_validate(SKELETONS["runaway"]))


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("The wolves eat the deer.", "malformed_json"),
        ("```json\n{}\n```", "malformed_json"),
        ("[1, 2]", "malformed_json"),
        (json.dumps({**SKELETONS["runaway"], "variables": [{"name": "A", "kind": "wolf"}]}), "schema_invalid"),
        (json.dumps({**SKELETONS["runaway"], "extra": 1}), "schema_invalid"),
        (json.dumps({**SKELETONS["runaway"], "relations": []}), "schema_invalid"),
        (json.dumps({**SKELETONS["runaway"], "variables": [{"name": "A", "kind": "rate"}]}), "inconsistent"),
        (
            json.dumps({**SKELETONS["decay"], "variables": [{"name": "A", "kind": "rate"}] * 2}),
            "inconsistent",
        ),
    ],
)
def test_an_invalid_answer_is_refused_with_its_reason(answer, reason):
    signature, _, refusal = validate_signature(answer, "wolves hunt deer")
    assert signature is None and refusal is not None
    assert refusal.reason == reason and refusal.message


def test_the_pattern_loses_the_records_own_words_and_keeps_structural_ones():
    answer = json.dumps({**SKELETONS["oscillator"], "pattern": "wolves grow as deer grow, then the wolves thin A"})
    signature, scrubbed, refusal = validate_signature(answer, "Wolves hunt deer; deer feed wolves.")
    assert refusal is None and signature is not None
    assert scrubbed == 3
    assert signature.pattern == "X grow as X grow, then the X thin A"
    assert "wolves" not in canonical_text(signature).lower()


def test_the_summarizer_signer_meets_the_port_and_asks_under_the_schema(tmp_path):
    generator = fake_signer_generator(CORPUS)
    signer = SummarizerSigner(generator, seed=3)
    assert isinstance(signer, StructuralSigner)
    assert signer.prompt_version == SIGNATURE_PROMPT_VERSION and signer.model_id == "fake-signer"
    signer.sign("Wolves hunt deer across valley forest; deer herds feed wolf packs, wolf packs thin deer herds.")
    assert generator.schemas == [SIGNATURE_JSON_SCHEMA]
    assert generator.settings == [{"max_tokens": signer.max_tokens, "temperature": 0.0, "seed": 3}]


def test_the_pass_stores_signatures_with_provenance_and_quarantines_every_refusal_by_reason(tmp_path):
    write_memories(tmp_path, ECOLOGY)
    wolves, meadow, herd, scent = (text for _, _, text, _ in ECOLOGY)
    generator = fake_signer_generator(
        ECOLOGY,
        overrides={meadow: "no idea", herd: json.dumps({"variables": []}), scent: RuntimeError("model crashed")},
    )
    records, skipped = insight_records(tmp_path)
    assert [r.id for r in records] == ["eco-herd", "eco-meadow", "eco-scent", "eco-wolves"]
    assert skipped == {"superseded": 0, "secret": 0, "no_domain": 0, "unreadable": 0}
    signatures, report = distill(tmp_path, records, SummarizerSigner(generator))
    assert list(signatures) == ["eco-wolves"]
    assert report.signed == 1 and report.reused == 0
    assert report.refused == {"generation_failed": 1, "malformed_json": 1, "schema_invalid": 1, "inconsistent": 0}
    assert report.signed + sum(report.refused.values()) == len(records)  # nothing dropped unsaid
    row = signatures["eco-wolves"]
    wolves_record = next(r for r in records if r.id == "eco-wolves")
    assert (row.source_hash, row.model, row.prompt_version) == (
        wolves_record.content_hash,
        "fake-signer",
        SIGNATURE_PROMPT_VERSION,
    )
    assert row.domain == "ecology" and row.text.startswith("population population")
    quarantined = SignatureStore(tmp_path).quarantine()
    assert sorted(q.reason for q in quarantined.values()) == ["generation_failed", "malformed_json", "schema_invalid"]
    assert any("model crashed" in q.message for q in quarantined.values())
    # a second pass asks nothing: signatures are reused, refusals are not asked again
    calls = len(generator.calls)
    _, again = distill(tmp_path, records, SummarizerSigner(generator))
    assert len(generator.calls) == calls
    assert (again.signed, again.reused, again.refused_before) == (0, 1, 3)
    # unless asked to retry the refused ones
    _, retried = distill(tmp_path, records, SummarizerSigner(generator), retry_quarantined=True)
    assert len(generator.calls) == calls + 3 and sum(retried.refused.values()) == 3


def test_a_rebuild_reproduces_the_stored_signatures_byte_for_byte(tmp_path):
    write_memories(tmp_path, CORPUS)
    records, _ = insight_records(tmp_path)
    distill(tmp_path, records, SummarizerSigner(fake_signer_generator(CORPUS)))
    layout = StoreLayout(tmp_path)
    stored = layout.signatures.read_bytes()
    layout.signatures.unlink()
    generator = fake_signer_generator(CORPUS)
    _, report = distill(tmp_path, records, SummarizerSigner(generator), rebuild=True)
    assert report.signed == len(records) and len(generator.calls) == len(records)
    assert layout.signatures.read_bytes() == stored


def test_an_edited_record_is_signed_again_and_its_old_signature_leaves(tmp_path):
    write_memories(tmp_path, ECOLOGY)
    records, _ = insight_records(tmp_path)
    distill(tmp_path, records, SummarizerSigner(fake_signer_generator(ECOLOGY)))
    edited = [("eco-wolves", "ecology", "Wolf packs and deer herds rise and fall in turn.", "oscillator")]
    write_memories(tmp_path, edited)
    records, _ = insight_records(tmp_path)
    generator = fake_signer_generator(edited + ECOLOGY[1:])
    signatures, report = distill(tmp_path, records, SummarizerSigner(generator))
    assert (report.signed, report.reused) == (1, 3)
    hashes = [key[1] for key in SignatureStore(tmp_path).signatures() if key[0] == "eco-wolves"]
    assert hashes == [signatures["eco-wolves"].source_hash]


def test_a_hand_broken_signature_file_is_refused_naming_the_file_and_line(tmp_path):
    layout = StoreLayout(tmp_path)
    layout.insight.mkdir()
    layout.signatures.write_text('{"source": "x"}\n', encoding="utf-8")
    with pytest.raises(RecordFormatError) as caught:
        SignatureStore(tmp_path).signatures()
    assert str(layout.signatures) in str(caught.value) and "line 1" in str(caught.value)
