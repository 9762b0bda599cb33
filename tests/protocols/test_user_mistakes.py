"""Issue 16, user mistakes and benchmark ergonomics: each mistake is one line on stderr naming what is wrong,
exit 2, before anything loads, and nothing is created or lost by accident. Every bad input is made here."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import protocols.cli as cli
import protocols.cli.common as cli_common
from lca.layout import StoreLayout
from lca.recall import RecallConfig
from lca.substrate import Substrate
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
LOCOMO_FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("lca: error: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "[bold]" not in err
    return err.strip()


# ---- a path that holds no store ----------------------------------------------------------------------
READING = [
    ["search", "x"],
    ["recall", "x"],
    ["health"],
    ["ledger"],
    ["proposals"],
    ["approve", "p-1", "--approver", "dana"],
    ["calibrate-floor"],
    ["reindex"],
    ["identity", "show"],
    ["audit", "prevented", "--sample", "1"],
]


@pytest.mark.parametrize("argv", READING, ids=lambda argv: argv[0] if argv[0] != "audit" else "audit")
def test_a_reading_command_refuses_a_path_without_a_store_and_creates_nothing(argv, tmp_path, capsys):
    typo = tmp_path / "typo" / "store"
    assert cli.main([*argv, "--store", str(typo)]) == 2
    err = one_line_error(capsys)
    assert f"no store at {typo} (from --store)" in err and "`lca ingest` creates a store" in err
    assert not typo.exists() and not typo.parent.exists()


def test_the_store_path_from_the_environment_is_named_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LCA_HOME", str(tmp_path / "nowhere"))
    assert cli.main(["health"]) == 2
    assert f"no store at {tmp_path / 'nowhere'} (from $LCA_HOME)" in one_line_error(capsys)
    assert not (tmp_path / "nowhere").exists()


def test_a_folder_with_settings_alone_is_not_a_store_and_a_file_is_not_a_folder(tmp_path, capsys):
    (tmp_path / "recall.yaml").write_text("floor: 0.1\n")
    assert cli.main(["search", "x", "--store", str(tmp_path)]) == 2
    assert "no store at" in one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recall.yaml"]
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store")
    for argv in (["health"], ["schema", "propose", "s"]):
        assert cli.main([*argv, "--store", str(a_file)]) == 2
        assert f"store path {a_file} (from --store) is not a folder" in one_line_error(capsys)
    assert a_file.read_text() == "not a store"


def test_a_writing_command_creates_the_store_and_says_so(tmp_path, capsys):
    home = tmp_path / "new-store"
    assert cli.main(["schema", "propose", "incident-rule", "--description", "a -> b", "--store", str(home)]) == 0
    assert capsys.readouterr().err == f"lca: created a new store at {home}\n"
    assert StoreLayout(home).holds_store()
    assert cli.main(["ledger", "--store", str(home)]) == 0  # now it holds one: reading commands read it
    assert "incident-rule" in capsys.readouterr().out
    assert cli.main(["schema", "trial", "incident-rule", "--approver", "dana", "--store", str(home)]) == 0
    assert "created" not in capsys.readouterr().err  # said once, when it was created

    text = tmp_path / "user.md"
    text.write_text("Prefers short answers.\n")
    other = tmp_path / "other-store"
    assert cli.main(["identity", "show", "--store", str(other)]) == 2  # show reads
    assert not other.exists()
    capsys.readouterr()
    assert cli.main(["identity", "set", "user", "--file", str(text), "--store", str(other)]) == 0  # set writes
    assert capsys.readouterr().err == f"lca: created a new store at {other}\n"
    assert cli.main(["identity", "show", "user", "--store", str(other)]) == 0


def test_search_on_a_mistyped_store_fails_fast_in_a_fresh_process(tmp_path):
    typo = tmp_path / "typo"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(
        [sys.executable, "-m", "protocols.cli", "search", "x", "--store", str(typo)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"lca: error: no store at {typo}") and len(result.stderr.splitlines()) == 1
    assert not typo.exists()


# ---- counts below one ----------------------------------------------------------------------------------
@pytest.mark.parametrize("k", ["-3", "0"])
def test_search_refuses_k_below_one(k, tmp_path, capsys):
    home = tmp_path / "store"
    assert cli.main(["search", "x", "-k", k, "--store", str(home)]) == 2
    assert one_line_error(capsys) == f"lca: error: -k must be at least 1, not {k}"
    assert not home.exists()


# ---- stored control and bidi characters on the terminal ---------------------------------------------------
HOSTILE = "deploy \x1b[31mred\x1b[0m key \u202eevil\u202c tag\U000e0041 bell\x07 done"


@pytest.fixture
def hostile_store(tmp_path, monkeypatch):
    home = tmp_path / "home"

    def open_store(args, progress=False):
        return Substrate(home, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0))

    monkeypatch.setattr(cli_common, "open_store", open_store)
    with open_store(None) as store:
        store.append([make_entry("s\u202e1", 1, HOSTILE)])
    return home


def test_terminal_safe_escapes_controls_and_bidi_but_keeps_text_newlines_and_joiners():
    safe = cli_common.terminal_safe(HOSTILE + "\nnext\tline \U0001f469\u200d\U0001f4bb \u00e9")
    assert safe == (
        "deploy \\x1b[31mred\\x1b[0m key \\u202eevil\\u202c tag\\U000e0041 bell\\x07 done"
        "\nnext\tline \U0001f469\u200d\U0001f4bb \u00e9"
    )


RECALL_ALL = ["--explain", "--floor", "0", "--floor-mode", "absolute"]


@pytest.mark.parametrize("argv", [["search", "deploy red key"], ["recall", "deploy red key", *RECALL_ALL]])
def test_stored_control_characters_are_shown_escaped_and_kept_in_the_transcript(argv, hostile_store, capsys):
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "\\x1b[31mred" in out and "\\u202eevil" in out and "\\U000e0041" in out and "\\x07" in out
    assert not any(ch in out for ch in "\x1b\u202e\u202c\x07\U000e0041")
    assert "s\\u202e1" in out  # the session id (a pointer) is shown escaped too
    (session_file,) = StoreLayout(hostile_store).sessions.iterdir()
    stored = [json.loads(line) for line in session_file.read_text(encoding="utf-8").splitlines()]
    assert stored[0]["content"] == HOSTILE  # the transcript stays verbatim


def test_health_shows_stored_names_escaped(hostile_store, capsys):
    memory = StoreLayout(hostile_store).memory
    memory.mkdir()
    (memory / "bad\u202ename.md").write_text("---\nid: x\n---\n")
    cli.main(["health"])
    out = capsys.readouterr().out
    assert "\u202e" not in out and "bad\\u202ename.md" in out


# ---- lca recall --explain: the cosine the floor reads -------------------------------------------------------
def test_recall_explain_shows_the_cosine_the_floor_is_applied_to(hostile_store, capsys):
    argv = ["recall", "deploy red key", "--floor", "0.2", "--floor-mode", "absolute"]
    assert cli.main([*argv, "--json"]) == 0
    (candidate,) = json.loads(capsys.readouterr().out)["candidates"]
    assert cli.main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "the floor is held against each candidate's raw cosine (the 'cosine' column)" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("rank"))
    assert header.split()[:4] == ["rank", "score", "simil", "cosine"]
    lines = out.splitlines()
    row = lines[lines.index(header) + 1]  # the first candidate's row
    assert float(row.split()[3]) == pytest.approx(candidate["cosine"], abs=5e-4)


# ---- lca run: task arguments, condition parameters, models, limits --------------------------------------------
@pytest.fixture
def nothing_loads(monkeypatch):
    """Fail the test if a run gets as far as a model, an embedder, a task or a dataset."""
    import lca.index.embedders as embedders

    continuity = importlib.import_module("protocols.evals.continuity.continuity")  # the package exports the task
    import protocols.harness.solvers as solvers
    import protocols.providers.models as models

    def refuse(what):
        def loaded(*args, **kwargs):
            raise AssertionError(f"{what} loaded before the arguments were checked")

        return loaded

    monkeypatch.setattr(models, "resolve_model", refuse("a model"))
    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", refuse("the embedder"))
    monkeypatch.setattr(solvers, "shared_embedder", refuse("the shared embedder"))
    monkeypatch.setattr(continuity, "condition_task", refuse("a task"))
    monkeypatch.setattr(continuity, "continuity_samples", refuse("the dataset"))


def run_argv(tmp_path, *extra: str, conditions: str = "full-lca") -> list[str]:
    return [
        "run",
        "continuity",
        "--conditions",
        conditions,
        "--model",
        "x/y",
        "--log-dir",
        str(tmp_path / "logs"),
        *extra,
    ]


@pytest.mark.parametrize(
    "extra, conditions, expected",
    [
        (
            ["-T", "param=x"],
            "full-lca",
            "-T 'param=x': unknown name 'param'; known: max_tokens, params, scenarios, seed",
        ),
        (
            ["-T", "params=weights=experiance=0"],
            "full-lca",
            "-T params 'weights=experiance=0': unknown name 'experiance'; known: activation, authority",
        ),
        ([], "full-lca[weights.experiance=0]", "'weights.experiance=0': unknown weight 'experiance'"),
        ([], "full-lca,stateless[policy=adaptive]", "condition 'stateless' has no parameter 'policy'"),
        (
            ["--param", "policy=adaptive"],
            "full-lca,stateless",
            "condition 'stateless' has no parameter 'policy'; it takes: budget_tokens; to give it to some "
            "conditions only, write e.g. 'full-lca[policy=adaptive]'",
        ),
        ([], "full-lca[floor=high]", "condition 'full-lca[floor=high]' 'floor=high': takes a number, not 'high'"),
        ([], "full-lca[floor]", "'floor': expected NAME=VALUE"),
        ([], "full-lca[temporal=0]", "no parameter 'temporal'; it takes: budget_tokens, policy, weights"),
        ([], "full-lca[temporal=0]", "a resonance weight is set as weights.temporal=VALUE"),
        ([], "full-lca[policy=bogus]", "condition 'full-lca[policy=bogus]': field 'policy': unknown policy 'bogus'"),
        (["--param", "budget_tokens=-5"], "full-lca", "condition 'full-lca': field 'token_budget'"),
        ([], "full-lca[floor=0.1", "expected NAME[PARAM=VALUE,...]"),
        ([], "full-lca[floor=0.1,floor=0.2]", "'floor' is given twice"),
        ([], "full-lca,full-lca", "--conditions lists 'full-lca' twice: give a variant its own parameters"),
        ([], "telepathy[floor=1]", "unknown condition 'telepathy'; known: "),
        (["--limit", "0"], "full-lca", "--limit must be at least 1, not 0"),
        (["--limit", "-2"], "full-lca", "--limit must be at least 1, not -2"),
    ],
)
def test_lca_run_refuses_a_mistake_in_one_line_before_anything_loads(
    extra, conditions, expected, tmp_path, capsys, nothing_loads
):
    assert cli.main(run_argv(tmp_path, *extra, conditions=conditions)) == 2
    assert expected in one_line_error(capsys)
    assert not (tmp_path / "logs").exists()


def test_a_hosted_model_without_its_provider_package_names_the_package(tmp_path, capsys, monkeypatch):
    pytest.importorskip("inspect_ai")
    # the test extra installs openai (the hosted-path test needs it): hide it, as on a machine without it
    monkeypatch.setitem(sys.modules, "openai", None)
    argv = ["run", "continuity", "--conditions", "full-lca", "--model", "openai/gpt-4o-mini"]
    assert cli.main([*argv, "--log-dir", str(tmp_path / "logs")]) == 2
    err = one_line_error(capsys)
    assert "model 'openai/gpt-4o-mini' needs the Python package(s) openai, which is not installed" in err
    assert err.endswith("pip install openai")
    from lca.errors import LCAError
    from protocols.providers.models import text_generator

    with pytest.raises(LCAError, match=r"needs the Python package\(s\) openai"):  # lca checkpoint's path too
        text_generator("openai/gpt-4o-mini", role="summarizer")


def test_provider_messages_lose_their_markup():
    from inspect_ai._util.error import PrerequisiteError

    from protocols.providers.models import provider_message

    exc = PrerequisiteError(
        "[bold]ERROR[/bold]: Foo requires optional dependencies. Install with:\n\n[bold]pip install foo[/bold]"
    )
    assert provider_message(exc) == "Foo requires optional dependencies. Install with: pip install foo"
    assert provider_message(ValueError("plain [text] stays")) == "plain [text] stays"


def test_run_help_lists_the_protocols_the_conditions_and_the_variant_form(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert "\nprotocols:\n" in out and "\n  continuity " in out and "\nconditions:\n" in out and "  full-lca " in out
    assert "full-lca[weights.temporal=0]" in out


# ---- condition variants: a baseline and its ablation in one eval set ----------------------------------------------
def test_each_condition_of_a_run_has_its_own_name_and_parameters():
    from protocols.cli.run import build_tasks
    from protocols.evals import protocol_task

    baseline, ablation, adaptive = build_tasks(
        protocol_task("continuity"),
        ["full-lca", "full-lca[weights.temporal=0]", "full-lca[policy=none; weights=experience=0]"],
        params=["policy=adaptive", "weights.temporal=0.5"],
    )
    assert [t.name for t in (baseline, ablation, adaptive)] == [
        "continuity-full-lca",
        "continuity-full-lca[weights.temporal=0]",
        "continuity-full-lca[policy=none,weights=experience=0]",
    ]
    meta = [t.metadata for t in (baseline, ablation, adaptive)]
    assert {m["condition"] for m in meta} == {"full-lca"}
    assert [m["condition_label"] for m in meta] == [
        t.name.removeprefix("continuity-") for t in (baseline, ablation, adaptive)
    ]
    assert (
        meta[0]["condition_params"]["weights"] == "temporal=0.5" and meta[0]["condition_params"]["policy"] == "adaptive"
    )
    assert (
        meta[1]["condition_params"]["weights"] == "temporal=0.0" and meta[1]["condition_params"]["policy"] == "adaptive"
    )
    assert meta[2]["condition_params"]["weights"] == "experience=0.0"  # a bracketed weights string replaces the run's
    assert meta[2]["condition_params"]["policy"] == "none"


def test_a_variant_label_is_a_task_argument_inspect_eval_understands_alone():
    from protocols.evals.continuity.continuity import continuity

    task = continuity(condition="transcript-recall[floor=0.25]", params="k=3")
    assert task.name == "continuity-transcript-recall[floor=0.25]"
    assert task.metadata["condition_params"]["floor"] == 0.25 and task.metadata["condition_params"]["k"] == 3


def test_a_baseline_and_its_variant_run_as_one_eval_set(tmp_path, capsys, monkeypatch):
    import inspect_ai

    import protocols.harness.solvers as solvers
    from tests.protocols.test_harness import fake_agent

    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    real_eval_set = inspect_ai.eval_set  # the run as lca run makes it, its agent scripted so nothing is downloaded
    monkeypatch.setattr(
        inspect_ai, "eval_set", lambda tasks, **kw: real_eval_set(tasks, **{**kw, "model": fake_agent()})
    )
    log_dir = tmp_path / "logs"
    argv = ["run", "continuity", "--conditions", "stateless,stateless[budget_tokens=600]", "--model", "mockllm/model"]
    assert cli.main([*argv, "--limit", "1", "--display", "none", "--log-dir", str(log_dir)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True
    by_condition = {task["condition"]: task for task in summary["tasks"]}
    assert set(by_condition) == {"stateless", "stateless[budget_tokens=600]"}
    assert by_condition["stateless[budget_tokens=600]"]["condition_params"] == {"budget_tokens": 600}
    assert by_condition["stateless"]["condition_params"] == {"budget_tokens": 1200}
    assert all(task["status"] == "success" and task["samples"] == 1 for task in summary["tasks"])


# ---- lca bench retrieval: questions counted, finished work kept -------------------------------------------------
def locomo_file(tmp_path: Path, conversations: int = 2) -> Path:
    record = json.loads(LOCOMO_FIXTURE.read_text())[0]
    records = [dict(record, sample_id=f"conv-{n}") for n in range(conversations)]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(records))
    return path


def test_the_retrieval_progress_counts_questions_not_conversations(tmp_path):
    from lca.retrieval import RetrievalConfig
    from protocols.bench.retrieval.config import AskedConfig
    from protocols.bench.retrieval.runners import run_dataset

    path = locomo_file(tmp_path)
    seen: list[int] = []

    def progress(questions):
        questions = list(questions)
        seen.append(len(questions))
        return questions

    checkpoints = []
    report = run_dataset(
        "locomo",
        path,
        "hybrid",
        embedder=FakeHashingEmbedder(max_input_tokens=200),
        limit=None,
        progress=progress,
        workdir=tmp_path / "work",
        configs={"default": AskedConfig(RetrievalConfig())},
        checkpoint=lambda snapshot, done, total: checkpoints.append((snapshot, done, total)),
    )["default"]
    questions = sum(len(r["qa"]) for r in json.loads(path.read_text()))
    assert seen == [questions] and questions > 2
    assert [(done, total) for _, done, total in checkpoints] == [(1, 2), (2, 2)]
    first = checkpoints[0][0]()["default"]  # built later, still over the first conversation's rows alone
    assert {row["sample_id"] for row in first["per_item"]} == {"conv-0"}
    assert first["items"] * 2 == report["items"]
    assert {row["question_id"].split(":")[0] for row in report["per_item"]} == {"conv-0", "conv-1"}
    assert all(row["question"] and row["retrieved"] for row in report["per_item"])


def fake_model(monkeypatch) -> None:
    import lca.index.embedders as embedders

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(max_input_tokens=200))


def test_an_interrupted_ablation_keeps_the_conversations_that_finished(tmp_path, monkeypatch, capsys):
    import protocols.bench.retrieval.runners as runners
    import protocols.bench.retrieval_bench as retrieval_bench
    from protocols.evals.benchmark import BenchmarkResult

    fake_model(monkeypatch)
    monkeypatch.setattr(retrieval_bench, "CHECKPOINT_SECONDS", 0.0)
    built = []
    original = runners.HaystackStore

    class InterruptedOnTheSecondStore(runners.HaystackStore):
        def __init__(self, *args, **kwargs):
            built.append(1)
            if len(built) == 2:
                raise KeyboardInterrupt
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(runners, "HaystackStore", InterruptedOnTheSecondStore)
    out = tmp_path / "bench" / "locomo-hybrid"  # no .json: it gets one, as the ablation's does
    argv = ["bench", "retrieval", "--dataset", "locomo", "--data", str(locomo_file(tmp_path)), "--quiet"]
    argv += ["--cache", str(tmp_path / "cache"), "--out", str(out), "--ablate"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    run_partial, ablation_partial = (
        out.with_name("locomo-hybrid.partial.json"),
        out.with_name("locomo-hybrid-ablation.partial.json"),
    )
    assert f"interrupted after 1 of 2 stores; what finished is in {run_partial}, {ablation_partial}" in err
    assert "note: replaced" not in err  # its own checkpoint, rewritten on the interruption, is not news
    run = BenchmarkResult.read(run_partial)
    assert run.config["partial"] == {"stores_done": 1, "stores": 2}
    assert run.rows and {row["sample_id"] for row in run.rows} == {"conv-0"}
    ablation = BenchmarkResult.read(ablation_partial)
    assert ablation.config["partial"] == {"stores_done": 1, "stores": 2} and ablation.metrics["variants"]
    assert not out.with_name("locomo-hybrid.json").exists()

    monkeypatch.setattr(runners, "HaystackStore", original)
    assert cli.main(argv) == 0  # a finished run: its records, and the partial files are gone
    err = capsys.readouterr().err
    assert "note: replaced" in err and "partial.json" in err  # the earlier run's checkpoints, replaced aloud
    final = BenchmarkResult.read(out.with_name("locomo-hybrid.json"))
    assert "partial" not in final.config and {row["sample_id"] for row in final.rows} == {"conv-0", "conv-1"}
    assert BenchmarkResult.read(out.with_name("locomo-hybrid-ablation.json")).metrics["variants"]
    assert not run_partial.exists() and not ablation_partial.exists()
    assert cli.main(argv) == 0  # a rerun replaces the finished records, and says so
    assert f"note: replaced {out.with_name('locomo-hybrid.json')}" in capsys.readouterr().err


def test_bench_retrieval_refuses_a_limit_below_one(tmp_path, capsys):
    argv = ["bench", "retrieval", "--dataset", "locomo", "--data", str(LOCOMO_FIXTURE), "--limit", "0"]
    assert cli.main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    assert "--limit must be at least 1, not 0" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
