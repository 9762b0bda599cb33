"""``lca raters export`` from a study run's judged measure: the agent's answers in the run's logs, blinded under
the run's seed, the measure's scale, level, threshold and rubric in the key (the run fixture of tests/report)."""

from __future__ import annotations

import json

import protocols.cli as cli
from tests.report.conftest import STUDY_ID, make_run


def test_export_from_a_study_runs_judged_measure(tmp_path, capsys, hollow_copy_logs):
    make_run(tmp_path, hollow_copy_logs, run_id="20260101T000000")
    run_dir = tmp_path / "studies" / STUDY_ID / "20260101T000000"
    assert cli.main(["raters", "export", str(run_dir)]) == 0
    sheet, key = run_dir / "sheets" / "style.csv", run_dir / "sheets" / "style.key.json"
    record = json.loads(key.read_text())
    assert record["measure"] == "style" and record["level"] == "ordinal" and record["threshold"] == 0.667
    assert record["scale"] == [1, 2, 3, 4, 5] and record["prompt"] == "rate it" and record["seed"] == 0
    assert record["study_id"] == STUDY_ID and record["run_id"] == "20260101T000000"
    assert len(record["items"]) == 8  # 4 probes under 2 conditions
    assert {e["condition"] for e in record["items"].values()} == {"stateless", "full-lca"}
    for path in (sheet, sheet.with_suffix(".html")):
        text = path.read_text(encoding="utf-8")
        assert "stateless" not in text and "full-lca" not in text
    # by study id too, with the studies folder; the seed a flag away
    capsys.readouterr()
    argv = ["raters", "export", STUDY_ID, "--studies", str(tmp_path / "studies"), "--out", str(tmp_path / "o")]
    assert cli.main([*argv, "--seed", "4", "--measure", "style"]) == 0
    assert json.loads((tmp_path / "o" / "style.key.json").read_text())["seed"] == 4
    assert cli.main([*argv, "--measure", "needed_text"]) == 2
    assert "not a judged measure" in capsys.readouterr().err
    assert cli.main([*argv, "--scale", "1,2", "--force"]) == 2
    assert "the study's own" in capsys.readouterr().err
