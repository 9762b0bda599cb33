"""The command line and the main job, end to end with the real embedder (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "data" / "fixtures" / "locomo_fixture.json"
pytestmark = pytest.mark.slow


def lca(*args: str, store: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if store is not None:
        env["LCA_HOME"] = str(store)
    result = subprocess.run(
        [sys.executable, "-m", "protocols.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_ingest_search_health_and_errors_through_the_cli(tmp_path):
    store = tmp_path / "store"
    out = lca("ingest", "--format", "locomo", "--quiet", "--json", str(FIXTURE), store=store, check=True)
    report = json.loads(out.stdout)
    assert report["entries_appended"] == 16 and report["index"]["new_chunks"] == 16
    assert report["imports"][0]["source_sha256"]

    found = json.loads(
        lca("search", "the climbing gym near the river", "-k", "3", "--json", store=store, check=True).stdout
    )
    assert found["embedder"].startswith("sentence-transformers/all-MiniLM-L6-v2@")
    gold = next(h for h in found["hits"] if "Granite Loft" in h["text"])  # the evidence turn, D1:6, in the top 3
    assert gold["pointer"]["session_id"] == "locomo:fixture-1:session_1"
    assert gold["pointer"]["entry_id"].endswith(":6") and gold["pointer"]["char_end"] > 0

    health = lca("health", "--json", store=store)
    assert health.returncode == 0 and json.loads(health.stdout)["healthy"] is True

    (store / "memory").mkdir()
    (store / "memory" / "broken.md").write_text("---\nid: broken\ntype: fact\n---\nno authority\n")
    unhealthy = lca("health", store=store)
    assert unhealthy.returncode == 1
    assert "broken.md" in unhealthy.stdout and "authority" in unhealthy.stdout

    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    failed = lca("ingest", "--format", "locomo", str(bad), store=store)
    assert failed.returncode == 2 and "bad.json" in failed.stderr and "not valid JSON" in failed.stderr


def test_reindex_through_the_cli_gives_identical_results(tmp_path):
    store = tmp_path / "store"
    lca("ingest", "--format", "locomo", "--quiet", str(FIXTURE), store=store, check=True)
    queries = ["When is Clara moving?", "pottery teacher", "What did Ben injure?"]
    before = [json.loads(lca("search", q, "--json", store=store, check=True).stdout)["hits"] for q in queries]
    lca("reindex", "--quiet", store=store, check=True)
    after = [json.loads(lca("search", q, "--json", store=store, check=True).stdout)["hits"] for q in queries]
    for b, a in zip(before, after, strict=True):
        assert [h["chunk_id"] for h in b] == [h["chunk_id"] for h in a]
        assert all(abs(x["score"] - y["score"]) <= 1e-6 for x, y in zip(b, a, strict=True))
        assert all(abs((x["dense_score"] or 0) - (y["dense_score"] or 0)) <= 1e-6 for x, y in zip(b, a, strict=True))


def test_the_main_job_is_the_locked_pilot_study_with_its_report():
    """The README's first command runs the pre-registered pilot and reports it (tests/study runs that study end to
    end with scripted models; the real models run it in the main job itself)."""
    from protocols.study import lock_status

    script = (REPO / "scripts" / "main.sh").read_text()
    assert "lca run preregistration/hollow_copy_pilot.yaml --report" in script
    assert lock_status(REPO / "preregistration" / "hollow_copy_pilot.yaml").state == "locked"


def test_recall_cli_explains_every_term_and_refuses_bad_weights(tmp_path):
    store = tmp_path / "store"
    lca("ingest", "--format", "locomo", "--quiet", str(FIXTURE), store=store, check=True)
    out = lca(
        "recall",
        "Ana adopted a grey cat from the shelter and named her",
        "--explain",
        "--floor",
        "0.3",
        store=store,
        check=True,
    ).stdout
    assert out.startswith("<recalled-context") and "Pebble" in out.split("</recalled-context>")[0]
    assert "simil" in out and "risk" in out and "INJECTED" in out and "tilt bound" in out
    assert "(brought by transcript:" in out  # a turn recalled as the one a chosen turn answers says which
    data = json.loads(
        lca("recall", "Pebble the cat", "--json", "--weight", "temporal=0", store=store, check=True).stdout
    )
    assert data["weights"]["temporal"] == 0.0
    assert all(c["injected"] or c["why_not"] for c in data["candidates"])
    bad = lca("recall", "cat", "--weight", "gravity=1", store=store)
    assert bad.returncode == 2 and "gravity" in bad.stderr
    negative = lca("recall", "cat", "--budget", "-1", store=store)
    assert negative.returncode == 2 and "token_budget" in negative.stderr
    for command in ("recall", "search"):
        vague = lca(command, "cat", "--as-of", "yesterday", store=store)
        assert vague.returncode == 2 and "'yesterday' is neither epoch seconds nor an ISO 8601 time" in vague.stderr
        assert "Traceback" not in vague.stderr
    dated = json.loads(lca("search", "cat", "--as-of", "2023-06-01T10:00:00", "--json", store=store, check=True).stdout)
    assert dated["hits"]
    fitted = json.loads(
        lca("calibrate-floor", "--positives", "12", "--json", "--write", store=store, check=True).stdout
    )
    assert fitted["negatives"] == 50 and 0.0 < fitted["floor"] < 1.0
    assert f"floor: {fitted['floor']}" in (store / "recall.yaml").read_text()


def test_bundle_export_verify_import_and_migrate_through_the_cli(tmp_path):
    store, bundle = tmp_path / "store", tmp_path / "bundle"
    lca("ingest", "--format", "locomo", "--quiet", str(FIXTURE), store=store, check=True)
    out = lca("bundle", "export", str(bundle), store=store, check=True).stdout
    assert "exported" in out and "memory" in out
    assert "verified" in lca("bundle", "verify", str(bundle), check=True).stdout
    session = next((bundle / "memory" / "sessions").glob("*.jsonl"))
    session.write_bytes(session.read_bytes()[:-10])
    bad = lca("bundle", "verify", str(bundle))
    assert bad.returncode == 2 and session.name in bad.stderr and "truncated" in bad.stderr
    refused = lca("bundle", "import", str(bundle), "--no-rebuild", store=tmp_path / "copy")
    assert refused.returncode == 2 and not (tmp_path / "copy").exists()
    moved = lca("migrate", str(tmp_path / "target"), "--binding", "model=B", "--quiet", store=store, check=True).stdout
    assert "epoch 1 -> 2" in moved and "writers on" in moved
    shown = json.loads(lca("authority", "--json", store=store, check=True).stdout)
    assert shown["authority"]["state"] == "transferred" and shown["authority"]["epoch"] == 2
    target = json.loads(lca("authority", "--json", store=tmp_path / "target", check=True).stdout)
    assert (
        target["authority"]["state"] == "active" and target["authority"]["agent_id"] == shown["authority"]["agent_id"]
    )
    hits = json.loads(lca("search", "pottery teacher", "--json", store=tmp_path / "target", check=True).stdout)["hits"]
    assert hits  # the target's index was rebuilt from the transcript
    health = lca("health", store=store)
    assert "transferred copy" in health.stdout
