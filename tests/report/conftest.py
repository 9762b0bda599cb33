"""A study run directory built from real task logs: hollow_copy on the project fixture under two conditions, run
by inspect's eval with a scripted mockllm agent and the fake embedder (fast), laid out as the study runner lays
it out (run.json, logs/<protocol>/, ratings/), with a hand-written manifest and ratings."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from protocols.study.lock import file_sha256

STUDY_ID = "tiny_study"
CONDITIONS = ("stateless", "full-lca")
GGUF_SHA = "ab" * 32
STUDY_YAML = """\
schema_version: 1
id: tiny_study
title: Tiny study for the report tests
version: "0.0.1"
authors: [tests]
hypotheses:
  - {id: H1, statement: full-lca puts the evidence in front of the agent}
  - {id: H2, statement: the conditions hedge alike}
conditions: [stateless, full-lca]
models:
  agent: lca-local/smollm2
  roles: {rater_a: lca-local/smollm2, rater_b: lca-local/smollm2}
protocols:
  - {name: hollow_copy, args: {scenarios: data/fixtures/continuity-v2-fixture.jsonl}, limit: 4}
measures:
  - {id: needed_text, protocol: hollow_copy, kind: computed, scorer: continuity_context, metric: needed_text,
     computation: required mentions in the injected text, scale: binary}
  - {id: false_hedge, protocol: hollow_copy, kind: computed, scorer: continuity_behaviour, metric: false_hedge,
     computation: the answer hedges, scale: binary, direction: lower}
  - {id: tokens, protocol: hollow_copy, kind: computed, scorer: substrate, metric: injected_tokens,
     computation: injected tokens, scale: count}
  - {id: style, protocol: hollow_copy, kind: judged, level: ordinal, scale: [1, 2, 3, 4, 5],
     rater_panel: {raters: [rater_a, rater_b], prompt: rate it}, agreement_threshold: 0.667, calibration_items: 4}
predictions:
  - {id: P1, hypothesis: H1, measure: needed_text, kind: superiority, better: full-lca, than: stateless,
     min_effect: 0.1}
  - {id: P2, hypothesis: H2, measure: false_hedge, kind: equivalence, conditions: [stateless, full-lca], margin: 0.2}
  - {id: P3, hypothesis: H1, measure: style, kind: superiority, better: full-lca, than: stateless, min_effect: 0.5,
     role: secondary}
sample_size: {unit: probe, n_per_condition: 4, reasoning: a test,
              power: {test: mcnemar, alpha: 0.05, power: 0.8, effect: 0.2}}
analysis: {model: mixed, groups: [scenario], bootstrap: {resamples: 200, seed: 0}, rules: [a rule in words]}
exclusions: [errored samples are excluded]
seeds: [0]
"""


@pytest.fixture(scope="session")
def hollow_copy_logs(tmp_path_factory) -> Path:
    """The .eval logs of hollow_copy on the fixture (4 probes) under stateless and full-lca."""
    from inspect_ai import eval as inspect_eval

    import protocols.harness.solvers as solvers
    from protocols.evals.hollow_copy.hollow_copy import hollow_copy
    from tests.fakes import FakeHashingEmbedder
    from tests.protocols.test_hollow_copy import FIXTURE, scripted_agent

    folder = tmp_path_factory.mktemp("logs") / "hollow_copy"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
        tasks = [hollow_copy(scenarios=str(FIXTURE), condition=c) for c in CONDITIONS]
        logs = inspect_eval(tasks, model=scripted_agent("pass"), log_dir=str(folder), display="none", limit=4)
    assert [log.status for log in logs] == ["success", "success"]
    return folder


def sample_ids(logs: Path) -> list[str]:
    from inspect_ai.log import read_eval_log

    first = sorted(logs.glob("*.eval"))[0]
    return [str(s.id) for s in read_eval_log(str(first)).samples]


def write_ratings(run_dir: Path, ids: list[str], agree: bool) -> None:
    """Two raters on every item under both conditions; when ``agree`` they give full-lca 5 and stateless 1,
    else they contradict each other (alpha far below the threshold), and the agreement record says so."""
    folder = run_dir / "ratings"
    folder.mkdir()
    rows, n = [], 0
    for condition in CONDITIONS:
        for sample in ids:
            n += 1
            for rater in ("rater_a", "rater_b"):
                good = condition == "full-lca"
                value = (
                    (5 if good else 1)
                    if agree
                    else ((5 if rater == "rater_a" else 1) if n % 2 else (1 if rater == "rater_a" else 5))
                )
                rows.append(
                    [f"r{n:03d}", sample, "hollow_copy", condition, rater, value, str(value), "", "calibration"]
                )
    with open(folder / "style.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["sheet_item_id", "sample_id", "protocol", "condition", "rater", "value", "raw", "missing_reason", "phase"]
        )
        writer.writerows(rows)
    record = {
        "measure": "style",
        "level": "ordinal",
        "n_items": n,
        "n_raters": 2,
        "alpha": 1.0 if agree else -0.9,
        "alpha_ci": [1.0, 1.0] if agree else [-1.0, -0.6],
        "raw_agreement": 1.0 if agree else 0.0,
        "expected_agreement": 0.5,
        "threshold": 0.667,
        "passes": agree,
        "lean": [],
        "leaning": [] if agree else ["full-lca"],
        "refused": not agree,
        "reason": None if agree else "alpha -0.900 is below the threshold 0.667: coding refused",
    }
    (folder / "style.agreement.json").write_text(json.dumps(record), encoding="utf-8")


def make_run(root: Path, logs: Path, *, run_id: str, exploratory: bool = False, agree: bool = False) -> Path:
    """``root/studies/tiny_study/<run_id>/`` with the logs, a manifest and ratings; returns the study document."""
    study = root / "preregistration" / f"{STUDY_ID}.yaml"
    if not study.exists():
        study.parent.mkdir(parents=True)
        study.write_text(STUDY_YAML, encoding="utf-8")
    run_dir = root / "studies" / STUDY_ID / run_id
    shutil.copytree(logs, run_dir / "logs" / "hollow_copy")
    sha = file_sha256(study)
    lock = (
        None
        if exploratory
        else {
            "study_id": STUDY_ID,
            "sha256": sha,
            "locked_at": "2026-01-01T00:00:00+00:00",
            "code_revision": "0.1.0+gabc",
            "schema_version": 1,
        }
    )
    manifest = {
        "study_id": STUDY_ID,
        "study_path": str(study),
        "study_sha256": sha,
        "lock": lock,
        "lock_state": "unlocked" if exploratory else "locked",
        "exploratory": exploratory,
        "code_revision": "0.1.0+gabc",
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "wall_seconds": 60.0,
        "seeds": [0],
        "models": {"agent": "lca-local/smollm2", "roles": {"rater_a": "lca-local/smollm2"}},
        "model_files": {"lca-local/smollm2": GGUF_SHA},
        "embedder_id": "fake-hashing-64",
        "packages": {"inspect-ai": "0.3.285", "statsmodels": "0.14.4"},
        "datasets": [
            {
                "protocol": "hollow_copy",
                "file": "data/fixtures/continuity-v2-fixture.jsonl",
                "sha256": "f387bd0cb402e41b5448cc3ab918c982a3f3afb7f2e54a597912ca253d2847b9",
                "fixture": True,
            }
        ],
        "protocols": [
            {
                "name": "hollow_copy",
                "conditions": list(CONDITIONS),
                "limit": 4,
                "args": {},
                "log_dir": str(run_dir / "logs" / "hollow_copy"),
                "status": "success",
                "wall_seconds": 9.5,
                "skipped_reason": None,
            }
        ],
        "deviations": [
            {
                "at": "2026-01-01T00:00:30+00:00",
                "what": "ran the project fixture",
                "why": "no data",
                "by": "tests",
                "kind": "data_missing",
            }
        ],
        "platform": {"python": "3.11", "cpu_count": 2, "machine": "x86_64"},
    }
    (run_dir / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    (root / "studies" / STUDY_ID / "LATEST").write_text(run_id, encoding="utf-8")
    write_ratings(run_dir, sample_ids(logs), agree)
    return study
