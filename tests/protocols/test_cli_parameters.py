"""The ``lca`` command line without a model: help listings from the registries, the one parameter language
(``--param``, ``--params-file``, ``-T``, ``--role``, ``--weight``) and its one-line errors, and the store
commands' independence from the evaluation harness."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import protocols.cli as cli
from lca.params import ParameterError

REPO = Path(__file__).resolve().parents[2]


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_run_help_lists_every_protocol_and_condition(capsys):
    from conditions import available_conditions
    from protocols.evals import available_protocols

    out = help_text(capsys, "run")
    protocols_part, conditions_part = out.split("\nprotocols:\n", 1)[1].split("\nconditions:\n", 1)
    assert "continuity" in available_protocols() and "full-lca" in available_conditions()
    for name in available_protocols():
        assert f"\n  {name} " in "\n" + protocols_part
    for name in available_conditions():
        assert f"\n  {name} " in "\n" + conditions_part
    assert "--param NAME=VALUE" in out and "--params-file" in out


def test_run_with_an_unknown_protocol_lists_the_known_ones(capsys):
    from protocols.evals import available_protocols

    assert cli.main(["run", "hollow-copy-9", "--conditions", "stateless", "--model", "x/y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lca: error: unknown protocol 'hollow-copy-9'; known: ")
    assert all(name in err for name in available_protocols())


def test_bench_help_lists_every_registered_benchmark(capsys):
    from protocols.bench import available_benchmarks, benchmark

    out = help_text(capsys, "bench")
    assert available_benchmarks()
    for name in available_benchmarks():
        assert name in out
        assert " ".join(benchmark(name).help.replace("%%", "%").split()[:3]) in " ".join(out.split())


def test_an_unknown_param_exits_2_naming_it_without_a_traceback():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "protocols.cli",
            "run",
            "continuity",
            "--conditions",
            "full-lca",
            "--model",
            "x/y",
            "--param",
            "gravity_well=1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "lca: error: --param 'gravity_well=1': condition 'full-lca' has no parameter 'gravity_well'"
    )
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--param", "weights.gravity=1"], "--param 'weights.gravity=1': unknown weight 'gravity'"),
        (["--param", "weights.experience=lots"], "--param 'weights.experience=lots': takes a number, not 'lots'"),
        (["--param", "weights.experience=-1"], "--param 'weights.experience=-1': field 'experience': weight must"),
        (["--param", "budget_tokens=many"], "--param 'budget_tokens=many': takes an integer, not 'many'"),
        (["--param", "policy.fast=1"], "only 'weights' takes dotted names"),
        (["--param", "policy"], "--param 'policy': expected NAME=VALUE"),
        (["--param", "policy=adaptive", "--param", "policy=none"], "'policy' is given twice"),
        (["-T", "params=gravity=1"], "-T params 'gravity=1': condition 'full-lca' has no parameter 'gravity'"),
        (["-T", "seed=soon"], "-T 'seed=soon': takes an integer, not 'soon'"),
        (["-T", "condition=stateless"], "-T 'condition=stateless': unknown name 'condition'"),
        (
            ["--role", "judge=x/y"],
            "--role 'judge=x/y': unknown name 'judge'; known: grader, migrated, reviewer, summarizer",
        ),
    ],
)
def test_run_refuses_bad_parameters_in_one_line_before_anything_loads(argv, expected, capsys, tmp_path):
    log_dir = tmp_path / "logs"
    assert (
        cli.main(["run", "continuity", "--conditions", "full-lca", "--model", "x/y", "--log-dir", str(log_dir), *argv])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("lca: error: ") and expected in err and len(err.strip().splitlines()) == 1
    assert not log_dir.exists()


def test_a_param_is_checked_against_every_listed_condition(capsys):
    assert (
        cli.main(
            ["run", "continuity", "--conditions", "full-lca,stateless", "--model", "x/y", "--param", "policy=adaptive"]
        )
        == 2
    )
    assert "condition 'stateless' has no parameter 'policy'; it takes: budget_tokens" in capsys.readouterr().err


def test_params_file_with_nested_weights_reaches_the_conditions_parameters(tmp_path):
    from protocols.cli.run import build_tasks
    from protocols.evals import protocol_task

    params = tmp_path / "ablation.yaml"
    params.write_text(
        "policy: adaptive\nbudget_tokens: 800\nverify: false\nweights:\n  experience: 0\n  temporal: 0.5\n"
    )
    (task,) = build_tasks(
        protocol_task("continuity"),
        ["full-lca"],
        params_file=str(params),
        params=["weights.temporal=0", "budget_tokens=900"],
    )
    resolved = task.metadata["condition_params"]
    assert resolved["policy"] == "adaptive" and resolved["verify"] == 0
    assert resolved["budget_tokens"] == 900  # --param overrides the file
    assert resolved["weights"] == "experience=0.0,temporal=0.0"  # dotted --param beats the file's weight


def test_params_file_errors_name_the_file(tmp_path, capsys):
    params = tmp_path / "bad.yaml"
    params.write_text("weights:\n  gravity: 1\n")
    assert (
        cli.main(["run", "continuity", "--conditions", "full-lca", "--model", "x/y", "--params-file", str(params)]) == 2
    )
    assert f"--params-file {params} 'weights.gravity=1': unknown weight 'gravity'" in capsys.readouterr().err
    params.write_text("- policy: adaptive\n")
    assert (
        cli.main(["run", "continuity", "--conditions", "full-lca", "--model", "x/y", "--params-file", str(params)]) == 2
    )
    assert "bad.yaml" in capsys.readouterr().err


def test_the_older_task_parameter_string_still_reaches_the_condition():
    from protocols.cli.run import build_tasks
    from protocols.evals import protocol_task

    (task,) = build_tasks(
        protocol_task("continuity"),
        ["full-lca"],
        task_args=["params=weights=experience=0,temporal=0;policy=adaptive", "seed=3"],
    )
    assert task.metadata["condition_params"]["weights"] == "experience=0.0,temporal=0.0"
    assert task.metadata["condition_params"]["policy"] == "adaptive"
    assert task.metadata["seed"] == 3


def test_harness_parse_params_types_through_the_parameter_language():
    from protocols.harness.solvers import parse_params

    assert parse_params("full-lca", "budget_tokens=800; floor=0.3;weights=experience=0,temporal=0") == {
        "budget_tokens": 800,
        "floor": 0.3,
        "weights": "experience=0,temporal=0",
    }
    assert parse_params("stateless", "") == {}
    with pytest.raises(ParameterError, match=r"condition 'stateless' parameter 'policy=x': unknown name 'policy'"):
        parse_params("stateless", "policy=x")
    with pytest.raises(ParameterError, match=r"takes a number, not 'high'"):
        parse_params("full-lca", "floor=high")


def recall_args(**overrides) -> argparse.Namespace:
    values = dict(config=None, weight=None, budget=None, policy=None, floor=None, floor_mode=None, pool=None)
    return argparse.Namespace(**{**values, **overrides})


def test_recall_weights_parse_through_the_parameter_language():
    from protocols.cli.store import recall_config

    config = recall_config(recall_args(weight=["temporal=0", "risk=2"], budget=600))
    assert config.weights.temporal == 0.0 and config.weights.risk == 2.0 and config.token_budget == 600
    with pytest.raises(ParameterError, match=r"--weight 'gravity=1': unknown name 'gravity'; known: "):
        recall_config(recall_args(weight=["gravity=1"]))
    with pytest.raises(ParameterError, match=r"--weight 'temporal=warm': takes a number"):
        recall_config(recall_args(weight=["temporal=warm"]))


def test_store_commands_import_neither_the_harness_nor_inspect():
    code = (
        "import sys\n"
        "from protocols.cli import build_parser\n"
        "from protocols.cli.governance import _generator\n"
        "build_parser().parse_args(['checkpoint', '--model', 'lca-local/smollm2'])\n"
        "generator = _generator('lca-local/smollm2', threads=1, seed=0, timeout=None, role='summarizer')\n"
        "assert type(generator).__name__ == 'LlamaCppGenerator', generator\n"
        # the harness's planning and substrate-level replay are plain Python; its tasks, solvers and scorers load inspect
        "loaded = sorted(m for m in sys.modules if m.startswith(('protocols.harness.tasks', 'protocols.harness.solvers', "
        "'protocols.harness.scorers', 'inspect_ai')))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_model_strings_name_the_local_runtime_or_inspect(tmp_path):
    from protocols.providers.models import is_local, local_generator

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    assert is_local("smollm2") and is_local(str(gguf)) and is_local("lca-local/smollm2")
    assert not is_local("openai/gpt-4o-mini") and not is_local("mockllm/model")
    assert Path(local_generator(f"lca-local/{gguf}").model_path) == gguf.resolve()
    assert Path(local_generator(str(gguf)).model_path) == gguf


def test_the_recall_commands_floor_modes_are_the_recallers():
    from lca.recall.floor import FLOOR_MODES
    from protocols.cli import build_parser

    recall = build_parser()._subparsers._group_actions[0].choices["recall"]  # type: ignore[union-attr]
    (floor_mode,) = [a for a in recall._actions if a.dest == "floor_mode"]
    assert list(floor_mode.choices) == list(FLOOR_MODES)


def test_a_command_reads_the_code_revision_as_it_starts_so_a_later_commit_does_not_relabel_its_record(
    tmp_path, monkeypatch
):
    import lca.provenance as provenance

    head = {"version": "0.1.0+gaaaaaaaaaaaa"}
    monkeypatch.setattr(provenance, "checkout_version", lambda repo: head["version"])
    provenance.code_version.cache_clear()
    try:
        assert cli.main(["health", "--store", str(tmp_path / "no-store")]) == 2  # refused: holds no store
        head["version"] = "0.1.0+gbbbbbbbbbbbb"  # a commit lands while the command's record is being written
        assert provenance.code_version() == "0.1.0+gaaaaaaaaaaaa"
    finally:
        provenance.code_version.cache_clear()
