from collections import Counter

import pytest

from protocols.evals.locomo.dataset import CATEGORY_NAMES, parse_evidence_ids
from protocols.evals.locomo.qa_metrics import locomo_score, normalize, token_f1


def test_normalization_and_stemming_follow_the_official_rules():
    assert normalize("The cat, and a DOG!") == "cat dog"
    assert token_f1("running dogs", "the dog runs") == pytest.approx(1.0)  # Porter: run/run, dog/dog
    assert token_f1("", "x") == 0.0


def test_category_rules():
    assert locomo_score("Paris", "Paris; or maybe Lyon", 3) == 1.0  # cut at the first ';'
    assert locomo_score("hiking, painting", "painting, hiking, chess", 1) == pytest.approx(2 / 3)
    assert locomo_score("That is not mentioned in the conversation.", None, 5) == 1.0
    assert locomo_score("She went to Paris.", None, 5) == 0.0
    assert locomo_score("2022", 2022, 2) == 1.0  # integer answers
    with pytest.raises(ValueError):
        locomo_score("x", "y", 9)


def test_evidence_ids_are_split_and_read_as_the_file_writes_them():
    assert parse_evidence_ids("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert parse_evidence_ids(["D1:3,D1:4", " D2:1 ", ""]) == ["D1:3", "D1:4", "D2:1"]
    assert parse_evidence_ids("D9:1 D4:4 D4:6") == ["D9:1", "D4:4", "D4:6"]  # conv-49 writes three such strings
    assert parse_evidence_ids(["D:11:26", "D30:05"]) == ["D11:26", "D30:5"]  # conv-43 and conv-50
    assert parse_evidence_ids("D") == ["D"]  # malformed ids pass through: the caller counts them
    assert parse_evidence_ids([]) == []
    repaired: Counter = Counter()
    parse_evidence_ids(["D8:6; D9:17", "D21:18 D21:22", "D:11:26", "D30:05", "D1:3", "D"], repaired)
    assert repaired == {"locomo_evidence_split": 2, "locomo_evidence_id_rewritten": 2}
    assert CATEGORY_NAMES == {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
