"""The credential detector and its redaction, on a corpus of credential shapes made here (random
values from a seeded generator: no real or reusable key is written into the repository) and on
near-misses that must stay text."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import uuid
from pathlib import Path

import pytest

from lca.secrets import (
    MARKER,
    contains_secret,
    find_secrets,
    looks_random,
    maintained_plugins,
    redact,
    redact_tree,
    shannon_entropy,
)

RNG = random.Random(16)
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
REPO = Path(__file__).resolve().parents[2]


def draw(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


# the seven shapes, then the other shapes the old hand list caught (kept caught)
OPENAI = "sk-proj-" + draw(B62 + "-_", 20) + draw(B62, 28)
STRIPE = "sk_live_" + draw(B62, 24)
AWS_ID = "AKIA" + draw(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = draw(B64, 40)
GITHUB = "ghp_" + draw(B62, 36)
GOOGLE = "AIza" + draw(B62, 35)
PASSWORD = "hunter2-ish"
JWT = "eyJhbGciOiJIUzI1NiJ9." + draw(B62, 24) + "." + draw(B62 + "-_", 43)
SLACK = "xoxb-" + draw(string.digits, 12) + "-" + draw(B62, 24)
PEM_BODY = draw(B64, 64)
DB_PASSWORD = "pa" + draw(B62, 10)
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"

# (sentence with the credential, the credential as planted, the kind its marker names)
CASES = [
    (f"use the OpenAI key {OPENAI} for the batch job", OPENAI, "openai-key"),
    (f"Stripe live key: {STRIPE}", STRIPE, "stripe-key"),
    (f"the AWS access key id is {AWS_ID} in us-east-1", AWS_ID, "aws-access-key-id"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws-secret-key"),
    (f"and here is the other half, on its own: {AWS_SECRET}", AWS_SECRET, "aws-secret-key"),
    (f"my GitHub token {GITHUB} expires Friday", GITHUB, "github-token"),
    (f"maps key {GOOGLE}, restricted to our domain", GOOGLE, "google-api-key"),
    (f"my password is {PASSWORD} phrase, do not share it", PASSWORD, "password"),
    (f"Password: {PASSWORD}", PASSWORD, "password"),
    (f"the session token is {JWT}", JWT, "jwt"),
    (f"slack bot {SLACK}", SLACK, "slack-token"),
    (f"connect with postgres://admin:{DB_PASSWORD}@db.internal:5432/app", DB_PASSWORD, "url-password"),
    (PEM, PEM, "private-key"),  # the whole block goes, its header too
    ("API_KEY = abcdef123456", "abcdef123456", "api-key"),
]

SHA256 = hashlib.sha256(b"lca").hexdigest()
NEAR_MISSES = [
    "pneumonoultramicroscopicsilicovolcanoconiosis is a long English word",
    f"the file's digest:\n```\n{SHA256}\n```",  # a hash, not a credential: hex is never flagged
    f"commit {hashlib.sha1(b'lca').hexdigest()} fixed it",
    f"session {uuid.UUID(int=RNG.getrandbits(128))} resumed",
    "upgrade to v2.14.3-rc.1+build.20261201 before Friday",
    "the password policy changed last week",
    "the password is incorrect, try again",
    "my password is too short",
    "a token: 1500 were used; the budget is 1,200 tokens",
    "the secret is out",
    "the model HuggingFaceTB/SmolLM2-360M-Instruct runs on two cores",
    "see lca/consolidation/cycle.py and tests/lca/test_consolidation_e2e.py",
    "https://user@example.com/path and postgres://localhost:5432/app",
    "set the password: <your password here>",
    "the key is in TestConsolidationReadBackIsRetrievableAfterWrite",
    "task-risk-and-desk-management-for-the-long-running-project",
    # issue 49: near-misses of the shapes added then
    "the password policy is strict",
    "the password is incorrect! Wow, the password is Amazing!!",
    "the password is *not* right, and the password is #1 priority",
    "the password manager was $100 cheaper; the password was $100",
    "export PWD=/home/user/project OLDPWD=/tmp; pwd: shows the working directory; pwd = current_dir",
    "Basic English is simple; basic auth is enabled; Basic Income",
    "hf_hub_download(repo_id='x') and xai-grok-2 and sq0 and glpat- alone",
    "the token is CancellationTokenSource; the token is XMLHttpRequestFactory; the password is PowerPoint",
    "http://host:8080?email=a@b.com and redis://localhost:6379/0 and git+ssh://git@github.com:org/repo.git",
    "https://user@example.com:8080/path and https://example.com/@someone",
    "Microsoft.Extensions.DependencyInjection.ServiceCollectionContainerBuilderExtensions",
    f"{uuid.UUID(int=RNG.getrandbits(128))} and {hashlib.sha256(b'x').hexdigest()} and {hashlib.md5(b'x').hexdigest()}",
    r"C:\Users\me\Documents\report-2024.docx and ~/projects/lca/README.md and ../shared/data/locomo",
    "Python 3.11.4, numpy==1.26.4, node v20.10.0, release 2024.06.01-beta+exp.sha.5114f85",
    'password: "Enter your password here"',
    "the Authorization header carries Basic and a user:pass pair",
]


@pytest.mark.parametrize(("text", "secret", "kind"), CASES, ids=[c[2] + f"-{i}" for i, c in enumerate(CASES)])
def test_each_credential_shape_is_redacted_by_kind_never_by_value(text, secret, kind):
    out, findings = redact(text)
    assert secret not in out and f"[REDACTED:{kind}]" in out
    assert [f.kind for f in findings] == [kind]
    assert contains_secret(text) and not contains_secret(out)  # a marker is not a secret: redaction is stable
    assert redact(out) == (out, ())
    # the text around the credential survives
    before = text.split(secret)[0].strip()
    assert out.startswith(before)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay_text(text):
    assert redact(text) == (text, ())
    assert not contains_secret(text)


def test_the_prose_password_keeps_the_sentence_and_loses_only_the_value():
    assert redact("my password is hunter2-ish phrase")[0] == "my password is [REDACTED:password] phrase"
    assert redact("the password for staging was Tr0ub4dor&3.")[0] == "the password for staging was [REDACTED:password]."


def test_several_credentials_in_one_text_are_all_redacted_and_offsets_point_at_them():
    text = " and ".join(c[0] for c in CASES[:8])
    out, findings = redact(text)
    assert len(findings) == 8
    for case, finding in zip(CASES[:8], findings, strict=True):
        assert text[finding.start : finding.end] == case[1]
        assert case[1] not in out
    assert len(MARKER.findall(out)) == 8


# issue 49, case 3: shapes the detector missed or redacted in part; each planted credential must vanish whole
GITLAB = [draw(B62, 20) for _ in range(5)]
XAI_BODY = draw(B62, 80)
ZW_STRIPE = ("sk_live_" + draw(B62, 10), draw(B62, 14))  # two halves a zero-width space or a soft hyphen splits
BASIC = base64.b64encode(b"deploy:" + draw(B62, 12).encode()).decode()
MISSED_BEFORE = [
    ("gitlab-pat", f"push with glpat-{GITLAB[0]} today", GITLAB[0], "gitlab-token"),
    ("gitlab-deploy", f"deploy token gldt-{GITLAB[1]} here", GITLAB[1], "gitlab-token"),
    ("gitlab-runner", f"register with glrt-{GITLAB[2]}", GITLAB[2], "gitlab-token"),
    ("gitlab-job", f"CI_JOB_TOKEN glcbt-2a_{GITLAB[3]} expires", GITLAB[3], "gitlab-token"),
    ("gitlab-trigger", f"trigger glptt-{GITLAB[4]} now", GITLAB[4], "gitlab-token"),
    ("huggingface", f"HF token hf_{draw(string.ascii_letters, 34)} for the hub", "hf_", "huggingface-token"),
    ("xai", f"grok via xai-{XAI_BODY}", XAI_BODY[:12], "xai-key"),
    ("square", f"Square secret sq0csp-{draw(B62 + '-_', 43)}", "sq0csp-", "square-token"),
    (
        "discord",
        f"bot token MT{draw(B62, 24)}.{draw(B62, 6)}.{draw(B62 + '-_', 38)} in .env",
        "MT",
        "discord-bot-token",
    ),
    ("zero-width", f"key {ZW_STRIPE[0]}\u200b{ZW_STRIPE[1]} ok", ZW_STRIPE[1], "stripe-key"),
    ("soft-hyphen", f"key {ZW_STRIPE[0]}\u00ad{ZW_STRIPE[1]} ok", ZW_STRIPE[0], "stripe-key"),
    ("word-joiner", f"token g\u2060hp_{draw(B62, 36)} ok", "hp_", "github-token"),
    ("fullwidth", "ｓｋ＿ｌｉｖｅ＿" + "".join(chr(ord(c) + 0xFEE0) for c in draw(B62, 24)), "ｓｋ＿", "stripe-key"),
    ("redis-no-user", "cache at redis://:Xy7" + DB_PASSWORD + "@cache.internal:6379/0", "Xy7", "url-password"),
    ("at-in-url-password", "postgres://bob:p@ss9" + DB_PASSWORD + "@db.internal/app", "ss9", "url-password"),
    ("dollar", "password: $ecretP4ss-" + DB_PASSWORD, "ecretP4ss", "password"),
    ("hash", "password=#Tr0ub4dor-" + DB_PASSWORD, "Tr0ub4dor", "password"),
    ("star", "my password is *Tr0ub4dor" + DB_PASSWORD, "Tr0ub4dor", "password"),
    ("comma", "password: abc,123" + DB_PASSWORD, "123" + DB_PASSWORD, "password"),
    ("quoted-spaces", 'password: "open sesame 42 blue"', "sesame 42", "password"),
    ("spoken-quoted", "my password is 'correct horse battery staple' ok", "horse battery", "password"),
    ("pwd", "Server=db;Uid=sa;Pwd=Tr0ub4dor9;", "Tr0ub4dor9", "password"),
    ("pgpassword", "PGPASSWORD=" + DB_PASSWORD + " psql -h db", DB_PASSWORD, "password"),
    ("spanish", "mi contraseña es " + DB_PASSWORD + "!", DB_PASSWORD, "password"),
    ("german", "mein Passwort ist " + DB_PASSWORD, DB_PASSWORD, "password"),
    ("french", "mon mot de passe est " + DB_PASSWORD, DB_PASSWORD, "password"),
    ("portuguese", "minha senha é " + DB_PASSWORD, DB_PASSWORD, "password"),
    ("spoken-colon", "the password is: " + DB_PASSWORD, DB_PASSWORD, "password"),
    ("basic-auth", f"curl -H 'Authorization: Basic {BASIC}' https://x", BASIC, "basic-auth"),
    ("api-key-mixed-case", "the api key is ZqAbCdEfGhIjKlMn!", "ZqAbCdEfGhIjKlMn", "api-key"),
    ("random-case-password", "my password is ZqXgpstcbEoCVUCC!", "ZqXgpstcbEoCVUCC", "password"),
    ("exclaimed-password", "passwort ist ZqulcmuhoDFPpQHE!", "ZqulcmuhoDFPpQHE", "password"),
]


@pytest.mark.parametrize(
    ("text", "fragment", "kind"), [c[1:] for c in MISSED_BEFORE], ids=[c[0] for c in MISSED_BEFORE]
)
def test_shapes_missed_or_cut_before_are_redacted_whole(text, fragment, kind):
    out, findings = redact(text)
    assert fragment not in out and f"[REDACTED:{kind}]" in out, out
    assert redact(out) == (out, ())
    # nothing of the value is left beside the marker: no run of 3 key characters touches it
    assert not re.search(r"[A-Za-z0-9_-]{3}\[REDACTED|\][A-Za-z0-9_-]{3}", out), out


def test_a_password_ending_in_a_symbol_is_redacted_with_it_and_the_sentence_keeps_its_full_stop():
    assert redact("my password is Hunter22!")[0] == "my password is [REDACTED:password]"
    assert redact("my password is Hunter22!.")[0] == "my password is [REDACTED:password]."
    assert redact("(password: Tr0ub4dor9)")[0] == "(password: [REDACTED:password])"
    assert redact('password: "open sesame 42"')[0] == 'password: "[REDACTED:password]"'
    assert redact("password=abc123,user=bob")[0] == "password=[REDACTED:password],user=bob"


def test_offsets_point_into_the_original_text_when_invisible_or_fullwidth_characters_were_read_past():
    for text, planted in [
        (f"a {ZW_STRIPE[0]}\u200b{ZW_STRIPE[1]} b", f"{ZW_STRIPE[0]}\u200b{ZW_STRIPE[1]}"),
        (f"a {ZW_STRIPE[0]}\u00ad\u200d{ZW_STRIPE[1]}\u200b b", f"{ZW_STRIPE[0]}\u00ad\u200d{ZW_STRIPE[1]}"),
        (
            "é ｓｋ＿ｌｉｖｅ＿ＡＢＣｄｅｆ１２３４５６７８９０ｘｙ ok",
            "ｓｋ＿ｌｉｖｅ＿ＡＢＣｄｅｆ１２３４５６７８９０ｘｙ",
        ),
    ]:
        (finding,) = find_secrets(text)
        assert text[finding.start : finding.end] == planted
        assert redact(text)[0] == text.replace(planted, "[REDACTED:stripe-key]")


def test_text_with_invisible_fullwidth_or_accented_characters_and_no_credential_comes_back_as_is():
    for text in [
        "co\u00adoperation and re\u200bentry",
        "ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ １２３ and a no-break\u00a0space",
        "mi contraseña es muy segura; das Passwort ist falsch; cafe\u0301 ﬁne …",
        "\ufeffa byte-order mark, then ordinary words",
    ]:
        assert redact(text) == (text, ())


def test_random_tokens_are_caught_by_entropy_and_identifiers_are_not():
    rng = random.Random(7)
    tokens = ["".join(rng.choice(B64) for _ in range(40)) for _ in range(500)]
    caught = sum(looks_random(t) for t in tokens)
    assert caught >= 495, caught  # an AWS secret access key alone: 40 random base64 characters
    long_ones = ["".join(rng.choice(B62) for _ in range(64)) for _ in range(200)]
    assert all(looks_random(t) for t in long_ones)
    for word in ("ConsolidationResultRedactedToDictV2", "RashtraGauravTennisTournament2023", "A1b2" * 10):
        assert not looks_random(word), (word, shannon_entropy(word))


def test_the_maintained_plugins_cover_services_the_shapes_do_not_name():
    """detect-secrets' regex plugins (a dependency) are in use: their services are caught too."""
    assert {"twilio-api-key", "sendgrid-api-key", "gitlab-token", "npm-tokens", "pypi-token"} <= set(
        maintained_plugins()
    )
    others = {
        "twilio-api-key": "SK" + draw(string.ascii_lowercase + string.digits, 32),
        "sendgrid-api-key": "SG." + draw(B62, 22) + "." + draw(B62, 43),
        "gitlab-token": "glpat-" + draw(B62, 20),
        "pypi-token": "pypi-AgEIcHlwaS5vcmc" + draw(B62, 120),
    }
    for kind, secret in others.items():
        out, findings = redact(f"the deploy uses {secret} from the vault")
        assert secret not in out and [f.kind for f in findings] == [kind], (kind, out)


def test_redact_tree_redacts_every_string_and_keeps_keys_and_numbers():
    tree = {"claim": f"key {STRIPE}", "n": 3, "nested": [{"raw": f"password: {PASSWORD}"}, 1.5, None], "ok": "plain"}
    out = redact_tree(tree)
    assert STRIPE not in json.dumps(out) and PASSWORD not in json.dumps(out)
    assert out["n"] == 3 and out["nested"][1:] == [1.5, None] and out["ok"] == "plain"


def planted_secret_turns(path) -> list[tuple[str, str]] | None:
    """For a v2 scenario file, the (session channel, turn) pairs where the detector finds a secret; None for any
    other file. Scenario sets plant secret-shaped strings on purpose, only in private sessions."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl" else []
    try:
        scenarios = [json.loads(line) for line in lines if line.strip()]
    except ValueError:
        return None
    if not scenarios or any(s.get("schema_version") != 2 for s in scenarios):
        return None
    return [
        (session.get("channel"), turn["content"])
        for scenario in scenarios
        for session in scenario["sessions"]
        for turn in session["turns"]
        if find_secrets(turn["content"])
    ]


def test_no_false_positives_on_the_shipped_scenarios_and_fixtures():
    """The shipped conversations hold no credential but those planted on purpose in private sessions of v2 sets:
    the detector finds those and nothing else."""
    files = sorted((REPO / "data" / "scenarios").glob("*.jsonl")) + sorted((REPO / "data" / "fixtures").glob("*"))
    files += sorted((REPO / "data" / "insight").glob("*.jsonl"))  # the planted insight corpora
    assert files
    found = {}
    for path in files:
        planted = planted_secret_turns(path)
        if planted is not None:
            assert all(channel == "private" for channel, _ in planted), (path.name, planted)
            continue
        found[str(path.relative_to(REPO))] = find_secrets(path.read_text(encoding="utf-8"))
    assert {name: hits for name, hits in found.items() if hits} == {}
    generated = sorted((REPO / "data" / "scenarios").glob("study-v1*.jsonl"))
    for path in generated:  # one planted secret per generated scenario, so the detector is shown to find them
        scenarios = len(path.read_text(encoding="utf-8").splitlines())
        assert len(planted_secret_turns(path)) == scenarios, path.name


@pytest.mark.parametrize("token", [SLACK, OPENAI, GOOGLE, JWT], ids=["slack", "openai", "google", "jwt"])
@pytest.mark.parametrize("join", ["-", "_"])
def test_a_key_after_a_hyphen_or_underscore_is_still_a_key(token, join):
    """An identifier built around a key ("s-xoxb-...", a session id) hides it from a boundary that wants a word start
    (issue 49's fuzz run found a Slack token in a session id this way)."""
    out, findings = redact(f"s{join}{token}")
    assert findings and token[-12:] not in out
