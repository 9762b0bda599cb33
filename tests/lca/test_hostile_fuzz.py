"""Issue 49's fuzz run: generated hostile transcripts, memory files, bundles and command lines (2,000 examples in
all, ``hypothesis``), each against a fresh store through the command line a user runs. Every example must give
no traceback, write nothing outside its store, and leave no planted credential in any derived byte (catalog,
faiss, BM25, logs, ledger, reports, bundles' manifests and file names, every derived file's name, stdout, stderr).
The verbatim transcript (``sessions/``, whose file names are its session ids),
the quarantined raw lines and the user's own memory files are the inputs themselves and are not scanned."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protocols.cli as cli
from lca.bundle import MANIFEST, _canonical_id
from lca.memory import render_memory
from lca.types import EntryKind, TranscriptEntry
from tests.conftest import make_fact
from tests.fakes import FakeHashingEmbedder

pytestmark = pytest.mark.slow

B62 = string.ascii_letters + string.digits
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


def examples(count: int) -> int:
    """``count`` examples (2,000 over the four tests); ``LCA_FUZZ_SCALE`` shrinks a local run, never CI's."""
    return max(1, round(count * float(os.environ.get("LCA_FUZZ_SCALE", "1"))))


# ---- planted credentials: the secret as written, and a distinctive part of it that must not survive ---------


@st.composite
def credentials(draw) -> tuple[str, str]:
    rng = random.Random(draw(st.integers(0, 2**32)))  # real credentials are random; a drawn "000..." is not one
    body = "".join(rng.choice(B62) for _ in range(36))
    kind = draw(
        st.sampled_from(["github", "aws", "stripe", "slack", "gitlab", "huggingface", "password", "pem", "url"])
    )
    if kind == "github":
        return "ghp_" + body, body[-20:]
    if kind == "aws":
        key = "AKIA" + body[:16].upper()
        return key, key
    if kind == "stripe":
        return "sk_live_" + body[:24], body[:24]
    if kind == "slack":
        return f"xoxb-{body[:12]}-{body[12:]}", body[12:]
    if kind == "gitlab":
        return "glpat-" + body[:20], body[:20]
    if kind == "huggingface":
        return "hf_" + body[:34], body[:34]
    if kind == "password":
        password = "Zq" + body[:14] + "!"
        lead = draw(st.sampled_from(["my password is", "the api key is", "password:", "passwort ist"]))
        gap = draw(st.sampled_from([" ", "\n", "\n\n", " \n"]))
        return f"{lead}{gap}{password}", password[:-1]
    if kind == "pem":
        lines = [body + body[:28]] * draw(st.integers(2, 6))
        pem = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"
        return pem, body
    return f"postgres://admin:{body[:18]}@db.internal:5432/app", body[:18]


def prose(draw, secret: str) -> str:
    """Ordinary text around the secret, with newlines where a chunker would like to cut."""
    words = draw(
        st.lists(st.sampled_from("the deploy went fine we talked about keys and rotas\n".split(" ")), max_size=60)
    )
    cut = draw(st.integers(0, len(words)))
    return " ".join(words[:cut]) + "\n" + secret + "\n" + " ".join(words[cut:])


# ---- one sandbox per example -------------------------------------------------------------------------------


class Sandbox:
    """A temporary root holding the inputs, the store, and an outside file hostile inputs aim at."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="lca-fuzz-"))
        self.inputs = self.root / "in"
        self.inputs.mkdir()
        self.store = self.root / "store"
        self.outside = self.root / "outside.txt"
        self.outside.write_text("outside the store: OUTSIDE-SENTINEL-7f3a\n", encoding="utf-8")
        self.output = io.StringIO()
        self.codes: list[int] = []

    def run(self, *argv: str) -> int:
        # a relative path in argv resolves inside the sandbox, which the snapshot watches
        with (
            contextlib.chdir(self.root),
            contextlib.redirect_stdout(self.output),
            contextlib.redirect_stderr(self.output),
        ):
            code = cli.main([*argv])
        assert code in (0, 1, 2), (argv, code)
        self.codes.append(code)
        return code

    def seed_store(self) -> None:
        """A store holding one ordinary turn, made through ``lca ingest``."""
        line = TranscriptEntry(
            id="s:1",
            session_id="s",
            agent_id="agent-fuzz",
            kind=EntryKind.USER_TURN,
            timestamp="2026-01-01T00:00:00",
            content="a first turn",
        ).to_wire()
        (self.inputs / "h.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
        self.run("ingest", str(self.inputs / "h.jsonl"), "--store", str(self.store), "--quiet")

    def snapshot(self, *made: Path) -> dict[str, str]:
        """Every file outside the store and the folders a command was asked to make, with its sha256 (what an
        example must never change)."""
        out = {}
        for path in sorted(self.root.rglob("*")):
            if any(folder in path.parents or path == folder for folder in (self.store, *made)) or path.is_dir():
                continue
            out[str(path.relative_to(self.root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "link"
            )
        return out

    def derived_bytes(self, inputs: set[Path] = frozenset()) -> list[tuple[str, bytes]]:
        out = [("output", self.output.getvalue().encode("utf-8", "surrogateescape"))]
        for path in self.root.rglob("*"):
            if path.is_symlink() or not path.is_file() or path in inputs or self.inputs in path.parents:
                continue
            relative = path.relative_to(self.root).as_posix()
            if relative.startswith(("store/sessions/", "outside")):
                continue  # the verbatim transcript (its file names are its session ids) is what they redact from
            out.append((f"the name {relative}", relative.encode("utf-8", "surrogateescape")))  # names are derived too
            if path.suffix == ".bin" or ("/sessions/" in relative and "bundle" in relative):
                continue  # quarantined raw lines and a bundle's copy of the transcript are the transcript's bytes
            out.append((relative, path.read_bytes()))
        return out

    def assert_clean(
        self, needles: list[str], before: dict[str, str], inputs: set[Path] = frozenset(), made: tuple[Path, ...] = ()
    ) -> None:
        assert "Traceback" not in self.output.getvalue(), self.output.getvalue()[-2000:]
        assert self.snapshot(*made) == before, "a file outside the store was written"
        assert "OUTSIDE-SENTINEL" not in self.output.getvalue()
        for name, data in self.derived_bytes(inputs):
            lowered = data.lower()
            for needle in needles:
                assert needle.lower().encode() not in lowered, f"planted credential {needle!r} in {name}"
            assert b"outside-sentinel" not in lowered, f"an outside file's content reached {name}"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(autouse=True)
def fake_model(monkeypatch):
    """The fuzz run exercises parsing, storage and redaction; the embedder is a fake (named so) for speed."""
    monkeypatch.setattr("lca.index.embedders.SentenceTransformerEmbedder", lambda *a, **k: FakeHashingEmbedder())
    monkeypatch.setenv("LCA_HOME", "/nonexistent/lca-fuzz-home")


def read_everything(box: Sandbox) -> None:
    box.run("search", "password key deploy", "--store", str(box.store))
    box.run("recall", "what is the api key", "--store", str(box.store), "--json")
    box.run("health", "--json", "--store", str(box.store))


# ---- hostile transcripts ----------------------------------------------------------------------------------

PLACES = ("content", "content", "session_id", "id", "channel", "author", "meta_key", "meta_value", "ts", "kind", "v")


@st.composite
def hostile_lines(draw) -> tuple[list[str], list[str]]:
    lines, needles = [], []
    for n in range(draw(st.integers(1, 4))):
        secret, needle = draw(credentials())
        place = draw(st.sampled_from(PLACES))
        flat = secret.replace("\n", " ")
        session = f"s-{flat[:60]}" if place == "session_id" else "s-fuzz"
        entry = TranscriptEntry(
            id=f"{session}:{flat[:80]}" if place == "id" else f"{session}:{n}",
            session_id=session,
            agent_id="agent-fuzz",
            kind=EntryKind.USER_TURN,
            timestamp=f"2026-01-01T00:00:{n:02d}",
            channel=f"slack:{flat[:80]}" if place == "channel" else "cli",
            author=flat[:80] if place == "author" else "user",
            content=prose(draw, secret) if place.startswith("content") else "an ordinary turn about rotas",
            meta={flat[:80]: 1} if place == "meta_key" else ({"note": secret} if place == "meta_value" else {}),
        )
        wire = entry.to_wire()
        if place in ("ts", "kind", "v"):  # a malformed field whose value is the credential: the error must not echo it
            wire[place] = flat
        if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:
            wire[flat[:40]] = "unknown field"
        lines.append(json.dumps(wire, ensure_ascii=draw(st.booleans())))
        needles.append(needle)
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=80)).replace("\n", " "))
    return lines, needles


@settings(FUZZ, max_examples=examples(1000))
@given(case=hostile_lines())
def test_hostile_transcripts(case):
    lines, needles = case
    box = Sandbox()
    try:
        path = box.inputs / "history.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        before = box.snapshot()
        box.run("ingest", str(path), "--store", str(box.store), "--quiet")
        exported = box.root / "export.bundle"
        if box.store.exists():
            read_everything(box)
            box.run("bundle", "export", str(exported), "--store", str(box.store), "--quiet")
        box.assert_clean(needles, before, made=(exported,))
    finally:
        box.close()


# ---- hostile memory files ---------------------------------------------------------------------------------


@st.composite
def hostile_memory(draw) -> tuple[str, str, str]:
    secret, needle = draw(credentials())
    shape = draw(st.sampled_from(["valid", "valid", "broken", "directory", "symlink-out", "symlink-loop", "huge-name"]))
    return shape, secret, needle


@settings(FUZZ, max_examples=examples(400))
@given(case=hostile_memory(), body=st.text(max_size=200))
def test_hostile_memory_files(case, body):
    shape, secret, needle = case
    box = Sandbox()
    try:
        box.seed_store()
        memory = box.store / "memory"
        memory.mkdir(exist_ok=True)
        planted: set[Path] = set()
        name = "m-" + ("x" * 300 if shape == "huge-name" else "fuzz")
        target = memory / f"{name[: 255 - 3]}.md"
        if shape == "valid":
            target.write_text(render_memory(make_fact("m-fuzz"), body + "\n" + secret), encoding="utf-8")
        elif shape == "broken":
            target.write_text("---\n" + body + "\n" + secret, encoding="utf-8", errors="surrogatepass")
        elif shape == "directory":
            target.mkdir()
        elif shape == "symlink-out":
            os.symlink(box.outside, target)
        elif shape == "symlink-loop":
            os.symlink(target, target)
        else:
            target.write_text(render_memory(make_fact("m-fuzz"), secret), encoding="utf-8")
        if target.is_file() and not target.is_symlink():
            planted.add(target)
        exported = box.root / "export.bundle"
        before = box.snapshot(exported)
        box.run("ingest", "--store", str(box.store), "--quiet")
        read_everything(box)
        box.run("reindex", "--store", str(box.store), "--quiet")
        box.run("bundle", "export", str(exported), "--store", str(box.store), "--quiet")
        copies = {
            p for p in exported.rglob("*.md") if p.is_file() and p.read_bytes() in {q.read_bytes() for q in planted}
        }
        box.assert_clean([needle], before, inputs=planted | copies, made=(exported,))
    finally:
        box.close()


# ---- hostile bundles --------------------------------------------------------------------------------------

HOSTILE_PATHS = st.sampled_from(
    [
        "{outside}",
        "../../outside.txt",
        "sessions/../../../outside.txt",
        "/etc/passwd",
        "sessions/./s.jsonl",
        "sessions//s.jsonl",
        "sessions/link.jsonl",
        "memory/\x00.md",
        "",
    ]
)


@settings(FUZZ, max_examples=examples(300))
@given(path=HOSTILE_PATHS, extra=st.booleans(), symlink=st.booleans(), mode=st.sampled_from(["replica", "new-agent"]))
def test_hostile_bundles(path, extra, symlink, mode):
    box = Sandbox()
    try:
        box.seed_store()
        bundle = box.root / "b.bundle"
        box.run("bundle", "export", str(bundle), "--store", str(box.store), "--quiet")
        manifest = json.loads((bundle / MANIFEST).read_text())
        hostile = path.format(outside=box.outside)
        manifest["files"][0]["path"] = hostile
        if symlink:
            link = bundle / manifest["files"][0]["part"] / "sessions" / "link.jsonl"
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(box.outside, link)
        if extra:
            (bundle / "memory" / "extra.txt").write_text("not listed", encoding="utf-8")
        body = {k: v for k, v in manifest.items() if k != "bundle_id"}
        manifest["bundle_id"] = _canonical_id(body)  # an attacker can recompute the hash: integrity is not authenticity
        (bundle / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        before = box.snapshot(box.root / "target")
        verified = box.run("bundle", "verify", str(bundle), "--store", str(box.root / "target"))
        imported = box.run(
            "bundle", "import", str(bundle), "--store", str(box.root / "target"), "--mode", mode, "--quiet"
        )
        box.assert_clean([], before, made=(box.root / "target",))
        if hostile not in ("sessions/./s.jsonl", "sessions//s.jsonl") or symlink or extra:
            assert verified == 2 and imported == 2, (hostile, symlink, extra, box.output.getvalue()[-600:])
    finally:
        box.close()


# ---- hostile command lines --------------------------------------------------------------------------------

COMMANDS = [
    ["search", "x"],
    ["recall", "x"],
    ["health"],
    ["reindex"],
    ["ingest"],
    ["events", "list"],
    ["events", "confirm"],
    ["ledger"],
    ["bundle", "verify"],
    ["bundle", "export"],
    ["migrate"],
    ["identity", "set", "user"],
]
VALUES = st.sampled_from(["-1", "0", "", "nan", "1e309", "{store}", "{outside}", "{store}/sessions", "/dev/null", "-k"])
FLAG_NAMES = ("-k", "--limit", "--budget", "--store", "--file", "--config", "--by", "--json", "--format")
FLAGS = st.sampled_from(FLAG_NAMES)


@settings(FUZZ, max_examples=examples(300))
@given(
    command=st.sampled_from(COMMANDS),
    args=st.lists(st.tuples(FLAGS, VALUES), max_size=3),
    positional=st.lists(VALUES, max_size=2),
    secret=credentials(),
)
def test_hostile_command_lines(command, args, positional, secret):
    box = Sandbox()
    try:
        box.seed_store()
        fill = {"store": box.store, "outside": box.outside}
        argv = [*command, *(v.format(**fill) for v in positional)]
        for flag, value in args:
            argv += [flag, value.format(**fill)]
        argv += ["--by", secret[0].replace("\n", " ")[:60]] if command[0] == "events" else []
        # a folder argv names that did not exist may be made (a migration's target, an export); nothing else
        named = [box.root / v for v in argv if v and v not in FLAG_NAMES and not (box.root / v).exists()]
        made = (*named, *(Path(f"{p}.bundle") for p in named))
        before = box.snapshot(*made)
        try:
            box.run(*argv, "--store", str(box.store)) if "--store" not in argv else box.run(*argv)
        except SystemExit as exc:  # argparse's own usage error: one usage line and exit 2, never a traceback
            assert exc.code == 2
        box.assert_clean([secret[1]], before, made=made)
    finally:
        box.close()
