"""Bundles, authority and migration (lca.bundle, lca.authority): a bundle is verified before anything is activated,
a copy never carries authority, and after a migration the old writer is fenced off (two processes)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from lca.authority import FencedWriteError, advance, fencing_refusals, read_authority
from lca.bundle import (
    MIGRATION_SESSION,
    MIGRATION_STEPS,
    BundleError,
    export_bundle,
    import_bundle,
    migrate,
    read_manifest,
    verify_bundle,
)
from lca.errors import RecordFormatError
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy
from lca.substrate import Substrate
from lca.transcript import TranscriptStore
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
TURNS = [
    "we deploy the billing service with blue green releases",
    "the staging database listens on port 6543",
    "Marco prefers numbered lists for review feedback",
    "the certificate rotation is still to do",
]
QUERIES = ["which port does staging use", "how do we deploy billing", "review feedback style"]


def build(root: Path) -> Path:
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s1", n, text) for n, text in enumerate(TURNS, 1)])
        s.memory.write(
            MemoryRecord(
                id="deploy",
                type=MemoryType.FACT,
                created=datetime(2026, 1, 1),
                authority=Authority.REVIEWED,
                privacy=Privacy.PRIVATE,
            ),
            "Billing deploys blue green.",
        )
        s.ingest()
    (root / "identity").mkdir(exist_ok=True)
    (root / "identity" / "identity.md").write_text("I am the atlas project's assistant.\n")
    (root / "recall.yaml").write_text("token_budget: 900\n")
    return root


def rebuild(root: Path) -> None:
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        s.reindex()


def recalled(root: Path) -> list[list[tuple[str, float]]]:
    with Substrate(root, embedder=FakeHashingEmbedder()) as s:
        return [[(i.source, round(i.score, 9)) for i in s.recall(q).items] for q in QUERIES]


@pytest.fixture
def source(tmp_path) -> Path:
    return build(tmp_path / "source")


def test_the_first_write_gives_a_store_its_authority_and_a_damaged_record_is_named(tmp_path):
    root = tmp_path / "s"
    TranscriptStore(root).append([make_entry("a", 1, "hello")])
    record = read_authority(root)
    assert record is not None and record.epoch == 1 and record.state == "active" and record.agent_id
    history = (root / "events" / "authority.jsonl").read_text().splitlines()
    assert len(history) == 1 and json.loads(history[0])["epoch"] == 1
    (root / "authority.json").write_text("{not json")
    with pytest.raises(RecordFormatError, match="authority.json: not valid JSON"):
        read_authority(root)


def test_a_writer_holding_a_stale_epoch_is_refused_logged_and_writes_nothing(tmp_path):
    root = tmp_path / "s"
    writer = TranscriptStore(root)
    writer.append([make_entry("a", 1, "first")])
    advance(root, state="transferred", reason="migrated to elsewhere", successor="elsewhere")
    with pytest.raises(FencedWriteError, match="stale epoch: this writer holds 1, the store is at epoch 2"):
        writer.append([make_entry("a", 2, "after the migration")])
    late = TranscriptStore(root)  # opened after: it holds the new epoch, but the store is no longer the active copy
    with pytest.raises(FencedWriteError, match="transferred copy"):
        late.append([make_entry("a", 3, "still here")])
    assert [e.id for e in TranscriptStore(root).read("a").entries] == ["a:1"]
    refusals = fencing_refusals(root)
    assert [r["writer_epoch"] for r in refusals] == [1, 2] and all(r["store_epoch"] == 2 for r in refusals)
    assert writer.append([make_entry("a", 1, "first")]).duplicates == 1  # re-sending what is recorded writes nothing


def test_a_bundle_ships_three_parts_and_never_the_index_or_authority(source, tmp_path):
    manifest = export_bundle(source, tmp_path / "b")
    assert verify_bundle(tmp_path / "b") == manifest == read_manifest(tmp_path / "b")
    parts = {f.path: f.part for f in manifest.files}
    assert parts["identity/identity.md"] == "identity" and parts["recall.yaml"] == "body"
    assert parts["sessions/s1.jsonl"] == "memory" and parts["memory/deploy.md"] == "memory"
    assert parts["events/authority.jsonl"] == "memory"  # who held authority when is history; the record is not
    assert not any(p.startswith("index/") or p in ("authority.json", "write.lock") for p in parts)
    assert (tmp_path / "b" / "identity" / "identity" / "identity.md").is_file()
    assert manifest.agent_id == read_authority(source).agent_id and manifest.source_epoch == 1
    assert manifest.embedder_id and manifest.code_version and len(manifest.bundle_id) == 64
    with pytest.raises(BundleError, match="not empty"):
        export_bundle(source, tmp_path / "b")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: (b / "memory" / "sessions" / "s1.jsonl").write_bytes(b"x" * 10), "10 bytes, the manifest says"),
        (lambda b: _flip(b / "memory" / "sessions" / "s1.jsonl"), "differs from the manifest"),
        (lambda b: (b / "memory" / "memory" / "deploy.md").unlink(), "deploy.md: missing from the bundle"),
        (lambda b: (b / "body" / "extra.yaml").write_text("x: 1\n"), "extra.yaml: not in the manifest"),
        (lambda b: _edit_manifest(b, agent_id="agent-forged"), "the manifest was altered"),
        (lambda b: (b / "manifest.json").unlink(), "manifest.json: missing"),
    ],
)
def test_a_damaged_bundle_is_refused_naming_the_file_and_nothing_is_imported(source, tmp_path, damage, message):
    bundle = tmp_path / "b"
    export_bundle(source, bundle)
    damage(bundle)
    with pytest.raises(BundleError, match=message):
        verify_bundle(bundle)
    with pytest.raises(BundleError, match=message):
        import_bundle(bundle, tmp_path / "copy")
    assert not (tmp_path / "copy").exists() and not list(tmp_path.glob(".copy.importing-*"))


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[5] ^= 1
    path.write_bytes(bytes(data))


def _edit_manifest(bundle: Path, **changes) -> None:
    data = json.loads((bundle / "manifest.json").read_text())
    data.update(changes)
    (bundle / "manifest.json").write_text(json.dumps(data))


def test_an_imported_replica_recalls_as_the_source_and_cannot_write_history(source, tmp_path):
    export_bundle(source, tmp_path / "b")
    manifest = import_bundle(tmp_path / "b", tmp_path / "replica", rebuild=rebuild)
    record = read_authority(tmp_path / "replica")
    assert record.state == "replica" and record.agent_id == manifest.agent_id
    assert recalled(tmp_path / "replica") == recalled(source)  # derived stores rebuilt from the transcript
    with pytest.raises(FencedWriteError, match="replica copy"):
        TranscriptStore(tmp_path / "replica").append([make_entry("s1", 9, "a second continuation")])
    with pytest.raises(BundleError, match="not empty"):
        import_bundle(tmp_path / "b", tmp_path / "replica")


def test_a_new_agent_from_a_bundle_has_its_own_id_and_records_its_descent(source, tmp_path):
    manifest = export_bundle(source, tmp_path / "b")
    import_bundle(tmp_path / "b", tmp_path / "child", mode="new-agent")
    record = read_authority(tmp_path / "child")
    assert record.writable and record.epoch == 1 and record.agent_id != manifest.agent_id
    assert record.descent[-2:] == (f"agent:{manifest.agent_id}", f"bundle:{manifest.bundle_id}")
    TranscriptStore(tmp_path / "child").append([make_entry("s2", 1, "the child's own history")])
    child = export_bundle(tmp_path / "child", tmp_path / "b2")
    assert child.parent_bundle == manifest.bundle_id  # lineage: the bundle the store came from
    with pytest.raises(BundleError, match="unknown import mode"):
        import_bundle(tmp_path / "b", tmp_path / "x", mode="authoritative")


def entries(root: Path) -> list[tuple[str, str]]:
    store = TranscriptStore(root)
    return [(e.session_id, e.id) for e in store.iter_entries() if e.session_id != MIGRATION_SESSION]


def test_a_migration_hands_authority_on_and_loses_or_duplicates_nothing(source, tmp_path):
    history = entries(source)
    result = migrate(source, tmp_path / "target", bundle_dir=tmp_path / "b", rebuild=rebuild, binding={"model": "B"})
    assert result.ok and (result.source_epoch, result.target_epoch) == (1, 2)
    assert [s["step"] for s in result.steps] == ["quiesce", "checkpoint", "validate", "bind", "rehydrate", "resume"]
    src, dst = read_authority(source), read_authority(tmp_path / "target")
    assert (src.state, src.epoch, src.successor) == ("transferred", 2, str(tmp_path / "target"))
    assert (dst.state, dst.epoch, dst.agent_id) == ("active", 2, src.agent_id)
    assert entries(tmp_path / "target") == history  # nothing lost, nothing duplicated
    assert recalled(tmp_path / "target") == recalled(source)
    steps = [e.meta["migration_step"] for e in TranscriptStore(tmp_path / "target").read(MIGRATION_SESSION).entries]
    assert steps == list(MIGRATION_STEPS)  # quiesce and checkpoint travelled; the rest were appended on activation
    with pytest.raises(FencedWriteError):
        TranscriptStore(source).append([make_entry("s1", 9, "written on the old copy")])
    TranscriptStore(tmp_path / "target").append([make_entry("s1", 9, "written on the new one")])


def test_a_failed_rehydration_rolls_back_to_the_source(source, tmp_path):
    def broken(root: Path) -> None:
        raise RuntimeError("the target host ran out of disk")

    result = migrate(source, tmp_path / "target", bundle_dir=tmp_path / "b", rebuild=broken)
    assert not result.ok and result.rolled_back and "ran out of disk" in result.error
    assert not (tmp_path / "target").exists()
    record = read_authority(source)
    assert record.writable and record.epoch == 3 and "rollback" in record.reason
    steps = [e.meta["migration_step"] for e in TranscriptStore(source).read(MIGRATION_SESSION).entries]
    assert steps == ["quiesce", "checkpoint", "validate", "rollback"]
    TranscriptStore(source).append([make_entry("s1", 9, "the source writes again")])


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lca.authority import FencedWriteError
    from lca.transcript import TranscriptStore
    from tests.conftest import make_entry
    root, flag = Path(sys.argv[1]), Path(sys.argv[2])
    store = TranscriptStore(root)
    store.append([make_entry("s1", 20, "the old writer, before the migration")])
    print("appended", flush=True)
    while not flag.exists():
        time.sleep(0.05)
    try:
        store.append([make_entry("s1", 21, "the old writer, after the migration")])
        print("written", flush=True)
    except FencedWriteError as exc:
        print("refused", exc, flush=True)
    """
)


def test_after_a_migration_the_old_process_is_fenced_off(source, tmp_path):
    flag = tmp_path / "migrated"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(source), str(flag)], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "appended"
    result = migrate(source, tmp_path / "target", bundle_dir=tmp_path / "b", rebuild=rebuild)
    assert result.ok
    flag.write_text("go")
    out, _ = writer.communicate(timeout=60)
    assert out.startswith("refused") and "stale epoch" in out and writer.returncode == 0
    ids = {e.id for e in TranscriptStore(source).read("s1").entries}
    assert "s1:20" in ids and "s1:21" not in ids  # nothing it attempted after the bind entered history
    assert "s1:20" in {e.id for e in TranscriptStore(tmp_path / "target").read("s1").entries}
    (refusal,) = fencing_refusals(source)
    assert refusal["pid"] == writer.pid and refusal["writer_epoch"] == 1 and refusal["store_epoch"] == 2


# ---- checking a migration, and the self-description after it ----------------------------------------------------
def test_check_migration_passes_a_clean_move_and_names_a_lost_entry_and_an_unfenced_writer(source, tmp_path):
    from lca.migration_check import check_migration, history_fingerprint

    before = history_fingerprint(source)
    stale = TranscriptStore(source)
    result = migrate(source, tmp_path / "target", bundle_dir=tmp_path / "b", rebuild=rebuild)
    check = check_migration(source, tmp_path / "target", result, before, stale_writer=stale)
    assert check.ok and check.source_fenced and (check.entries_lost, check.entries_duplicated) == (0, 0)
    assert check.lineage_intact and check.epoch_advanced and check.steps_recorded and not check.problems

    session = TranscriptStore(tmp_path / "target").session_path("s1")  # one turn goes missing on the target
    lines = session.read_text().splitlines(keepends=True)
    session.write_text("".join(lines[:-1]))
    lost = check_migration(source, tmp_path / "target", result, before)
    assert not lost.ok and lost.entries_lost == 1 and "1 lost" in lost.problems[0]

    advance(source, state="active", reason="a broken rollback that re-opens the old copy")
    unfenced = check_migration(source, tmp_path / "target", result, before, stale_writer=TranscriptStore(source))
    assert unfenced.source_fenced is False and not unfenced.epoch_advanced and not unfenced.ok


def test_a_migration_asks_the_resumed_agent_who_it_is_and_records_the_check(source, tmp_path):
    from lca.self_description import check_self_description

    binding = {"model": "openai/gpt-4o-mini", "host": "/srv/host-b"}
    said = "I am the atlas project's assistant, working with Marco on the billing service."
    result = migrate(
        source, tmp_path / "t", bundle_dir=tmp_path / "b", rebuild=rebuild, binding=binding, describe=lambda t: said
    )
    assert result.ok and result.self_description["consistent"] is True
    assert result.self_description["environment"] == binding  # metadata beside the check, not identity
    events = TranscriptStore(tmp_path / "t").read(MIGRATION_SESSION).entries
    assert events[-1].meta["migration_step"] == "self_description"

    wrong = check_self_description(tmp_path / "t", "I'm GPT-4o-mini, a model made by OpenAI.", binding)
    assert wrong.environment_claimed == ("model",) and wrong.consistent is False and wrong.coverage < 0.5
    bare = tmp_path / "bare"
    TranscriptStore(bare).append([make_entry("a", 1, "hello")])
    nothing = check_self_description(bare, "I am an assistant.", binding)
    assert not nothing.installed and nothing.consistent is None and math.isnan(nothing.coverage)


def test_an_agent_that_cannot_be_asked_is_reported_and_the_migration_stands(source, tmp_path):
    def mute(target: Path) -> str:
        raise RuntimeError("the new model endpoint is down")

    result = migrate(source, tmp_path / "t", bundle_dir=tmp_path / "b", rebuild=rebuild, describe=mute)
    assert result.ok and "endpoint is down" in result.self_description["error"]
    assert read_authority(tmp_path / "t").writable


def test_after_a_migration_the_old_copy_writes_no_memory_identity_or_learned_state(source, tmp_path):
    from lca.identity import IdentityStore
    from lca.ledger import Ledger
    from lca.memory import MemoryStore

    memory, identity = MemoryStore(source), IdentityStore(source)  # opened before the move, like a live process
    assert migrate(source, tmp_path / "t", bundle_dir=tmp_path / "b", rebuild=rebuild).ok
    record = MemoryRecord(
        id="late",
        type=MemoryType.FACT,
        created=datetime(2026, 1, 2),
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
    )
    before = sorted(p.name for p in (source / "memory").rglob("*.md"))
    ledger_before = (
        (source / "events" / "ledger.jsonl").read_bytes() if (source / "events" / "ledger.jsonl").exists() else b""
    )
    for attempt in (
        lambda: memory.write(record, "written on the old copy"),
        lambda: memory.record_use("deploy", hits=1),
        lambda: identity.write("identity", "someone else", approver="ana"),
        lambda: Ledger(source).append("identity_written", "identity", {"approver": "ana"}),
    ):
        with pytest.raises(FencedWriteError):
            attempt()
    assert sorted(p.name for p in (source / "memory").rglob("*.md")) == before
    assert (source / "identity" / "identity.md").read_text() == "I am the atlas project's assistant.\n"
    after = (source / "events" / "ledger.jsonl").read_bytes() if (source / "events" / "ledger.jsonl").exists() else b""
    assert after == ledger_before and len(fencing_refusals(source)) == 4
    MemoryStore(tmp_path / "t").write(record, "written on the new one")  # the target holds the authority
