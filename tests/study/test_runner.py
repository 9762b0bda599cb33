"""``lca run STUDY.yaml`` end to end with inspect's mockllm as the agent and scripted raters: an unlocked study
is refused, an exploratory run says so everywhere, a locked run writes every field of run.json, a missing
benchmark runs on the fixture with a recorded deviation, and a rater panel that disagrees is refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import protocols.evals.data_paths as data_paths
import protocols.harness.solvers as solvers
from protocols import cli
from protocols.study import StudyNotLockedError, file_sha256, lock_study, read_deviations
from protocols.study.judging import RATINGS_COLUMNS
from protocols.study.manifest import cached_sha256, model_files
from protocols.study.runner import StudyRunner, run_study
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator
from tests.protocols.test_hollow_copy import scripted_agent

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "data" / "fixtures" / "continuity-v2-fixture.jsonl"
LOCOMO_FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"
QUESTIONS = [probe["question"] for line in FIXTURE.read_text().splitlines() for probe in json.loads(line)["probes"]]
MANIFEST_FIELDS = {
    "study_id",
    "study_path",
    "study_sha256",
    "lock",
    "lock_state",
    "exploratory",
    "code_revision",
    "started_at",
    "finished_at",
    "wall_seconds",
    "seeds",
    "models",
    "model_files",
    "embedder_id",
    "packages",
    "datasets",
    "protocols",
    "deviations",
    "platform",
}
LOCOMO = """
  - name: locomo
    conditions: [stateless]
    limit: 1
    requires_data: true
"""
STUDY = """schema_version: 1
id: tiny_study
title: A tiny study for the runner's tests
version: "0.1"
authors: [tests]
hypotheses:
  - {{id: H1, statement: transcript recall puts the needed text in front of the agent}}
conditions: [stateless, transcript-recall]
models:
  agent: mockllm/model
  roles: {{rater_a: mockllm/model, rater_b: mockllm/model}}
protocols:
  - name: hollow_copy
    args: {{scenarios: data/fixtures/continuity-v2-fixture.jsonl}}
    limit: 3{locomo}
measures:
  - {{id: needed_text, protocol: hollow_copy, kind: computed, scorer: continuity_context, metric: needed_text,
     computation: every required mention in the injected text, scale: binary}}
  - id: style
    protocol: hollow_copy
    kind: judged
    level: ordinal
    scale: [1, 2, 3, 4, 5]
    rater_panel:
      raters: [rater_a, rater_b]
      prompt: Rate the continuity of the answer.
      min_raters: 2{settings}
    agreement_threshold: 0.667
{calibration}
predictions:
  - {{id: P1, hypothesis: H1, measure: needed_text, kind: superiority, better: transcript-recall, than: stateless,
     min_effect: 0.1}}{judged_prediction}
sample_size:
  unit: probe
  n_per_condition: 3
  reasoning: a test
  power: {{test: mcnemar, alpha: 0.05, power: 0.8, effect: 0.2}}
analysis: {{model: cluster_robust, groups: [scenario]}}
seeds: [0]
"""


@pytest.fixture(autouse=True)
def fake_models(monkeypatch):
    """The fake embedder, and mockllm answering the fixture's probes (mockllm's default reply counts tokens
    with a tokenizer file it would download)."""
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    monkeypatch.setattr(StudyRunner, "model_factory", staticmethod(lambda model: scripted_agent("pass")))


DISTINCT = """
      settings: {rater_b: {temperature: 0.5, seed: 3}}"""
CALIBRATION_SET = REPO / "data" / "calibration" / "style_continuity-v1.jsonl"
CALIBRATION_CODES = {
    json.loads(line)["answer"]: json.loads(line)["code"] for line in CALIBRATION_SET.read_text().splitlines()
}
JUDGED_PREDICTION = """
  - {id: P2, hypothesis: H1, measure: style, kind: superiority, better: transcript-recall, than: stateless,
     min_effect: 0.5, role: secondary}"""


def write_study(tmp_path: Path, *, locomo: bool = False, calibration_set: bool = False, distinct: bool = True) -> Path:
    """The tiny study; its judged measure calibrates on 4 of the study's answers, or on the shipped calibration
    set (and then a prediction rests on it); its raters are distinct (rater_b samples at temperature 0.5) or one
    rater twice."""
    path = tmp_path / "tiny_study.yaml"
    if calibration_set:
        sha = file_sha256(CALIBRATION_SET)
        calibration = f"    calibration_set: {{path: data/calibration/style_continuity-v1.jsonl, sha256: {sha}}}"
    else:
        calibration = "    calibration_items: 4"
    text = STUDY.format(
        locomo=LOCOMO if locomo else "",
        settings=DISTINCT if distinct else "",
        calibration=calibration,
        judged_prediction=JUDGED_PREDICTION if calibration_set else "",
    )
    path.write_text(text, encoding="utf-8")
    return path


def question_value(messages) -> int:
    """A scale value fixed by the probe the rater is shown (distinct for the fixture's first five probes)."""
    question = messages[-1]["content"].split("Question:\n", 1)[1].split("\n\nAnswer:", 1)[0]
    return 1 + QUESTIONS.index(question) % 5


def raters(disagree: bool):
    """Scripted raters: a calibration-set item gets its reference code, a study answer a value fixed by its
    question; with ``disagree``, rater_b mirrors every value (6 - v)."""
    seen_conditions = []

    def factory(role, model):
        def respond(messages):
            seen_conditions.extend(c for c in ("stateless", "transcript-recall") if c in str(messages))
            answer = messages[-1]["content"].split("\n\nAnswer:\n", 1)[1]
            value = CALIBRATION_CODES.get(answer) or question_value(messages)
            return json.dumps({"rating": 6 - value if disagree and role == "rater_b" else value})

        return FakeScriptedGenerator(respond, model_id=f"fake-{role}")

    factory.seen_conditions = seen_conditions
    return factory


def ratings_rows(run_dir: Path, measure: str = "style") -> list[dict[str, str]]:
    with open(run_dir / "ratings" / f"{measure}.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == RATINGS_COLUMNS
        return list(reader)


def test_an_unlocked_study_is_refused_before_anything_runs(tmp_path, capsys):
    path, out = write_study(tmp_path), tmp_path / "studies"
    with pytest.raises(StudyNotLockedError, match="--exploratory"):
        run_study(path, out=out, display="none", rater_factory=raters(False))
    assert cli.main(["run", str(path), "--out", str(out), "--display", "none"]) == 2
    assert "not locked" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "x/y"], "a study's design is its document"),
        (["--conditions", "stateless", "--limit", "2"], "--conditions, --limit cannot be given with a study"),
    ],
)
def test_a_study_refuses_flags_that_would_change_its_design(tmp_path, capsys, argv, message):
    assert cli.main(["run", str(write_study(tmp_path)), *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_protocol_run_still_needs_conditions_and_model_and_refuses_study_flags(capsys):
    assert cli.main(["run", "hollow_copy", "--model", "x/y"]) == 2
    assert "needs --conditions" in capsys.readouterr().err
    assert cli.main(["run", "hollow_copy", "--conditions", "stateless", "--model", "x/y", "--exploratory"]) == 2
    assert "--exploratory applies to a study" in capsys.readouterr().err


def test_an_exploratory_run_says_so_in_the_console_run_json_and_every_log(tmp_path, capsys, monkeypatch):
    from inspect_ai.log import read_eval_log

    import protocols.study.runner as runner

    prose = lambda role, model: FakeScriptedGenerator(lambda messages: "I would say a 4.")  # noqa: E731
    monkeypatch.setattr(runner, "default_rater_factory", lambda: prose)
    path, out = write_study(tmp_path), tmp_path / "studies"
    reports = tmp_path / "reports"
    argv = ["run", str(path), "--exploratory", "--out", str(out), "--display", "none", "--report", str(reports)]
    assert cli.main(argv) == 0
    console = capsys.readouterr().out
    assert "EXPLORATORY" in console
    # --report wrote this run's report, with the banner, as `lca report` would
    report = (reports / "tiny_study" / "report.md").read_text()
    assert "**EXPLORATORY**" in report and "P1 (primary, needed_text)" in console
    run_id = (out / "tiny_study" / "LATEST").read_text().strip()
    assert run_id.endswith("-exploratory")
    run_dir = out / "tiny_study" / run_id
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["exploratory"] is True and manifest["lock_state"] == "unlocked" and manifest["lock"] is None
    logs = sorted((run_dir / "logs" / "hollow_copy").glob("*.eval"))
    assert len(logs) == 2  # one per condition
    for log_file in logs:
        log = read_eval_log(str(log_file), header_only=True)
        assert log.eval.metadata["exploratory"] is True and log.eval.metadata["study_run_id"] == run_id
        assert "exploratory" in log.eval.tags
    # raters answering in prose give no rating (nothing is guessed from the text), so nothing is coded
    agreement = json.loads((run_dir / "ratings" / "style.agreement.json").read_text())
    assert agreement["refused"] is True and "0 rater(s) gave a readable rating" in agreement["reason"]
    rows = ratings_rows(run_dir)
    assert len(rows) == 4 * 2
    assert all(r["value"] == "" and r["raw"] == "I would say a 4." and r["missing_reason"] for r in rows)
    assert "CODING REFUSED" in console


def test_a_locked_run_records_every_field_and_runs_a_missing_benchmark_on_its_fixture(tmp_path, monkeypatch):
    monkeypatch.setattr(data_paths, "data_roots", lambda explicit=None: [tmp_path / "no-data"])
    path, out = write_study(tmp_path, locomo=True), tmp_path / "studies"
    lock_study(path)
    factory = raters(disagree=False)
    lines: list[str] = []
    result = run_study(path, out=out, display="none", rater_factory=factory, echo=lines.append)
    assert result.ok and not result.run_id.endswith("exploratory")
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert MANIFEST_FIELDS <= set(manifest)
    assert manifest["lock_state"] == "locked" and manifest["lock"]["sha256"] == file_sha256(path)
    assert manifest["study_sha256"] == file_sha256(path) and manifest["exploratory"] is False
    assert manifest["finished_at"] and manifest["wall_seconds"] > 0 and manifest["seeds"] == [0]
    assert manifest["models"] == {
        "agent": "mockllm/model",
        "roles": {"rater_a": "mockllm/model", "rater_b": "mockllm/model"},
    }
    assert manifest["embedder_id"] == "fake-hashing-64"
    assert manifest["packages"]["inspect-ai"] and manifest["platform"]["cpu_count"]
    datasets = {d["protocol"]: d for d in manifest["datasets"]}
    assert datasets["hollow_copy"] == {
        "protocol": "hollow_copy",
        "file": "data/fixtures/continuity-v2-fixture.jsonl",
        "sha256": file_sha256(FIXTURE),
        "fixture": True,
    }
    assert datasets["locomo"]["fixture"] is True and datasets["locomo"]["sha256"] == file_sha256(LOCOMO_FIXTURE)
    protocols = {p["name"]: p for p in manifest["protocols"]}
    assert protocols["hollow_copy"]["status"] == "success" and protocols["hollow_copy"]["wall_seconds"] > 0
    assert [t["condition"] for t in protocols["hollow_copy"]["tasks"]] == ["stateless", "transcript-recall"]
    assert all(t["samples"] == 3 and "shortfalls" in t for t in protocols["hollow_copy"]["tasks"])
    assert protocols["locomo"]["status"] == "success" and protocols["locomo"]["tasks"][0]["samples"] == 1
    assert len(list(Path(protocols["locomo"]["log_dir"]).glob("*.eval"))) == 1
    # the fixture standing in for LoCoMo is a deviation: in run.json and in the study's own log
    (deviation,) = [d for d in manifest["deviations"] if d["kind"] == "data_missing"]
    assert "locomo_fixture.json" in deviation["what"] and deviation["source"] == "run"
    assert [d.kind for d in read_deviations(path)] == ["data_missing"]
    assert any("DEVIATION (data_missing)" in line for line in lines)
    # the raters agree: calibration passes and the remaining items are coded, blind to condition
    agreement = json.loads((result.run_dir / "ratings" / "style.agreement.json").read_text())
    assert agreement["refused"] is False and agreement["alpha"] == pytest.approx(1.0)
    assert (agreement["calibration_items"], agreement["coded_items"]) == (4, 2)
    # one model with two settings: distinct raters, and the note says they are not independent judges
    assert "share a model" in agreement["panel_note"] and agreement["gate"]["independent"] is True
    rows = ratings_rows(result.run_dir)
    assert len(rows) == 6 * 2 and {r["phase"] for r in rows} == {"calibration", "coding"}
    assert {r["condition"] for r in rows} == {"stateless", "transcript-recall"}
    assert len({r["sheet_item_id"] for r in rows}) == 6 and factory.seen_conditions == []


def test_raters_who_disagree_are_refused_and_the_refusal_is_recorded(tmp_path):
    path, out = write_study(tmp_path), tmp_path / "studies"
    lines: list[str] = []
    result = run_study(path, exploratory=True, out=out, display="none", rater_factory=raters(True), echo=lines.append)
    agreement = json.loads((result.run_dir / "ratings" / "style.agreement.json").read_text())
    assert agreement["refused"] is True and agreement["passes"] is False and agreement["alpha"] < 0
    assert "below the threshold 0.667" in agreement["reason"] and agreement["coded_items"] == 0
    rows = ratings_rows(result.run_dir)
    assert len(rows) == 4 * 2 and {r["phase"] for r in rows} == {"calibration"}  # nothing coded past the gate
    (entry,) = json.loads((result.run_dir / "run.json").read_text())["ratings"]
    assert entry["refused"] is True and entry["measure"] == "style"
    assert any("CODING REFUSED" in line for line in lines)
    assert read_deviations(path) == []  # an exploratory run leaves the study's deviations log alone


def report_of(path: Path, result, tmp_path: Path):
    from protocols.report import load_run, write_report

    files = write_report(load_run(path, result.run_id, tmp_path / "studies"), tmp_path / "reports")
    return files.report.read_text(), json.loads(files.summary.read_text())


def test_a_calibration_set_gates_the_panel_and_the_report_prints_every_input_of_the_gate(tmp_path):
    path, out = write_study(tmp_path, calibration_set=True), tmp_path / "studies"
    lines: list[str] = []
    result = run_study(path, exploratory=True, out=out, display="none", rater_factory=raters(False), echo=lines.append)
    agreement = json.loads((result.run_dir / "ratings" / "style.agreement.json").read_text())
    assert agreement["refused"] is False and agreement["passes"] is True
    gate = agreement["gate"]
    assert gate["calibration"]["path"] == "data/calibration/style_continuity-v1.jsonl"
    assert gate["calibration"]["sha256"] == file_sha256(CALIBRATION_SET) and gate["calibration"]["items"] == 26
    assert [(r["rater"], r["temperature"], r["seed"]) for r in gate["panel"]] == [
        ("rater_a", 0.0, 0),
        ("rater_b", 0.5, 3),
    ]
    assert gate["threshold"] == 0.667 and gate["reference_threshold"] == 0.667 and gate["level"] == "ordinal"
    assert [r["exact"] for r in gate["reference"]] == [1.0, 1.0] and all(c["passes"] for c in gate["checks"])
    # the calibration set is not the study's data: every study answer is coded after the gate
    assert (agreement["calibration_items"], agreement["coded_items"]) == (26, 6)
    rows = ratings_rows(result.run_dir)
    calibration = [r for r in rows if r["phase"] == "calibration"]
    assert len(calibration) == 26 * 2 and {r["protocol"] for r in calibration} == {"calibration-set"}
    assert all(r["reference"] == str(CALIBRATION_CODES_BY_ID[r["sample_id"]]) for r in calibration)
    assert {r["protocol"] for r in rows if r["phase"] == "coding"} == {"hollow_copy"}
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["calibration_sets"][0]["sha256"] == file_sha256(CALIBRATION_SET)
    assert any("gate reference: rater_b: ok" in line for line in lines)
    report, summary = report_of(path, result, tmp_path)
    assert "Calibration set (style): `data/calibration/style_continuity-v1.jsonl` sha256" in report
    assert "#### style: the rater gate" in report and "| rater vs reference codes |" in report
    assert "temperature" in report and gate["panel"][1]["identity"] in report
    assert summary["verdicts"]["P2"] != "not tested" and "This run could test 2 of 2 predictions" in report


CALIBRATION_CODES_BY_ID = {
    "cal:" + json.loads(line)["id"]: json.loads(line)["code"] for line in CALIBRATION_SET.read_text().splitlines()
}


@pytest.mark.parametrize(
    "disagree, distinct, why, brief",
    [
        # two raters who disagree on the calibration set
        (True, True, "is below the threshold 0.667", "alpha among the raters -"),
        # one rater twice
        (
            False,
            False,
            "the panel is not independent: rater_a and rater_b are one rater",
            "rater_a and rater_b are one",
        ),
    ],
    ids=["raters-disagree", "one-rater-twice"],
)
def test_the_gate_can_refuse_and_the_refusal_and_its_reason_reach_the_report(tmp_path, disagree, distinct, why, brief):
    path, out = write_study(tmp_path, calibration_set=True, distinct=distinct), tmp_path / "studies"
    lines: list[str] = []
    factory = raters(disagree)
    result = run_study(path, exploratory=True, out=out, display="none", rater_factory=factory, echo=lines.append)
    agreement = json.loads((result.run_dir / "ratings" / "style.agreement.json").read_text())
    assert agreement["refused"] is True and agreement["passes"] is False and why in agreement["reason"]
    assert agreement["coded_items"] == 0 and {r["phase"] for r in ratings_rows(result.run_dir)} == {"calibration"}
    assert any("CODING REFUSED" in line and why in line for line in lines)
    if not distinct:
        # they agree perfectly, with each other and with the codes: the gate refuses to count it all the same
        assert agreement["alpha"] == pytest.approx(1.0) and agreement["gate"]["same_identity"] == [
            ["rater_a", "rater_b"]
        ]
    report, summary = report_of(path, result, tmp_path)
    (p2,) = [p for p in summary["predictions"] if p["id"] == "P2"]
    assert (
        p2["verdict"] == "not tested" and "coding refused by the rater gate" in p2["reason"] and brief in p2["reason"]
    )
    assert summary["agreement"]["style"]["state"] == "refused"
    assert "| style | ordinal | **refused** |" in report and why in report
    assert "It could not test 1:" in report and "- P2 (style): coding refused by the rater gate" in report
    assert "Check independent: " + ("passes" if distinct else "**fails**") in report


def test_a_local_models_gguf_is_hashed_once_per_file_state(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"not really a model")
    cache = tmp_path / "cache.json"
    files = model_files([f"lca-local/{gguf}", "mockllm/model"], cache)
    assert files == {f"lca-local/{gguf}": file_sha256(gguf)}  # a hosted model is named by its string alone
    key = next(iter(json.loads(cache.read_text())))
    cache.write_text(json.dumps({key: "cached"}))
    assert cached_sha256(gguf, cache) == "cached"  # unchanged file: read from the cache
    gguf.write_bytes(b"another model, another size")
    assert cached_sha256(gguf, cache) == file_sha256(gguf)


def test_a_split_argument_picks_that_declared_dataset_and_an_unknown_split_is_refused(tmp_path, monkeypatch):
    from lca.errors import LCAError
    from protocols.evals.registry import REGISTRY
    from protocols.study.runner import choose_data
    from protocols.study.schema import ProtocolRun

    meta = REGISTRY.metadata("longmemeval")
    root = tmp_path / "data"
    (root / "longmemeval").mkdir(parents=True)
    for dataset in meta.datasets:
        (root / dataset.file).write_bytes(b"x")
    monkeypatch.setattr(data_paths, "data_roots", lambda explicit=None: [root])
    oracle = choose_data(ProtocolRun(name="longmemeval", args={"split": "oracle"}, requires_data=True), meta, None)
    assert oracle.path.name == "longmemeval_oracle.json.gz" and not oracle.fixture
    default = choose_data(ProtocolRun(name="longmemeval", requires_data=True), meta, None)
    assert default.path.name == "longmemeval_s_dev.json.xz"
    with pytest.raises(LCAError, match="split=m_full names no declared dataset longmemeval_m_full"):
        choose_data(ProtocolRun(name="longmemeval", args={"split": "m_full"}, requires_data=True), meta, None)


def test_shuffle_takes_one_seeded_slice_shared_by_every_condition(tmp_path, monkeypatch):
    from inspect_ai.log import read_eval_log

    import protocols.study.runner as runner

    prose = lambda role, model: FakeScriptedGenerator(lambda messages: "3")  # noqa: E731
    monkeypatch.setattr(runner, "default_rater_factory", lambda: prose)
    path, out = write_study(tmp_path), tmp_path / "studies"
    path.write_text(path.read_text().replace("    limit: 3", "    limit: 3\n    shuffle: true"), encoding="utf-8")
    result = run_study(path, out=out, display="none", exploratory=True, echo=lambda line: None)
    manifest = json.loads((result.run_dir / "run.json").read_text())
    (entry,) = manifest["protocols"]
    assert entry["sample_shuffle"] == 1  # the study's seed 0, plus one: inspect reads 0 as no shuffle
    ids = [
        [s.id for s in read_eval_log(str(f)).samples or []]
        for f in sorted((result.run_dir / "logs" / "hollow_copy").glob("*.eval"))
    ]
    scenarios = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    first_three = [f"{s['id']}:{p['id']}" for s in scenarios for p in s["probes"]][:3]
    assert len(ids) == 2 and sorted(ids[0]) == sorted(ids[1]) and len(ids[0]) == 3
    assert sorted(ids[0]) != sorted(first_three)  # a seeded slice, not the file's first items


def test_the_shipped_pilot_runs_end_to_end_on_the_fixtures_and_is_reported(tmp_path, monkeypatch):
    """The main job's study as shipped (its protocols, slices, measures and predictions), with scripted models
    and the fake embedder, on a machine without the benchmark files: every protocol runs, the fixtures stand in
    with a recorded deviation, and the report gives every prediction a verdict."""
    import shutil

    from protocols.report import load_run, write_report
    from protocols.study import lock_status

    pilot = REPO / "preregistration" / "hollow_copy_pilot.yaml"
    shutil.copy(pilot, tmp_path / pilot.name)
    shutil.copy(pilot.with_name(pilot.name + ".lock.json"), tmp_path / (pilot.name + ".lock.json"))
    path = tmp_path / pilot.name
    assert lock_status(path).state == "locked"
    monkeypatch.setattr(data_paths, "data_roots", lambda explicit=None: [tmp_path / "no-data"])
    same = lambda role, model: FakeScriptedGenerator(lambda messages: '{"rating": 3}')  # noqa: E731
    result = run_study(path, out=tmp_path / "studies", display="none", rater_factory=same, echo=lambda line: None)
    assert result.ok, [p.get("error") for p in result.manifest["protocols"]]
    protocols = {p["name"]: p for p in result.manifest["protocols"]}
    assert set(protocols) == {"hollow_copy", "locomo", "longmemeval"}
    assert {p["status"] for p in protocols.values()} == {"success"}
    assert all(t["samples"] >= 1 for p in protocols.values() for t in p["tasks"])
    missing = {d["what"].split(":")[0] for d in result.manifest["deviations"] if d["kind"] == "data_missing"}
    assert len(missing) == 2  # LoCoMo and LongMemEval ran their fixtures, and said so
    files = write_report(load_run(path, result.run_id, tmp_path / "studies"), tmp_path / "reports")
    verdicts = {o.id: o.verdict for o in files.analysis.predictions}
    assert set(verdicts) == {f"P{n}" for n in range(1, 10)}
    report = files.report.read_text()
    assert "plumbing-grade" in report and "data_missing" in report
