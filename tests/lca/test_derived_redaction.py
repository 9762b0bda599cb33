"""Issue 49, cases 2, 4 and 5, and the health check over derived stores: one redaction pass (``lca.derived``) that
every derived write goes through. A text is redacted whole before the chunker cuts it; identifiers (session, entry,
channel, speaker, LoCoMo and LongMemEval ids, mapping keys) are stored in a derived form whose pointer still leads
to the verbatim transcript; error messages and quarantine records never echo a credential; and health fails when
any derived store holds one (the BM25 vocabulary and mapping keys included)."""

from __future__ import annotations

import contextlib
import io
import json
import lzma
from pathlib import Path

import pytest

from lca.derived import DerivedTurnLookups, derived_id, derived_tree
from lca.errors import LCAError, RecordFormatError
from lca.handoff import TranscriptPointers
from lca.importers import import_locomo, import_longmemeval
from lca.index.chunker import Chunker, entry_chunks
from lca.recall import RecallConfig, RecallContext
from lca.substrate import Substrate
from lca.types import Chunk, EntryKind, SourcePointer, SourceType, TranscriptEntry, text_digest
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder
from tests.lca.test_secrets import GITHUB, PEM_BODY, STRIPE

PASSWORD = "Zq8fj3k2Lm9x"  # spoken with a trailing "!": the detector needs a digit or symbol in a spoken password
API_KEY = "abc123def456ghi789"
PEM_TAIL = "Qm9vbGVhblRydWU="  # a PEM body's short last line: no shape or entropy check flags it alone


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# Each text is cut by the 40-token fake embedder where the old per-chunk redaction let the value start a chunk
# of its own, with nothing left beside it to name it a credential.
SPLIT = [
    (f"{words(34)} my password is\n{PASSWORD}!\nand then more words follow here", PASSWORD),
    (f"{words(35)} api key is\n{API_KEY}\nand then more words follow here", API_KEY),
    (
        f"{words(20)}\n-----BEGIN RSA PRIVATE KEY-----\n"
        + "\n".join([PEM_BODY] * 3 + [PEM_TAIL])
        + "\n-----END RSA PRIVATE KEY-----\nand more",
        PEM_TAIL,
    ),
]


def leaks(root: Path, needles: list[str], *, skip: tuple[str, ...] = ("sessions",)) -> dict[str, list[str]]:
    """Files under ``root`` (but the folders in ``skip`` and quarantined raw bytes) holding a needle, by which."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".bin"):
        relative = path.relative_to(root)
        if relative.parts[0] in skip:
            continue
        data = path.read_bytes().lower()
        which = [n for n in needles if n.lower().encode() in data]
        if which:
            found[str(relative)] = which
    return found


# ---- case 2: redaction before chunking ----------------------------------------------------------------------


@pytest.mark.parametrize("text,value", SPLIT, ids=["password", "api-key", "pem-tail"])
def test_a_chunk_boundary_cannot_split_a_detection(text, value):
    entry = make_entry("s", 1, text)
    chunks = entry_chunks(entry, Chunker(FakeHashingEmbedder(max_input_tokens=40)))
    assert all(value not in c.text for c in chunks)  # the old code cut each text and let the value start a chunk
    marked = [c for c in chunks if "[REDACTED:" in c.text]
    assert marked and all(c.text.count("[") == c.text.count("]") for c in chunks)  # no marker cut in two
    # the pointers still tile the verbatim turn, and the redacted chunk's pointer covers the value
    spans = [(c.pointer.char_start, c.pointer.char_end) for c in chunks]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert any(value in text[c.pointer.char_start : c.pointer.char_end] for c in marked)


def test_a_split_credential_reaches_no_derived_store(tmp_path):
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder(max_input_tokens=40)) as s:
        s.append([make_entry("s", n, text) for n, (text, _) in enumerate(SPLIT, 1)])
        hits = s.search("password api key private", k=20)
        assert hits and all(v not in h.text for h in hits for _, v in SPLIT)
        s.recall(RecallContext("what was the api key"))
        report = s.health()
        assert report.check("redaction").status.value == "ok", report.check("redaction").detail
        assert report.check("redaction").data["state"] == "vouched"  # no stored text held a credential
    values = [v for _, v in SPLIT]
    assert leaks(tmp_path / "store", values) == {}
    assert set(leaks(tmp_path / "store" / "sessions", values, skip=())) == {"s.jsonl"}  # the authority keeps them


# ---- case 4: identifiers ------------------------------------------------------------------------------------

SESSION = f"deploy-{GITHUB}"


@pytest.fixture
def hostile_ids(tmp_path):
    """A store whose session id, entry id, channel and speaker each hold a credential."""
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0)) as s:
        s.append(
            [
                make_entry(SESSION, 1, "the rota moves to Fridays", meta={"project": "rota"}),
                make_entry(SESSION, 2, "noted, Fridays it is", kind=EntryKind.ASSISTANT_TURN),
                make_entry(  # a host's label naming the turn it corrects by its ids
                    SESSION, 3, "no, Thursdays", meta={"event": {"type": "correction", "of": f"{SESSION}#{SESSION}:1"}}
                ),
                TranscriptEntry(
                    id=f"plain:{STRIPE}",
                    session_id="plain",
                    agent_id="agent-test",
                    kind=EntryKind.USER_TURN,
                    timestamp="2026-01-01T00:00:03",
                    content="the rota question again",
                    channel=f"slack:{GITHUB}",
                    author=f"Ann {STRIPE}",
                ),
            ]
        )
        yield s


def test_identifier_fields_reach_no_derived_store_or_output(hostile_ids):
    s = hostile_ids
    hits = s.search("rota Fridays", k=10)
    recalled = s.recall(RecallContext("when is the rota"))
    shown = json.dumps([h.to_dict() for h in hits]) + recalled.block
    shown += json.dumps([c.source for c in recalled.candidates])
    s.ledger.append("event_confirmed", f"ev-{GITHUB}", {"by": STRIPE, "turns": {f"{SESSION}#{SESSION}:1": 1}})
    report = json.dumps(s.health().to_dict())
    for needle in (GITHUB, STRIPE):
        assert needle not in shown and needle not in report
    assert leaks(s.layout.root, [GITHUB, STRIPE]) == {}
    assert s.health().check("redaction").status.value == "ok"


def names_holding(root: Path, needles: list[str], *, skip: tuple[str, ...] = ("sessions",)) -> list[str]:
    """Paths under ``root`` (but the folders in ``skip``) whose name holds a needle."""
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.relative_to(root).parts[0] not in skip and any(n in p.name for n in needles)
    ]


def test_a_session_id_holding_a_credential_names_no_derived_file_and_no_bundle_path(hostile_ids, tmp_path):
    """The session file's name is the transcript's (it is the session id); its hash chain, a bundle's file names
    and its manifest are derived, and an import gives the session file its real name back."""
    from lca.bundle import export_bundle, import_bundle, verify_bundle

    s = hostile_ids
    assert s.health().check("transcript_chain").status.value == "ok"
    assert names_holding(s.layout.root, [GITHUB, STRIPE]) == []  # index/chains once named the session file
    assert s.layout.session_file(SESSION).exists()
    manifest = export_bundle(s.layout.root, tmp_path / "bundle")
    shipped = tmp_path / "bundle"
    assert names_holding(shipped, [GITHUB, STRIPE], skip=()) == []
    assert (
        GITHUB not in (shipped / "manifest.json").read_text() and STRIPE not in (shipped / "manifest.json").read_text()
    )
    assert any("[REDACTED:github-token]" in f.path for f in manifest.files)
    verify_bundle(shipped)
    import_bundle(shipped, tmp_path / "copy")
    with Substrate(tmp_path / "copy", embedder=FakeHashingEmbedder()) as copy:
        assert sorted(copy.transcript.session_ids()) == sorted(s.transcript.session_ids())
        assert [e.content for e in copy.transcript.read(SESSION).entries] == [
            e.content for e in s.transcript.read(SESSION).entries
        ]
        assert copy.health().check("transcript_chain").status.value == "ok"


def test_a_bundle_cannot_steer_a_session_file_to_another_sessions_name(hostile_ids, tmp_path):
    """A session file restores only to the name that ships as its own: lines claiming another session keep the
    file where the manifest put it."""
    import shutil

    from lca.bundle_trust import restored_path

    src = hostile_ids.layout.session_file(SESSION)
    shutil.copy(src, tmp_path / "x.jsonl")
    assert restored_path("sessions/x.jsonl", tmp_path / "x.jsonl") == "sessions/x.jsonl"
    shipped = f"sessions/{derived_id(src.name)}"
    assert restored_path(shipped, tmp_path / "x.jsonl") == f"sessions/{src.name}"
    assert restored_path(f"memory/{derived_id(src.name)}", tmp_path / "x.jsonl").startswith("memory/")


def test_a_derived_pointer_still_leads_to_the_verbatim_turn(hostile_ids):
    s = hostile_ids
    hit = next(h for h in s.search("rota moves Fridays", k=10) if "moves" in h.text)
    pointer = hit.pointer
    assert pointer.session_id == derived_id(SESSION) != SESSION and "[REDACTED:github-token]" in pointer.session_id
    turns = DerivedTurnLookups(s.transcript)
    assert turns.turn(pointer.session_id, pointer.entry_id) == (SESSION, f"{SESSION}:1")
    assert turns.entry_meta(pointer.session_id, pointer.entry_id) == {"project": "rota"}
    assert turns.reply_to(pointer.session_id, pointer.entry_id) == derived_id(f"{SESSION}:2")
    assert derived_id(f"{SESSION}:2") in turns.agent_turns(pointer.session_id)
    entry = TranscriptPointers(s.transcript).entry(f"{pointer.session_id}#{pointer.entry_id}")
    assert entry is not None and entry.content == "the rota moves to Fridays"
    # two ids redacting alike stay two: the digest of the verbatim value tells them apart
    assert derived_id(f"deploy-{GITHUB[:-1]}x") != derived_id(SESSION)
    assert derived_id("conv-26_session_1:3") == "conv-26_session_1:3"  # an id without a credential is itself


def test_ids_without_a_credential_are_looked_up_without_listing_the_transcript(hostile_ids):
    """Recall asks these for every candidate: only a derived id may cost a listing of the sessions."""
    s = hostile_ids
    listed = []
    transcript = s.transcript
    original = transcript.session_ids
    transcript.session_ids = lambda: listed.append(1) or original()  # type: ignore[method-assign]
    turns = DerivedTurnLookups(transcript)
    turns.agent_turns("plain"), turns.entry_meta("plain", "plain:1"), turns.reply_to("plain", "plain:1")
    assert listed == []
    turns.agent_turns(derived_id(SESSION))
    assert listed == [1]


def test_mapping_keys_are_derived_in_the_ledger_and_cycle_reports(tmp_path):
    from lca.consolidation.records import ConsolidationResult
    from lca.ledger import Ledger

    ledger = Ledger(tmp_path)
    ledger.append("event_confirmed", f"ev-{GITHUB}", {"by": "ann", "turns": {f"{SESSION}#{SESSION}:1": [STRIPE]}})
    held = ledger.path.read_text()
    assert GITHUB not in held and STRIPE not in held and derived_id(f"{SESSION}#{SESSION}:1") in held
    result = ConsolidationResult(
        "c1", "manual", 0.0, 1.0, "w", None, True, {SESSION: {"from": 1, "to": 2}}, (), (), (), (), (), (), None
    )  # a cycle's span is keyed by session id
    assert GITHUB not in json.dumps(result.to_dict()) and derived_id(SESSION) in result.to_dict()["span"]
    tree = derived_tree({"plain": [GITHUB, ("x", 1)]})
    assert tree == {"plain": ["[REDACTED:github-token]", ("x", 1)]}  # a tuple stays one


def test_locomo_and_longmemeval_ids_are_derived_in_the_index(tmp_path):
    locomo = tmp_path / "locomo.json"
    conversation = {
        "speaker_a": f"Ann {STRIPE}",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": f"Ann {STRIPE}", "dia_id": "D1:1", "text": "I moved to Lisbon."}],
    }
    locomo.write_text(json.dumps([{"sample_id": f"conv-{GITHUB}", "conversation": conversation, "qa": []}]))
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": [f"sess-{STRIPE}"],
        "haystack_dates": ["2023/05/30 (Tue) 20:00"],
        "haystack_sessions": [[{"role": "user", "content": "I adopted a cat", "has_answer": True}]],
        "answer_session_ids": [f"sess-{STRIPE}"],
    }
    lme = tmp_path / "lme.json.xz"
    with lzma.open(lme, "wt") as handle:
        json.dump([record], handle)
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder()) as s:
        for sessions, report in (import_locomo(locomo), import_longmemeval(lme)):
            s.import_sessions(sessions, report)
        hits = s.search("Lisbon cat", k=10)
        assert {h.text for h in hits} >= {"I adopted a cat"} and len(hits) == 2
        assert all(GITHUB not in json.dumps(h.to_dict()) and STRIPE not in h.text for h in hits)
        assert leaks(s.layout.root, [GITHUB, STRIPE]) == {}


# ---- case 5: error messages ---------------------------------------------------------------------------------


def test_an_error_message_never_holds_a_credential():
    error = RecordFormatError(f"unknown kind '{GITHUB}'", path="h.jsonl", line=3, field=f"meta.{STRIPE}")
    assert GITHUB not in str(error) and STRIPE not in str(error) and STRIPE not in (error.field or "")
    assert "[REDACTED:github-token]" in error.reason and "line 3" in str(error)
    assert GITHUB not in str(LCAError(f"no such session '{GITHUB}'"))


@pytest.fixture
def fake_model(monkeypatch):
    monkeypatch.setattr("lca.index.embedders.SentenceTransformerEmbedder", lambda *a, **k: FakeHashingEmbedder())
    monkeypatch.setenv("LCA_HOME", "/nonexistent/lca-test-home")


def run(*argv: str) -> tuple[int, str]:
    import protocols.cli as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main([*argv])
    return code, out.getvalue()


def test_refused_lines_are_quarantined_and_reported_without_their_credentials(tmp_path, fake_model):
    good = make_entry("s", 1, "an ordinary turn").to_wire()
    lines = []
    for field_name in ("kind", "v"):
        lines.append({**good, field_name: GITHUB})  # a bad value: the message used to quote it
    lines.append({**good, STRIPE: "an unknown field"})  # a bad field name
    nan = make_entry("s", 2, "x", meta={GITHUB: float("nan")}).to_wire()
    lines.append(nan)  # a meta key the refusal names
    late = make_entry("s", 3, "a turn with an odd time", timestamp=f"my password is {PASSWORD}!").to_wire()
    lines.append(late)  # accepted: the time is not a time
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = tmp_path / "store"
    _, ingested = run("ingest", str(path), "--store", str(store), "--quiet")
    assert ingested.count("lca: quarantined:") == 4 and "[REDACTED:" in ingested
    _, found = run("search", "odd time", "--store", str(store), "--json")
    assert "a turn with an odd time" in found
    _, health = run("health", "--json", "--store", str(store))
    assert json.loads(health)["checks"]
    for needle in (GITHUB, STRIPE, PASSWORD):
        assert needle not in ingested + found + health
    assert leaks(store, [GITHUB, STRIPE, PASSWORD]) == {}


# ---- health: a scan of every derived store -----------------------------------------------------------------


def test_health_fails_when_a_derived_store_holds_a_credential(tmp_path):
    with Substrate(tmp_path / "store", embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", 1, f"my token is {GITHUB}", author="Ann")])
        clean = s.health().check("redaction")
        assert clean.status.value == "ok" and clean.data.get("credentials") == {}
        # what the old chunker wrote: a speaker name holding a credential, unredacted, in a chunk's text
        text = f"{STRIPE}: see you at the rota"
        pointer = SourcePointer(SourceType.TRANSCRIPT, session_id="s", entry_id="s:9", char_end=18)
        s.index.add_chunks([Chunk(Chunk.make_id(text, pointer), text, text_digest(text), pointer)])
        s.index.flush()
        (s.layout.consolidation).mkdir(exist_ok=True)
        (s.layout.consolidation / "cycle-x.json").write_text(json.dumps({"spans": {f"s#{GITHUB}": 1}}))
        check = s.health().check("redaction")
    assert check.status.value == "fail"
    found = check.data["credentials"]
    assert found["texts.text"] == {"stripe-key": 1}
    assert any(where.startswith("index/lexical/") for where in found)  # the BM25 vocabulary
    assert found["consolidation/cycle-x.json"] == {"github-token": 1}  # a mapping key
    assert STRIPE not in check.detail and GITHUB not in json.dumps(check.data)
