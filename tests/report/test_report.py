"""``lca report`` on a study run built from real hollow_copy logs: every file written, the provenance stated, the
exploratory banner, refused agreement shown as refused, the items round-trip through Parquet; and the decision
rules on hand-made item frames (a clear effect supported, none not supported, TOST equivalent or not)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from lca.errors import LCAError
from protocols import cli
from protocols.report import analyse_frame, items_frame, load_run
from protocols.report.findings import NOT_SUPPORTED, NOT_TESTED, SUPPORTED, UNINFORMATIVE, JudgedStatus
from protocols.study.schema import load_study
from tests.report.conftest import CONDITIONS, GGUF_SHA, STUDY_ID, make_run

RUN_ID = "20260101T000000"


def report(root, logs, *, run_id=RUN_ID, **kw):
    study = make_run(root, logs, run_id=run_id, **kw)
    out = root / "reports"
    assert cli.main(["report", str(study), "--studies", str(root / "studies"), "--out", str(out)]) == 0
    return out / STUDY_ID


@pytest.fixture(scope="module")
def locked(tmp_path_factory, hollow_copy_logs):
    """One locked run (raters refused) and its report, shared by the tests that only read them."""
    root = tmp_path_factory.mktemp("locked")
    return root, report(root, hollow_copy_logs)


def test_the_report_writes_every_file_and_states_its_provenance(locked):
    _, folder = locked
    plots = {p.name for p in (folder / "plots").glob("*.png")}
    assert {
        "means_needed_text.png",
        "means_false_hedge.png",
        "means_tokens.png",
        "latency.png",
        "frontier.png",
        "agreement.png",
    } <= plots
    assert all((folder / "plots" / p).stat().st_size > 1000 for p in plots)
    text = (folder / "report.md").read_text()
    summary = json.loads((folder / "summary.json").read_text())
    prov = summary["provenance"]
    sha = prov["study_sha256"]
    assert len(sha) == 64 and sha in text and prov["lock_state"] == "locked"
    for needle in (
        "0.1.0+gabc",
        GGUF_SHA,
        "fake-hashing-64",
        "f387bd0cb402e41b",
        "(project fixture)",
        "Seeds: 0",
        "inspect-ai 0.3.285",
        "lca-local/smollm2",
    ):
        assert needle in text, needle
    assert prov["from_logs"]["models"] == ["mockllm/model"] and prov["from_logs"]["embedders"] == ["fake-hashing-64"]
    assert "plumbing-grade" in text and "agent: openai/gpt-4o-mini" in text and "--relock" in text
    assert "EXPLORATORY" not in text and summary["exploratory"] is False
    # the deviations and the pre-registration's own rules are printed
    assert "ran the project fixture" in text and "data_missing" in text and "a rule in words" in text
    assert set(summary["verdicts"]) == {"P1", "P2", "P3"}
    # conditions x measures with n, mean, CI and stderr, from the logs (4 probes each)
    rows = {(c["measure"], c["condition"]): c for c in summary["conditions"]}
    assert rows[("tokens", "stateless")]["mean"] == 0 and rows[("tokens", "full-lca")]["mean"] > 0
    assert rows[("tokens", "full-lca")]["n"] == 4 and rows[("tokens", "full-lca")]["stderr"] is not None
    assert {r["condition"] for r in summary["latency"]} == set(CONDITIONS)


def test_refused_agreement_is_shown_as_refused_and_its_predictions_are_not_tested(locked):
    _, folder = locked
    summary = json.loads((folder / "summary.json").read_text())
    style = summary["agreement"]["style"]
    assert style["state"] == "refused" and style["alpha"] == pytest.approx(-0.9) and style["leaning"] == ["full-lca"]
    (p3,) = [p for p in summary["predictions"] if p["id"] == "P3"]
    assert p3["verdict"] == NOT_TESTED and "coding refused" in p3["reason"] and "-0.900" in p3["reason"]
    text = (folder / "report.md").read_text()
    assert "| style | ordinal | **refused** |" in text and "disagreements lean on full-lca" in text
    assert not [c for c in summary["conditions"] if c["measure"] == "style"]  # refused data are not coded


def test_passed_agreement_codes_the_judged_measure_and_tests_its_prediction(tmp_path, hollow_copy_logs):
    make_run(tmp_path, hollow_copy_logs, run_id=RUN_ID, agree=True)
    run = load_run(STUDY_ID, studies=tmp_path / "studies")
    frame = items_frame(run)
    by_condition = frame.groupby("condition")["judged/style"].mean()
    assert by_condition["full-lca"] == 5 and by_condition["stateless"] == 1
    from protocols.report import analyse

    (p3,) = [p for p in analyse(run, frame).predictions if p.id == "P3"]
    assert p3.result is not None and p3.result.n == 4 and p3.directed_estimate == 4


def test_an_exploratory_run_carries_the_banner(tmp_path, hollow_copy_logs, capsys):
    folder = report(tmp_path, hollow_copy_logs, run_id=RUN_ID + "-exploratory", exploratory=True)
    printed = capsys.readouterr().out
    assert "EXPLORATORY" in printed and "P1 (primary, needed_text):" in printed
    text = (folder / "report.md").read_text()
    assert "> **EXPLORATORY**" in text and "the study was unlocked when it ran" in text
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["exploratory"] is True and summary["run_id"] == RUN_ID + "-exploratory"


def test_the_items_round_trip_through_parquet(locked):
    root, folder = locked
    run = load_run(STUDY_ID, studies=root / "studies")
    frame = items_frame(run)
    back = pd.read_parquet(folder / "items.parquet")
    assert len(frame) == 8 and list(back.columns) == list(frame.columns)
    assert back[["protocol", "sample_id", "condition", "epoch"]].equals(
        frame[["protocol", "sample_id", "condition", "epoch"]]
    )
    numeric = [c for c in frame.columns if "/" in c]
    assert "continuity_context/needed_text" in numeric and "substrate/injected_tokens" in numeric
    np.testing.assert_array_equal(back[numeric].to_numpy(dtype=float), frame[numeric].to_numpy(dtype=float))
    assert [list(p) for p in back["injected_pointers"]] == list(frame["injected_pointers"])
    full = frame[frame["condition"] == "full-lca"]
    assert (
        full["injected_pointers"].map(len).gt(0).all()
        and frame.loc[frame["condition"] == "stateless", "injected_tokens"].eq(0).all()
    )
    assert frame["answer"].str.len().gt(0).all() and "judged/style" not in frame.columns  # refused: not coded


def test_a_study_without_runs_is_refused_with_the_command_that_makes_one(tmp_path):
    with pytest.raises(LCAError, match="lca run preregistration/tiny_study.yaml"):
        load_run(STUDY_ID, studies=tmp_path)


# ---- the decision rules, on hand-made item frames ---------------------------------------------------------
@pytest.fixture
def tiny_study(tmp_path):
    from tests.report.conftest import STUDY_YAML

    path = tmp_path / f"{STUDY_ID}.yaml"
    path.write_text(STUDY_YAML)
    return load_study(path, registered=False)


def frame_of(columns: dict[str, dict[str, list[float]]], n: int) -> pd.DataFrame:
    """Rows for n items under both conditions; ``columns[column][condition]`` the values."""
    rows = []
    for condition in CONDITIONS:
        for i in range(n):
            row = {
                "protocol": "hollow_copy",
                "sample_id": f"s{i % 5}:q{i}",
                "condition": condition,
                "epoch": 1,
                "scenario": f"s{i % 5}",
                "error": None,
                "recall_latency_ms": 1.0,
                "sample_seconds": 0.1,
                "injected_tokens": 10.0,
                "shortfalls": "",
                "shortfall": False,
            }
            row.update({column: values[condition][i] for column, values in columns.items()})
            rows.append(row)
    return pd.DataFrame(rows)


def verdicts(study, frame):
    return {p.id: p for p in analyse_frame(study, frame).predictions}


def test_a_clear_effect_is_supported_and_no_effect_is_not(tiny_study):
    n = 40
    rng = np.random.default_rng(1)
    same = rng.integers(0, 2, n).astype(float).tolist()
    hedge = {"stateless": same, "full-lca": same}
    clear = frame_of(
        {
            "continuity_context/needed_text": {"stateless": [0.0] * n, "full-lca": [1.0] * 34 + [0.0] * 6},
            "continuity_behaviour/false_hedge": hedge,
        },
        n,
    )
    p1 = verdicts(tiny_study, clear)["P1"]
    assert p1.verdict == SUPPORTED and p1.result.test == "mcnemar" and p1.result.n == n
    assert p1.directed_estimate == pytest.approx(0.85) and p1.p_adjusted < 0.05
    assert p1.p_adjusted >= p1.result.p_value  # Holm over the primary family (P1, P2)
    none = frame_of(
        {
            "continuity_context/needed_text": {"stateless": same, "full-lca": same},
            "continuity_behaviour/false_hedge": hedge,
        },
        n,
    )
    p1 = verdicts(tiny_study, none)["P1"]
    assert p1.verdict == NOT_SUPPORTED and p1.directed_estimate == 0 and "below the predicted 0.1" in p1.reason


def test_tost_equivalent_and_not(tiny_study):
    n = 40
    rng = np.random.default_rng(2)
    base = rng.integers(0, 2, n).astype(float)
    flipped = base.copy()
    flipped[0] = 1 - flipped[0]
    needed = {"stateless": [0.0] * n, "full-lca": [1.0] * n}
    near = frame_of(
        {
            "continuity_behaviour/false_hedge": {"stateless": base.tolist(), "full-lca": flipped.tolist()},
            "continuity_context/needed_text": needed,
        },
        n,
    )
    p2 = verdicts(tiny_study, near)["P2"]
    assert p2.verdict == SUPPORTED and p2.result.test == "tost_paired" and p2.result.detail.startswith("equivalent")
    far = frame_of(
        {
            "continuity_behaviour/false_hedge": {"stateless": [0.0] * n, "full-lca": [1.0] * 25 + [0.0] * 15},
            "continuity_context/needed_text": needed,
        },
        n,
    )
    p2 = verdicts(tiny_study, far)["P2"]
    assert p2.verdict == NOT_SUPPORTED and p2.result.detail.startswith("not equivalent")
    assert p2.directed_ci[1] <= -0.2


def test_parity_at_a_pre_registered_floor_or_ceiling_is_uninformative_not_support(tiny_study):
    n = 40
    needed = {"stateless": [0.0] * n, "full-lca": [1.0] * n}
    bounded = tiny_study.model_copy(
        update={
            "predictions": tuple(
                p.model_copy(update={"floor": 0.05, "ceiling": 0.95}) if p.kind == "equivalence" else p
                for p in tiny_study.predictions
            )
        }
    )
    for value, where in ((0.0, "floor"), (1.0, "ceiling")):
        flat = frame_of(
            {
                "continuity_behaviour/false_hedge": {c: [value] * n for c in CONDITIONS},
                "continuity_context/needed_text": needed,
            },
            n,
        )
        assert verdicts(tiny_study, flat)["P2"].verdict == SUPPORTED  # TOST alone: zero difference, zero spread
        p2 = verdicts(bounded, flat)["P2"]
        assert p2.verdict == UNINFORMATIVE and f"at the {where}" in p2.reason and p2.result is not None
    rng = np.random.default_rng(2)
    base = rng.integers(0, 2, n).astype(float)
    mixed = frame_of(
        {
            "continuity_behaviour/false_hedge": {c: base.tolist() for c in CONDITIONS},
            "continuity_context/needed_text": needed,
        },
        n,
    )
    assert verdicts(bounded, mixed)["P2"].verdict == SUPPORTED  # off the bounds, the floor changes nothing


def test_a_floor_belongs_to_an_equivalence_prediction(tmp_path):
    from tests.report.conftest import STUDY_YAML

    path = tmp_path / f"{STUDY_ID}.yaml"
    import yaml

    data = yaml.safe_load(STUDY_YAML)
    superiority = next(p for p in data["predictions"] if p["kind"] == "superiority")
    superiority["floor"] = 0.05
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(LCAError, match="floor belongs to an equivalence prediction"):
        load_study(path, registered=False)


def test_a_judged_measure_is_tested_only_when_its_agreement_passed(tiny_study):
    n = 10
    columns = {
        "continuity_context/needed_text": {"stateless": [0.0] * n, "full-lca": [1.0] * n},
        "continuity_behaviour/false_hedge": {"stateless": [0.0] * n, "full-lca": [0.0] * n},
        "judged/style": {"stateless": [1.0] * 5 + [2.0] * 5, "full-lca": [4.0] * 5 + [5.0] * 5},
    }
    frame = frame_of(columns, n)
    refused = JudgedStatus("style", "refused", "ordinal", 0.667, alpha=0.1, alpha_ci=(-0.2, 0.4))
    analysis = analyse_frame(tiny_study, frame, {"style": refused})
    p3 = {p.id: p for p in analysis.predictions}["P3"]
    assert p3.verdict == NOT_TESTED and "0.100" in p3.reason and p3.result is None
    assert not [c for c in analysis.conditions if c.measure == "style"]
    passed = JudgedStatus("style", "passed", "ordinal", 0.667, alpha=0.9, alpha_ci=(0.8, 1.0))
    p3 = {p.id: p for p in analyse_frame(tiny_study, frame, {"style": passed}).predictions}["P3"]
    assert p3.result.test == "paired_bootstrap" and p3.directed_estimate == 3 and p3.verdict == SUPPORTED
    assert p3.role == "secondary" and p3.p_adjusted == p3.result.p_value  # alone in its family
    assert not math.isnan(p3.means["full-lca"])


def within_study(tmp_path, **prediction):
    """The tiny study with one more prediction: two measures of full-lca compared on the same samples."""
    import yaml

    from tests.report.conftest import STUDY_YAML

    data = yaml.safe_load(STUDY_YAML)
    data["measures"].append(
        {
            "id": "evidence",
            "protocol": "hollow_copy",
            "kind": "computed",
            "scorer": "substrate",
            "metric": "evidence_pointer",
            "computation": "an evidence turn among the pointers",
            "scale": "binary",
        }
    )
    data["predictions"].append({"id": "P4", "hypothesis": "H1", "measure": "needed_text", **prediction})
    path = tmp_path / f"{STUDY_ID}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_study(path, registered=False)


def test_a_within_condition_prediction_pairs_two_measures_of_one_condition(tmp_path):
    n = 40
    study = within_study(tmp_path, kind="equivalence", within="full-lca", against="evidence", margin=0.2)
    assert study.prediction_conditions(study.prediction("P4")) == ("full-lca:needed_text", "full-lca:evidence")
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2, n).astype(float)
    other = {"stateless": [0.0] * n, "full-lca": [1.0] * n}  # the stateless arm must not enter the comparison
    hedge = {c: [0.0] * n for c in CONDITIONS}
    same = frame_of(
        {
            "continuity_context/needed_text": {"stateless": [0.0] * n, "full-lca": base.tolist()},
            "substrate/evidence_pointer": {"stateless": other["stateless"], "full-lca": base.tolist()},
            "continuity_behaviour/false_hedge": hedge,
        },
        n,
    )
    p4 = verdicts(study, same)["P4"]
    assert p4.verdict == SUPPORTED and p4.result.n == n and p4.result.test == "tost_paired"
    assert set(p4.means) == {"full-lca:needed_text", "full-lca:evidence"}
    apart = frame_of(
        {
            "continuity_context/needed_text": {"stateless": [0.0] * n, "full-lca": [0.0] * n},
            "substrate/evidence_pointer": other,
            "continuity_behaviour/false_hedge": hedge,
        },
        n,
    )
    assert verdicts(study, apart)["P4"].verdict == NOT_SUPPORTED
    better = within_study(tmp_path, kind="superiority", within="full-lca", against="evidence", min_effect=0.5)
    flipped = frame_of(
        {
            "continuity_context/needed_text": {"stateless": [0.0] * n, "full-lca": [1.0] * n},
            "substrate/evidence_pointer": {"stateless": [1.0] * n, "full-lca": [0.0] * n},
            "continuity_behaviour/false_hedge": hedge,
        },
        n,
    )
    assert verdicts(better, flipped)["P4"].verdict == SUPPORTED


@pytest.mark.parametrize(
    "prediction, field, message",
    [
        ({"kind": "equivalence", "within": "full-lca", "margin": 0.1}, "against", "names both within and against"),
        (
            {"kind": "equivalence", "within": "full-lca", "against": "nope", "margin": 0.1},
            "against",
            "no measure 'nope'",
        ),
        ({"kind": "equivalence", "within": "full-lca", "against": "needed_text", "margin": 0.1}, "against", "itself"),
        ({"kind": "equivalence", "within": "summary", "against": "evidence", "margin": 0.1}, "within", "not among"),
        (
            {"kind": "superiority", "within": "full-lca", "against": "evidence", "better": "full-lca", "min_effect": 0},
            "better",
            "does not apply",
        ),
        ({"kind": "superiority", "within": "full-lca", "against": "evidence"}, "min_effect", "min_effect >= 0"),
    ],
)
def test_a_within_condition_prediction_is_checked_naming_the_field(tmp_path, prediction, field, message):
    with pytest.raises(LCAError, match=message) as info:
        within_study(tmp_path, **prediction)
    assert f"predictions.3.{field}" in str(info.value)
