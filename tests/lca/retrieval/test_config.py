"""RetrievalConfig: declared, validated, frozen; from a mapping, a YAML file or name=value overrides."""

from __future__ import annotations

import dataclasses

import pytest

from lca.params import ParameterError
from lca.retrieval import RETRIEVAL_FIELDS, RetrievalConfig


def test_defaults_are_the_dev_split_choices_with_the_dialog_signals_off():
    config = RetrievalConfig()
    assert (config.fusion, config.bm25_weight, config.pool) == ("z", 0.5, 50)
    assert (config.anchor_weight, config.feedback_weight, config.now_weight, config.now_depth) == (4.0, 0.6, 1.0, 20)
    assert config.context_weight == config.question_weight == config.reply_weight == config.speaker_weight == 0
    assert config.when_weight == 0
    assert set(config.ablations()) == {"anchor_weight=0", "feedback_weight=0", "now_weight=0", "bm25_weight=0"}
    assert config.ablations()["feedback_weight=0"] == dataclasses.replace(config, feedback_weight=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.fusion = "z"  # type: ignore[misc]


def test_overrides_are_typed_and_unknown_names_refused_with_the_list():
    config = RetrievalConfig().with_overrides(["fusion=z", "context-weight=0.5", "names_in_dense_query=off"])
    assert (config.fusion, config.context_weight, config.names_in_dense_query) == ("z", 0.5, False)
    with pytest.raises(
        ParameterError, match=r"--set 'bogus=1': unknown name 'bogus'; known: anchor_weight, bm25_weight"
    ):
        RetrievalConfig().with_overrides(["bogus=1"])
    with pytest.raises(ParameterError, match="takes a number"):
        RetrievalConfig().with_overrides(["bm25_weight=lots"])
    with pytest.raises(ParameterError, match="fusion must be one of rrf, z, blend"):
        RetrievalConfig().with_overrides(["fusion=max"])
    with pytest.raises(ValueError, match="feedback_depth must be at least 1"):
        RetrievalConfig(feedback_depth=0)
    with pytest.raises(ValueError, match="speaker_weight must be at least 0"):
        RetrievalConfig(speaker_weight=-1)


def test_a_file_and_a_mapping_read_the_same_fields(tmp_path):
    path = tmp_path / "retrieval.yaml"
    path.write_text("fusion: z\nbm25_weight: 0.5\nnames_in_dense_query: false\nfeedback_depth: 4\n")
    config = RetrievalConfig.from_file(path)
    assert config == RetrievalConfig.from_mapping(
        {"fusion": "z", "bm25_weight": 0.5, "names_in_dense_query": False, "feedback_depth": 4}
    )
    assert (config.bm25_weight, config.feedback_depth, config.names_in_dense_query) == (0.5, 4, False)
    path.write_text("fusion: z\nsentence_kees: on\n")
    with pytest.raises(ParameterError, match=r"sentence_kees.*unknown name; known: anchor_weight"):
        RetrievalConfig.from_file(path)
    assert set(RetrievalConfig().to_dict()) == set(RETRIEVAL_FIELDS)


def test_ablations_turn_off_exactly_one_part_that_is_on():
    config = RetrievalConfig(
        fusion="z",
        anchor_weight=0,
        feedback_weight=0,
        now_weight=0,
        context_weight=1,
        speaker_weight=0.6,
        names_in_dense_query=False,
    )
    variants = config.ablations()
    assert set(variants) == {"bm25_weight=0", "context_weight=0", "speaker_weight=0", "names_in_dense_query=on"}
    keyed = dataclasses.replace(config, sentence_keys=True)
    assert "sentences=off" in keyed.ablations()  # only a store with sentence keys has that part
    for variant in keyed.ablations().values():
        changed = [f for f in RETRIEVAL_FIELDS if getattr(variant, f) != getattr(keyed, f)]
        assert len(changed) == 1
