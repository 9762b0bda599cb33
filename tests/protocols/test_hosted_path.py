"""The hosted-model path, for real: llama-cpp-python's OpenAI-compatible server serves the SmolLM2 GGUF on a
free localhost port, and a slice of the hollow-copy pilot (its protocols, roles and kinds of measure: hollow_copy
under stateless and full-lca, one probe of the project's two-session fixture scenario; one LongMemEval fixture
question judged by the grader; a judged measure rated by two raters) runs through inspect's OpenAI-compatible
provider (``openai-api/llamacpp/smollm2``) with every role pointed at it: the agent, the summarizer (consolidation's
writer, the handoff), the reviewer, the LongMemEval judge (the grader role) and the raters. Over HTTP the
consolidation schema is the API's structured output (this server takes ``json_object`` with a schema and
refuses ``json_schema``: the refusal is seen once and the next way used), the logs name the served model and
count its tokens, and run.json records the served model's name. No internet: the server is on 127.0.0.1.

Slow (a server process and a real model: about 35 s on 2 idle cores); runs in CI. The README's "Hosted and served
models" gives the same for llama.cpp's own server, vLLM and Ollama."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from protocols.harness.solvers import PACKET_KEY
from tests.fakes import FakeHashingEmbedder

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SERVICE = "llamacpp"  # openai-api/<service>/<model> reads LLAMACPP_BASE_URL and LLAMACPP_API_KEY
SERVED = "smollm2"  # the server's --model_alias: the name it answers with
MODEL = f"openai-api/{SERVICE}/{SERVED}"
READY_TIMEOUT_S = 120

SLICE = f"""schema_version: 1
id: hosted_slice
title: "A slice of the hollow-copy pilot against a model served over an OpenAI-compatible API"
version: "0.1.0"
authors: [tests]
hypotheses:
  - {{id: H1, statement: full-lca puts the evidence a continuity probe needs in front of the agent}}
conditions: [stateless, full-lca]
models:
  agent: {MODEL}
  roles:
    summarizer: {MODEL}
    reviewer: {MODEL}
    grader: {MODEL}
    rater_a: {MODEL}
    rater_b: {MODEL}
protocols:
  - name: hollow_copy
    args: {{scenarios: data/fixtures/continuity-v2-fixture.jsonl}}
    limit: 1
  - name: longmemeval
    conditions: [stateless]
    args: {{data: data/fixtures/longmemeval_fixture.json, judge: 1}}
    limit: 1
measures:
  - {{id: needed_in, protocol: hollow_copy, kind: computed, scorer: continuity_context, metric: needed_in,
     computation: every evidence pointer among the injected items, scale: binary}}
  - id: style_continuity
    protocol: hollow_copy
    kind: judged
    level: ordinal
    scale: [1, 2, 3, 4, 5]
    rater_panel:
      raters: [rater_a, rater_b]
      prompt: >-
        Rate how much the answer reads as the same collaborator continuing the work. 1 = a stranger starting
        fresh, 5 = clearly the same collaborator.
      min_raters: 2
    agreement_threshold: 0.667
    calibration_items: 2
  - {{id: accuracy_longmemeval, protocol: longmemeval, kind: computed, scorer: longmemeval_judge,
     metric: longmemeval_judge, computation: the grader answers yes or no, scale: binary}}
predictions:
  - {{id: P3, hypothesis: H1, measure: needed_in, kind: superiority, better: full-lca, than: stateless,
     min_effect: 0.5}}
sample_size:
  unit: probe
  n_per_condition: 2
  reasoning: a pipeline check of the hosted path, not a test
  power: {{test: mcnemar, alpha: 0.05, power: 0.8, effect: 0.5}}
analysis: {{model: cluster_robust, groups: [scenario]}}
seeds: [0]
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_ready(process: subprocess.Popen, base_url: str, log: Path) -> list[str]:
    """The served model ids once ``GET /v1/models`` answers; fails with the server's log if it exits or stalls."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never goes through a proxy
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with opener.open(f"{base_url}/models", timeout=2) as response:
                return [m["id"] for m in json.load(response)["data"]]
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            time.sleep(0.25)
    pytest.fail(f"the server was not ready in {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def answers_once(process: subprocess.Popen, base_url: str, log: Path) -> None:
    """One short chat completion before the study starts. Skips the test when the server process dies on it: a
    llama.cpp server build that crashes on this machine's CPU (seen 2026-12-06: a general protection fault in
    libggml-cpu.so on the first completion, at this commit and at db84580 alike, while in-process llama.cpp runs)
    cannot test the served path here, and a dead server would leave the study's client retrying without end."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"model": SERVED, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2})
    request = urllib.request.Request(
        f"{base_url}/chat/completions", body.encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with opener.open(request, timeout=READY_TIMEOUT_S) as response:
            json.load(response)
            return
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        time.sleep(1.0)
        if process.poll() is not None:
            pytest.skip(
                f"llama_cpp.server died (exit {process.returncode}) on its first completion on this machine: "
                f"the served path cannot be tested here ({exc}); its log:\n{log.read_text()[-1500:]}"
            )
        pytest.fail(f"the server did not answer a short completion: {exc}\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` serving the GGUF that lca-local runs (``lca.generators.default_gguf_path``)
    as ``smollm2`` on a free localhost port; its base URL. Stopped (then killed, if it lingers) at the end."""
    from lca.generators import default_gguf_path

    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(default_gguf_path()),
        "--model_alias",
        SERVED,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
        "--seed",
        "0",
        "--verbose",
        "False",
    ]
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        assert wait_ready(process, base_url, log) == [SERVED]
        answers_once(process, base_url, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def model_events(log):
    return [event for sample in log.samples or () for event in sample.events if event.event == "model"]


def test_a_slice_of_the_pilot_runs_against_a_local_openai_compatible_server(llama_server, tmp_path, monkeypatch):
    from inspect_ai.log import read_eval_log

    from protocols.providers.structured import MODE_MEMORY, schema_error
    from protocols.study import lock_study
    from protocols.study.runner import run_study

    # the embedder is not on the path under test: the fake one keeps torch off the two cores the server needs
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    monkeypatch.setenv("LLAMACPP_BASE_URL", llama_server)
    monkeypatch.setenv("LLAMACPP_API_KEY", "local")  # the server checks no key; inspect needs one set
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("LCA_STRUCTURED_OUTPUT", raising=False)
    MODE_MEMORY.clear()  # this process has not asked this server yet: the probe of the modes is part of the test
    study = tmp_path / "hosted_slice.yaml"
    study.write_text(SLICE, encoding="utf-8")
    lock_study(study)
    lines: list[str] = []
    result = run_study(study, out=tmp_path / "studies", display="none", echo=lines.append)
    manifest = result.manifest
    assert result.ok, [lines, [p.get("error") for p in manifest["protocols"]]]

    # provenance: the model strings, and the name the server answered with for each of them
    assert manifest["models"]["agent"] == MODEL and set(manifest["models"]["roles"].values()) == {MODEL}
    assert manifest["served_models"] == {MODEL: [SERVED]}
    assert manifest["model_files"] == {}  # a served model has no local file to hash

    protocols = {p["name"]: p for p in manifest["protocols"]}
    tasks = {t["condition"]: t for t in protocols["hollow_copy"]["tasks"]}
    assert set(tasks) == {"stateless", "full-lca"}
    for task in [*tasks.values(), *protocols["longmemeval"]["tasks"]]:
        assert task["samples"] == 1 and task["served_models"] == {MODEL: [SERVED]}
        usage = task["model_usage"][MODEL]  # inspect's token accounting, from the API's usage
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0

    # the eval logs: every role on the served model, its name on every answer, tokens counted from the API
    full = read_eval_log(tasks["full-lca"]["log"])
    assert full.eval.model == MODEL
    roles = {name: role.model for name, role in (full.eval.model_roles or {}).items()}
    assert roles == {"summarizer": MODEL, "reviewer": MODEL, "grader": MODEL}
    assert full.stats.model_usage[MODEL].input_tokens > 0 and full.stats.model_usage[MODEL].output_tokens > 0
    events = model_events(full)
    answered = [e for e in events if not e.error]
    assert {e.role or "agent" for e in answered} >= {"agent", "summarizer", "reviewer"}
    assert {e.output.model for e in answered} == {SERVED}
    assert all(e.output.usage.input_tokens > 0 and e.output.usage.output_tokens > 0 for e in answered)

    # consolidation over the API: json_schema was refused once (HTTP 500, sent without retries) and not asked
    # again; every schema call then went as the API's structured output, json_object with the whole schema
    refused = [e for e in events if e.error]
    assert len(refused) == 1 and "json_object" in str(refused[0].error) and refused[0].role == "summarizer"
    structured = [e for e in answered if e.call and (e.call.request.get("extra_body") or {}).get("response_format")]
    # (inspect keeps the HTTP request of a sample's first few calls per model; role_structured below counts all)
    assert "summarizer" in {e.role for e in structured}
    for event in structured:
        response_format = event.call.request["extra_body"]["response_format"]
        assert response_format["type"] == "json_object" and response_format["schema"]["type"] == "object"
        if event.output.stop_reason == "stop":  # the answer is one JSON value valid under the schema sent
            assert schema_error(event.output.completion, response_format["schema"]) is None
    (sample,) = full.samples
    packet = sample.store[PACKET_KEY]
    counts = packet["role_structured"]
    assert counts["summarizer"]["refused"] == ["json_schema"] and counts["reviewer"]["refused"] == []
    for role in ("summarizer", "reviewer"):
        assert counts[role]["by_mode"] == {"json_object": counts[role]["calls"]} and counts[role]["served"] == [SERVED]
        assert counts[role]["valid"] + counts[role]["failures"] == counts[role]["calls"] > 0
    assert counts["summarizer"]["valid"] > 0 and counts["summarizer"]["retries"] == 0
    # the consolidation cycles read those answers: candidates parsed from the JSON, checked by the reviewer
    cycles = packet["notes"]["cycles"]
    assert len(cycles) == 2  # one per session end of the scenario
    assert sum(c["candidates"] for c in cycles) > 0 and sum(sum(c["verdicts"].values()) for c in cycles) > 0

    # the raters rated the calibration items over the API, each rating read from the JSON it answered
    with open(result.run_dir / "ratings" / "style_continuity.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    calibration = [r for r in rows if r["phase"] == "calibration"]
    assert {r["rater"] for r in calibration} == {"rater_a", "rater_b"}
    assert all(r["value"] for r in calibration), calibration

    # the judge: LongMemEval's grader role answered over the API
    (judged,) = read_eval_log(protocols["longmemeval"]["tasks"][0]["log"]).samples
    assert f"grader {MODEL}" in judged.scores["longmemeval_judge"].explanation
    graded = [e for e in model_events(read_eval_log(protocols["longmemeval"]["tasks"][0]["log"])) if e.role == "grader"]
    assert graded and graded[0].output.model == SERVED
