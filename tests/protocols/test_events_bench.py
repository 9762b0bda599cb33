"""``lca bench events``: the change detector's model as fitted by scikit-learn, and the benchmark's command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lca.change_detector import FEATURES, ChangeModel, StructuralChangeDetector
from lca.types import EntryKind
from protocols.bench.events import BENCHMARK, FIT, THRESHOLDS, fit_model, model_from_sklearn, scenario_turns
from tests.conftest import make_entry

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"

# (what the user said first, a distractor on a nearby subject, the change said later)
STORIES = [
    (
        "My weekly budget for groceries is $120.",
        "The grocery store on Main Street opens at 8am.",
        "Change of plan, the grocery budget is now $150.",
    ),
    (
        "I usually swim at Northgate pool on Tuesdays.",
        "The pool cafe sells good coffee.",
        "I switched to swimming at Riverside pool on Tuesdays now.",
    ),
    (
        "Please book the dentist appointment for Thursday at 3pm with Dr Patel.",
        "Dr Patel's receptionist is called Anna.",
        "Switch the dentist appointment to Friday at 11am instead.",
    ),
    (
        "Our team standup is at 9:30 every weekday in the Orchid room.",
        "The Orchid room has a broken projector.",
        "Quick change: standup moves to 10:15 starting Monday, same room.",
    ),
]


class FakeScenario:
    """What the benchmark reads of a scenario: its sessions, their turns and the replacement events."""

    def __init__(self, story: tuple[str, str, str], day: int) -> None:
        first, aside, change = story
        at = f"2026-03-{day:02d}T09:00:"

        def entry(session, n, text, second, agent=False):
            kind = EntryKind.ASSISTANT_TURN if agent else EntryKind.USER_TURN
            return make_entry(session, n, text, timestamp=f"{at}{second:02d}", kind=kind)

        self._entries = {
            "s1": [entry("s1", 1, first, 0), entry("s1", 2, "Got it.", 1, agent=True)],
            "s2": [entry("s2", 1, aside, 10), entry("s2", 2, "Good to know.", 11, agent=True)],
            "s3": [entry("s3", 1, change, 20), entry("s3", 2, "Okay, noted.", 21, agent=True)],
        }
        self.sessions = list(self._entries)

    def entries(self, session):
        return tuple(self._entries[session])

    def replacement_events(self):
        return [
            {"type": "supersedes", "of": "s1#s1:1", "by": "s3#s3:1", "labelled": False},
            {"type": "supersedes", "of": "s2#s2:1", "by": "s3#s3:2", "labelled": True},  # a label: not gold
        ]


def tiny_files():
    """Two "files" of scenarios: the fit's leave-one-file-out needs two groups."""
    first = [FakeScenario(story, day) for day, story in enumerate(STORIES * 3, 1)]
    second = [FakeScenario(story, day) for day, story in enumerate(reversed(STORIES * 3), 1)]
    return [(Path("first.jsonl"), "a" * 64, first), (Path("second.jsonl"), "b" * 64, second)]


# ---- the model, from scikit-learn ------------------------------------------------------------
def test_model_from_sklearn_reproduces_predict_proba():
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(3)
    x = rng.random((300, len(FEATURES)))
    x[:, 4:8] = rng.integers(0, 2, (300, 4))  # some binary columns, as most features are
    y = ((x[:, 0] + x[:, 4] - x[:, 2] + 0.3 * rng.standard_normal(300)) > 0.6).astype(int)
    fitted = GradientBoostingClassifier(n_estimators=40, max_depth=2, learning_rate=0.2, random_state=0).fit(x, y)
    model = model_from_sklearn(fitted, ["train.jsonl@abc"])
    assert len(model.trees) == 40 and model.rate == pytest.approx(0.2) and model.fitted_on == ("train.jsonl@abc",)
    rows = np.vstack([x, rng.random((100, len(FEATURES)))])
    expected = fitted.predict_proba(rows)[:, 1]
    assert len(set(np.round(expected, 3))) > 10  # the trees score rows apart: the comparison below can fail
    for row, want in zip(rows, expected, strict=True):
        assert model.confidence(dict(zip(FEATURES, row.tolist(), strict=True))) == pytest.approx(want, abs=1e-6)
    # ... and it survives the file it is shipped as
    again = ChangeModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model


# ---- fitting -----------------------------------------------------------------------------------
def test_fit_model_on_a_tiny_set_writes_a_model_the_detector_reads(tmp_path):
    files = tiny_files()
    model, cv = fit_model(files)
    # the rows are the screened candidate pairs, labelled by the unlabelled gold only
    pairs = [
        (of, by)
        for _, _, scenarios in files
        for scenario in scenarios
        for of, by, _ in StructuralChangeDetector(model=ChangeModel(0.0)).candidate_pairs(scenario_turns(scenario))
    ]
    positives = sum(pair == ("s1#s1:1", "s3#s3:1") for pair in pairs)
    assert cv["candidate_pairs"] == len(pairs) and cv["positive_pairs"] == positives > 0
    assert positives < len(pairs)  # negatives too, or there is nothing to fit
    assert cv["gold_events"] == 1  # one pair, the same in every scenario; the labelled one is not gold
    assert cv["fit"] == FIT and set(cv) >= {"0.5", "0.65", "0.8"}
    assert model.fitted_on == ("first.jsonl@aaaaaaaaaaaa", "second.jsonl@bbbbbbbbbbbb")
    assert len(model.trees) == FIT["n_estimators"]

    path = tmp_path / "model.json"
    path.write_text(json.dumps(model.to_dict()))
    loaded = ChangeModel.from_dict(json.loads(path.read_text()), path=str(path))
    assert loaded == model
    scenario = files[0][2][0]
    scored = {
        (of, by): loaded.confidence(features)
        for of, by, features in StructuralChangeDetector(model=loaded).candidate_pairs(scenario_turns(scenario))
    }
    gold = scored.pop(("s1#s1:1", "s3#s3:1"))
    assert scored and all(gold > other for other in scored.values())  # it learned the pair from the rest


def test_lca_bench_events_fit_writes_a_model_that_reads_back(tmp_path):
    files = []
    for name in ("continuity-unlabelled-v1.jsonl", "continuity-short-v1.jsonl"):
        first = (SCENARIOS / name).read_text(encoding="utf-8").splitlines()[0]
        files.append(tmp_path / name)
        files[-1].write_text(first + "\n", encoding="utf-8")
    out, model_path = tmp_path / "events.json", tmp_path / "fitted" / "model.json"
    args = BENCHMARK.parser().parse_args(
        ["--scenarios", str(files[0]), "--scenarios", str(files[1]), "--fit", str(model_path), "--out", str(out)]
    )
    assert BENCHMARK.run(args) == 0
    model = ChangeModel.from_dict(json.loads(model_path.read_text()), path=str(model_path))
    assert [name.split("@")[0] for name in model.fitted_on] == [f.name for f in files]
    record = json.loads(out.read_text())
    assert record["config"]["fit_written_to"] == str(model_path)
    assert record["metrics"]["fit_leave_one_file_out"]["gold_events"] > 0


def test_lca_bench_events_measures_a_given_model(tmp_path):
    scenarios = SCENARIOS / "continuity-short-v1.jsonl"
    model_path, out = tmp_path / "model.json", tmp_path / "events.json"
    model_path.write_text(json.dumps(ChangeModel(init=5.0).to_dict()))  # keeps every candidate it is shown
    args = BENCHMARK.parser().parse_args(
        ["--scenarios", str(scenarios), "--model", str(model_path), "--hold", "0.9", "--mark", "0.6", "--out", str(out)]
    )
    assert BENCHMARK.run(args) == 0
    record = json.loads(out.read_text())
    assert (record["config"]["hold"], record["config"]["mark"]) == (0.9, 0.6)
    at_hold = record["metrics"]["all"]["0.9"]
    assert at_hold == record["metrics"][str(scenarios)]["0.9"]  # one file: the same figures
    assert at_hold["inferred"] > 0 and at_hold["gold"] > 0
    assert set(record["metrics"]["all"]) == {f"{t:g}" for t in {0.6, 0.9, *THRESHOLDS}}
    # a constant model scores every pair alike: each threshold below it keeps the same events
    assert record["metrics"]["all"]["0.5"] == at_hold


def test_lca_bench_events_refuses_a_missing_file(tmp_path, capsys):
    out = tmp_path / "events.json"
    missing = tmp_path / "nowhere.jsonl"
    args = BENCHMARK.parser().parse_args(["--scenarios", str(missing), "--out", str(out)])
    assert BENCHMARK.run(args) == 2
    assert str(missing) in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit) as info:  # no scenario file named at all
        BENCHMARK.parser().parse_args(["--out", str(out)])
    assert info.value.code == 2
