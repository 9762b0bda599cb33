"""`lca bench redaction` on the shipped LoCoMo and LongMemEval fixtures: every turn scanned (each distinct text
once), findings counted by kind, each row naming its turn with the turn around it redacted (never the value),
``--baseline`` marking findings same, changed, new or gone; a missing file is one line and exit 2."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from protocols.bench import benchmark
from protocols.bench import redaction as bench
from protocols.evals.benchmark import BenchmarkResult

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "data" / "fixtures"
KEY = "sk_live_" + "".join(random.Random(5).choice(string.ascii_letters + string.digits) for _ in range(24))


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """The fixtures with a Stripe key in one LoCoMo turn and a password in one LongMemEval turn (twice: two
    questions share the session, so the text is scanned once)."""
    locomo = json.loads((FIXTURES / "locomo_fixture.json").read_text(encoding="utf-8"))
    conversation = locomo[0]["conversation"]
    first = next(k for k in conversation if k.startswith("session_") and isinstance(conversation[k], list))
    conversation[first][0]["text"] += f" my key is {KEY} by the way"
    lme = json.loads((FIXTURES / "longmemeval_fixture.json").read_text(encoding="utf-8"))
    for record in lme[:2]:
        record["haystack_sessions"][0][0]["content"] = "the wifi password: Tr0ub4dor&3 for guests"
        record["haystack_session_ids"][0] = "shared-session"
    paths = tmp_path / "locomo.json", tmp_path / "lme.json"
    for path, data in zip(paths, (locomo, lme)):
        path.write_text(json.dumps(data), encoding="utf-8")
    return paths


def _run(*argv: str) -> int:
    command = benchmark("redaction")
    return command.run(command.parser().parse_args(list(argv)))


def test_findings_are_counted_by_kind_and_rows_hold_the_redacted_turn_not_the_value(tmp_path, capsys):
    locomo, lme = _planted(tmp_path)
    out = tmp_path / "redaction.json"
    assert _run("--locomo", str(locomo), "--longmemeval", str(lme), "--out", str(out)) == 0
    result = BenchmarkResult.read(out)
    assert result.metrics["locomo"]["by_kind"] == {"stripe-key": 1}
    lme_figures = result.metrics["longmemeval"]
    assert lme_figures["by_kind"] == {"password": 1} and lme_figures["turns_with_findings"] == 1
    assert lme_figures["turns"] > lme_figures["distinct_turns"]
    text = out.read_text(encoding="utf-8")
    assert KEY not in text and "Tr0ub4dor&3" not in text
    row = next(r for r in result.rows if r["dataset"] == "longmemeval")
    assert row["turn"] == "shared-session:0" and row["length"] == len("Tr0ub4dor&3")
    assert row["context"] == "the wifi password: [REDACTED:password] for guests"
    assert "stripe-key" in capsys.readouterr().out


def test_a_baseline_marks_findings_same_new_changed_and_gone(tmp_path):
    locomo, lme = _planted(tmp_path)
    before = tmp_path / "before.json"
    assert _run("--locomo", str(locomo), "--longmemeval", str(lme), "--out", str(before)) == 0
    rows = [dict(r) for r in BenchmarkResult.read(before).rows]
    gone = {**rows[0], "turn": "elsewhere:1"}
    changed = next(r for r in rows if r["dataset"] == "longmemeval")
    changed["length"] += 1
    record = json.loads(before.read_text(encoding="utf-8"))
    record["rows"] = [r for r in rows if r is not changed and r["dataset"] != "locomo"] + [changed, gone]
    before.write_text(json.dumps(record), encoding="utf-8")
    after = tmp_path / "after.json"
    argv = ["--locomo", str(locomo), "--longmemeval", str(lme), "--baseline", str(before), "--out", str(after)]
    assert _run(*argv) == 0
    result = BenchmarkResult.read(after)
    assert result.metrics["versus_baseline"] == {"same": 0, "changed": 1, "new": 1, "gone": 1}
    assert sorted(r["status"] for r in result.rows) == ["changed", "gone", "new"]


def test_turn_readers_skip_what_is_not_a_turn():
    assert list(bench.locomo_turns([{"sample_id": "s", "conversation": {"session_1": [{"text": 3}, "x"]}}])) == []
    records = [{"question_id": "q", "haystack_sessions": [[{"content": "hi"}, {"role": "user"}]]}]
    assert list(bench.longmemeval_turns(records)) == [("q#0:0", "hi")]
    assert list(bench.longmemeval_turns({"not": "a list"})) == []


def test_a_missing_file_or_baseline_is_one_line_and_exit_2(tmp_path, capsys):
    assert _run("--locomo", str(tmp_path / "nope.json"), "--only", "locomo", "--out", str(tmp_path / "o.json")) == 2
    assert capsys.readouterr().err.count("\n") == 1
    locomo, _ = _planted(tmp_path)
    argv = ["--locomo", str(locomo), "--only", "locomo", "--baseline", str(tmp_path / "none.json")]
    assert _run(*argv, "--out", str(tmp_path / "o.json")) == 2
    assert "--baseline" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
