"""Forgetting a turn a record rests on (issue 53 x issue 52): the record's signature, centrality, taxonomy tags,
ledger membership and cycle-report mentions go in the same operation; a dry run lists them and changes nothing;
what forget leaves is what a rebuild from the remaining records writes, byte for byte."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from lca.forget import ForgetRequest
from lca.insight import SummarizerSigner, distill, insight_detail, insight_records, refresh_centrality, review_queue
from lca.insight.schemas import propose_schema
from lca.insight.taxonomy import refresh_taxonomy
from lca.ledger import Ledger
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.recall import RecallConfig
from lca.substrate import Substrate
from protocols.cli import main
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import CORPUS, fake_signer_generator
from tests.lca.insight.test_schema_gates import cycle


def open_store(root: Path) -> Substrate:
    return Substrate(root, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0))


def insight_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "insight").rglob("*")) if p.is_file()
    }


def planted(root: Path) -> tuple[str, str, str]:
    """A store whose corpus records each cite the turn that said them, one integration cycle run over it and a
    schema proposed from the surfaced insight; the surfaced insight's first record, its text and the hypothesis."""
    with open_store(root) as s:
        for rid, domain, text, _ in CORPUS:
            s.append([make_entry(f"s-{rid}", 1, text)])
            record = MemoryRecord(
                id=rid,
                type=MemoryType.LESSON,
                projects=(domain,),
                created=datetime(2026, 1, 1),
                authority=Authority.REVIEWED,
                privacy=Privacy.PRIVATE,
                sources=(TranscriptSpan(session=f"s-{rid}", entries=(f"s-{rid}:1",)),),
            )
            s.memory.write(record, text + "\n")
    (rec,) = cycle(root, CORPUS).reconciliations
    propose_schema(root, "boom-bust", "a population feeds on a stock it drains", insight=rec.hypothesis)
    members = sorted(m.removeprefix("record:") for m in Ledger(root).state().hypotheses[rec.hypothesis].members)
    text = next(t for rid, _, t, _ in CORPUS if rid == members[0])
    return members[0], text, rec.hypothesis


def test_a_dry_run_lists_the_insight_data_it_would_change_and_changes_nothing(tmp_path, capsys):
    rid, _, hypothesis = planted(tmp_path)
    before, ledger = insight_bytes(tmp_path), (tmp_path / "events" / "ledger.jsonl").read_bytes()
    with open_store(tmp_path) as s:
        report = s.forget(ForgetRequest(entries=(f"s-{rid}#s-{rid}:1",)), by="ana", why="asked", dry_run=True)
    assert report.memory_files_removed == (rid,) and report.insight is not None
    assert report.insight.records == (rid,)
    assert {"insight/signatures.jsonl", "insight/centrality.json"} <= set(report.insight.files)
    assert any(f.startswith("insight/cycles/") for f in report.insight.files)
    assert report.insight.hypotheses == (hypothesis,) and report.insight.schemas == ("boom-bust",)
    assert report.to_dict()["insight"]["records"] == [rid]
    assert insight_bytes(tmp_path) == before
    assert (tmp_path / "events" / "ledger.jsonl").read_bytes() == ledger
    assert list((tmp_path / "memory").rglob(f"{rid}*"))  # the memory file is still there
    key = f"s-{rid}#s-{rid}:1"
    assert main(["forget", "--store", str(tmp_path), "--entry", key, "--by", "ana", "--why", "x", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove: {rid}" in out and "insight/signatures.jsonl" in out and hypothesis in out
    assert insight_bytes(tmp_path) == before


def test_after_forget_no_insight_file_names_the_record_or_holds_its_text_and_a_rebuild_writes_the_same(tmp_path):
    rid, text, hypothesis = planted(tmp_path)
    named = re.compile(rf"(?<![\w.-]){re.escape(rid)}(?![\w.-])")
    assert any(named.search(b.decode()) for b in insight_bytes(tmp_path).values())
    with open_store(tmp_path) as s:
        report = s.forget(ForgetRequest(entries=(f"s-{rid}#s-{rid}:1",)), by="ana", why="the user asked")
        forgotten = s.health().check("forgotten")  # health reads insight/ too, and finds nothing there
        assert forgotten.status.value == "ok", forgotten.detail
    assert report.memory_files_removed == (rid,) and report.insight is not None
    assert "insight/signatures.jsonl" in report.insight.files and report.insight.hypotheses == (hypothesis,)
    after = insight_bytes(tmp_path)
    for name, data in after.items():
        assert not named.search(data.decode()), name
        assert text.lower() not in data.decode().lower(), name
    # the ledger is appended to, not rewritten: one event, and no entry counts the record among its members
    state = Ledger(tmp_path).state()
    assert [e.kind for e in Ledger(tmp_path).events()][-1] == "records_forgotten"
    assert all(f"record:{rid}" not in h.members for h in state.hypotheses.values())
    assert rid not in state.schemas["boom-bust"].members
    assert review_queue(tmp_path, everything=True) and insight_detail(tmp_path, hypothesis)
    # derived: rebuilt from the remaining records, the same bytes
    for name in ("signatures.jsonl", "quarantine.jsonl", "centrality.json", "taxonomy.json"):
        (tmp_path / "insight" / name).unlink(missing_ok=True)
    records = insight_records(tmp_path)[0]
    distill(tmp_path, records, SummarizerSigner(fake_signer_generator(CORPUS)))
    refresh_centrality(tmp_path)
    refresh_taxonomy(tmp_path)
    assert insight_bytes(tmp_path) == after


def test_forgetting_a_turn_no_record_rests_on_leaves_the_insight_data_alone(tmp_path):
    planted(tmp_path)
    with open_store(tmp_path) as s:
        s.append([make_entry("chat", 1, "the lunch order is soup on Fridays")])
    before = insight_bytes(tmp_path)
    events = len(Ledger(tmp_path).events())
    with open_store(tmp_path) as s:
        report = s.forget(ForgetRequest(entries=("chat#chat:1",)), by="ana", why="asked")
    assert report.insight is not None and report.insight.files == () and report.insight.records == ()
    assert insight_bytes(tmp_path) == before and len(Ledger(tmp_path).events()) == events
