"""Credentials in text: found, named by kind, and redacted. The transcript keeps them verbatim.

The transcript is the authority and is never rewritten; everything derived from it or shown
(search hits, recall's block and log, memory writes, the ledger, cycle reports) passes through
``redact`` first, which replaces each credential by a marker naming its kind,
``[REDACTED:stripe-key]``, never by any part of its value. ``contains_secret`` is the same
detection as a yes/no.

Detection has three layers, each because the others miss what it catches:

1. ``SECRET_SHAPES`` (``lca.secret_shapes``): vendor key formats with fixed prefixes (AWS, GitHub,
   GitLab, Stripe, Google, OpenAI, Anthropic, xAI, Hugging Face, Slack, Square, Discord, PEM private
   keys, JWTs), credentials in URLs and in ``Basic``/``Bearer`` headers, and credentials named in the
   text (``password: x``, ``pwd=x``, ``my password is x``, "mi contraseña es x", "mein Passwort ist x",
   ``aws_secret_access_key = x``). Conversations say "my password is ..." in prose, which code scanners
   do not look for. A named value is taken whole: quoted with its spaces, with a comma, a leading
   ``$``/``#``/``*`` or a trailing ``!``.
2. The maintained plugins of ``detect-secrets`` (Yelp, a dependency): its regex-based
   detectors for the many services this list does not name (Twilio, SendGrid, npm, PyPI,
   Mailchimp, ...). Its keyword and entropy plugins are not used: they look for quoted
   strings and assignments in source files, and their prose misses are what layers 1 and 3 are for.
   Where a plugin's pattern captures a key's prefix as its value (GitLab's ``glpat``), the finding
   runs on over the body.
3. An entropy check for long random tokens that no prefix announces, such as an AWS secret access
   key on its own: a run of 32 or more base64 characters (no ``-`` or ``_``, so identifiers and
   UUIDs split into short pieces) mixing upper case, lower case and digits, whose Shannon entropy
   is near that of random text of its length (a 40-character one is named ``aws-secret-key``, the
   shape of an AWS secret access key). Pure hex is never flagged, in a code block or not: a sha256
   or a git commit is a hash, and this store's own records are full of them.

All three read the text normalized (``normalized``): NFKC, so fullwidth ``ｓｋ＿ｌｉｖｅ＿`` reads as
``sk_live_``, and without zero-width characters (U+200B-U+200D, U+2060, U+FEFF) or soft hyphens (U+00AD),
so a key cannot hide by splitting; each finding then redacts the original characters it was read from.

What is not caught: a plain dictionary word given as a password in prose ("my password is
swordfish": a value needs a digit, a symbol or letters in random case, so that "the password is
incorrect" stays text), hex-only API keys without a keyword, and short random tokens without a keyword.
Measured false positives (``lca bench redaction``, ``results/examples/bench-redaction.json``): none on the
shipped scenarios and fixtures or on LoCoMo's 5,882 turns; 15 in the 106,035 distinct turns of
LongMemEval_S dev (105 M characters), before and after the shapes of issue 49 alike, half of them true (a
registry token, default ``admin`` passwords, a session token in a URL), the rest base64 images and
document ids. Cost: ~30-50 ns a character for text with no key-like run (most conversation; text that
needs normalizing, 0.2% of those turns, costs more), about 60 microseconds a chunk, and ``find_secrets``
is cached by text. A store's texts are scanned when written and not again by a reader running the same
detector (``lca.index.redaction``).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from lca import secret_shapes
from lca.secret_shapes import PLACEHOLDER, SECRET_SHAPES, strip_trailing, value_span


@dataclass(frozen=True)
class Finding:
    """One credential in a text: its kind and where it is. Never its value."""

    kind: str
    start: int
    end: int


def marker(kind: str) -> str:
    """What a redacted credential reads as."""
    return f"[REDACTED:{kind}]"


MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


# ---- layer 1: shapes (lca.secret_shapes) -------------------------------------------------
SECRET_PATTERNS = tuple(shape.pattern for shape in SECRET_SHAPES)


def _shape_findings(text: str, lowered: str, key_like: bool) -> Iterator[Finding]:
    hinted: dict[tuple[str, ...], bool] = {}  # shapes of one keyword share their hints: each set is looked for once
    for shape in SECRET_SHAPES:
        if shape.key_like and not key_like:
            continue
        if shape.hints not in hinted:
            hinted[shape.hints] = any(hint in lowered for hint in shape.hints)
        if not hinted[shape.hints]:
            continue
        for match in shape.pattern.finditer(text):
            value = match.group(shape.group)
            if value is None or (shape.accept is not None and not shape.accept(value)):
                continue
            if shape.group:
                yield Finding(shape.kind, *value_span(text, match.start(shape.group), match.end(shape.group)))
            else:
                yield Finding(shape.kind, match.start(), match.end())


# ---- layer 3: entropy ---------------------------------------------------------------------
ENTROPY_MIN_LENGTH = 32
# a base64 run standing alone: not part of a longer word with - or _ (an identifier, a UUID) and not
# after a dot (the path of a URL: "docs.example.com/Archives/2019/C157189/Report")
_TOKEN = re.compile(rf"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9+/]{{{ENTROPY_MIN_LENGTH},}}={{0,2}}(?![A-Za-z0-9+/=_-])")


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character distribution."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def entropy_threshold(length: int) -> float:
    """What a random base64 token of ``length`` reaches in 99 cases of 100: 0.83 of the most its
    length allows (4.15 bits at 32 characters, 4.42 at 40), capped at 4.6 for long tokens. Random
    40-character base64 scores 4.5-4.9; a CamelCase identifier with a number in it, 3.5-4.2."""
    return min(0.83 * math.log2(length), 4.6)


def looks_random(token: str) -> bool:
    """A long token mixing upper case, lower case and digits at random-text entropy; hex is a hash."""
    body = token.rstrip("=")
    if len(body) < ENTROPY_MIN_LENGTH or re.fullmatch(r"[0-9a-fA-F]+", body):
        return False
    upper = sum(c.isupper() for c in body)
    lower = sum(c.islower() for c in body)
    digits = sum(c.isdigit() for c in body)
    if min(upper, lower, digits) < 1:
        return False
    return shannon_entropy(body) >= entropy_threshold(len(body))


def _entropy_findings(text: str) -> Iterator[Finding]:
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if looks_random(token):
            kind = "aws-secret-key" if len(token) == 40 else "high-entropy-token"
            yield Finding(kind, match.start(), match.end())


# ---- layer 2: detect-secrets' maintained plugins -------------------------------------------
# Not credentials, or not in conversation: public IP addresses, and the plugins that only read
# quoted strings or assignments in source files (layers 1 and 3 cover those shapes in prose).
_UNUSED_PLUGINS = frozenset({"IPPublicDetector", "KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString"})


@dataclass(frozen=True)
class _Plugin:
    kind: str
    denylist: tuple[re.Pattern[str], ...]


@cache
def _plugins() -> tuple[_Plugin, ...]:
    """Each regex-based detect-secrets plugin as (kind, its patterns); () where it is not installed."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    except ImportError:
        return ()
    out = []
    plugin: Any  # a detect-secrets plugin class
    for secret_type, plugin in sorted(get_mapping_from_secret_type_to_class().items()):
        denylist = getattr(plugin, "denylist", None)  # a regex-based plugin's compiled patterns, a class attribute
        if plugin.__name__ in _UNUSED_PLUGINS or not isinstance(denylist, tuple | list):
            continue
        kind = re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")
        out.append(_Plugin(kind, tuple(denylist)))
    return tuple(out)


@cache
def _plugin_filters() -> tuple[Callable[[str], bool], ...]:
    """detect-secrets' own heuristics for values that only look like secrets (a UUID, a run like
    'abcdef', a template placeholder)."""
    try:
        from detect_secrets.filters import heuristic
    except ImportError:
        return ()
    names = ("is_sequential_string", "is_potential_uuid", "is_templated_secret")
    return tuple(getattr(heuristic, name) for name in names if hasattr(heuristic, name))


_KEY_TAIL = re.compile(r"[-_]?[A-Za-z0-9_-]{8,}")


def _plugin_findings(text: str) -> Iterator[Finding]:
    filters = _plugin_filters()
    for plugin in _plugins():
        for pattern in plugin.denylist:
            for match in pattern.finditer(text):
                # the value is the pattern's first non-empty group, as the plugins read it, else the match; a
                # group the key's body follows inside the match is its prefix ("glpat" of glpat-...): the
                # finding runs on to the body's end
                group = next((g for g in range(1, (pattern.groups or 0) + 1) if match.group(g)), 0)
                value = match.group(group)
                if (
                    value.strip()
                    and not PLACEHOLDER.search(strip_trailing(value))
                    and not any(f(value) for f in filters)
                ):
                    end = match.end(group)
                    tail = _KEY_TAIL.match(text, end, match.end()) if group else None
                    yield Finding(plugin.kind, match.start(group), tail.end() if tail else end)


def maintained_plugins() -> tuple[str, ...]:
    """The kinds detect-secrets contributes here (empty where it is not installed)."""
    return tuple(p.kind for p in _plugins())


# ---- the one entry point ------------------------------------------------------------------
# What a detect-secrets plugin can match without a key-like run of characters (see ``_key_like``).
_PLUGIN_HINTS = ("://", "private key", "putty-user-key-file", "ssh2 encrypted", "_authtoken", "hooks.slack", "xox")
_KEY_LIKE = re.compile(
    r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]{10})"
    r"(?:[A-Za-z0-9]{20}|(?=[A-Za-z0-9]*?[0-9])(?=[A-Za-z0-9]*?[A-Za-z])|[A-Za-z0-9][a-z0-9]*[A-Z])"
)


def _key_like(text: str) -> bool:
    """Whether ``text`` has a run of 10 or more letters and digits that is no plain word: it mixes
    letters and digits, has a capital past its first character, or is 20 long. Every plugin pattern
    but those named by ``_PLUGIN_HINTS`` and every token the entropy check flags holds one. Most
    conversation has none, and this one regex costs
    ~25 ns a character where the plugins' 40 patterns cost ~500."""
    return _KEY_LIKE.search(text) is not None


CACHED_TEXT_CHARS = 4096  # the cache keeps at most 4,096 texts of at most this length (16 MB)


def find_secrets(text: str) -> tuple[Finding, ...]:
    """Every credential in ``text``, overlapping finds merged into one; the kind is the most
    specific layer's (shapes, then detect-secrets, then entropy). Cached by text up to chunk size:
    recall asks about the same chunks turn after turn."""
    return _find_cached(text) if len(text) <= CACHED_TEXT_CHARS else _find(text)


# read as nothing: zero-width space, non-joiner and joiner, word joiner, byte-order mark, soft hyphen
_INVISIBLE_CHARS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
_INVISIBLE = dict.fromkeys(map(ord, _INVISIBLE_CHARS))
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


@dataclass(frozen=True)
class Normalized:
    """A text as the detector reads it, and for each of its characters the span of the original it came from."""

    text: str
    starts: list[int]
    ends: list[int]


def normalized(text: str) -> Normalized | None:
    """``text`` as the detector reads it: NFKC (fullwidth ``ｓｋ＿`` is ``sk_``, a no-break space a space) without
    zero-width characters or soft hyphens; ``None`` when that is ``text`` itself. Each character is normalized
    with the combining marks after it, so every character read maps back to a span of the original."""
    if text.isascii() or (unicodedata.is_normalized("NFKC", text) and not any(c in text for c in _INVISIBLE_CHARS)):
        return None
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = 0
    for run in _NON_ASCII.finditer(text):
        i = max(run.start() - 1, at)  # the ASCII letter a combining mark after it belongs to
        parts.append(text[at:i])
        starts.extend(range(at, i))
        ends.extend(range(at + 1, i + 1))
        while i < run.end():
            j = i + 1
            while j < run.end() and unicodedata.combining(text[j]):
                j += 1
            piece = unicodedata.normalize("NFKC", text[i:j].translate(_INVISIBLE))
            parts.append(piece)
            starts.extend([i] * len(piece))
            ends.extend([j] * len(piece))
            i = j
        at = run.end()
    parts.append(text[at:])
    starts.extend(range(at, len(text)))
    ends.extend(range(at + 1, len(text) + 1))
    return Normalized("".join(parts), starts, ends)


def _find(text: str) -> tuple[Finding, ...]:
    if not text:
        return ()
    read = normalized(text)
    if read is None:
        return _find_in(text)
    # found in the text as read, each finding redacts the original characters it was read from
    return tuple(Finding(f.kind, read.starts[f.start], read.ends[f.end - 1]) for f in _find_in(read.text))


def _find_in(text: str) -> tuple[Finding, ...]:
    lowered = text.lower()
    key_like = _key_like(text)
    layers = (
        _shape_findings(text, lowered, key_like),
        _plugin_findings(text) if key_like or any(hint in lowered for hint in _PLUGIN_HINTS) else iter(()),
        _entropy_findings(text) if key_like else iter(()),
    )
    found = sorted(
        (
            (f.start, -f.end, layer, f)
            for layer, finds in enumerate(layers)
            for f in finds
            if f.end > f.start and not MARKER.fullmatch(text, f.start, f.end)
        ),
        key=lambda row: row[:3],
    )
    merged: list[tuple[int, Finding]] = []
    for _, _, layer, f in found:
        if merged and f.start < merged[-1][1].end:
            best, last = merged[-1]
            kind = f.kind if layer < best else last.kind
            merged[-1] = (min(layer, best), Finding(kind, last.start, max(last.end, f.end)))
        else:
            merged.append((layer, f))
    return tuple(f for _, f in merged)


_find_cached = lru_cache(maxsize=4096)(_find)


def redact(text: str) -> tuple[str, tuple[Finding, ...]]:
    """``text`` with each credential replaced by ``[REDACTED:<kind>]``, and what was found (the
    findings' offsets are into the original text). Text without a credential comes back as is."""
    findings = find_secrets(text)
    if not findings:
        return text, ()
    parts, at = [], 0
    for f in findings:
        parts += [text[at : f.start], marker(f.kind)]
        at = f.end
    parts.append(text[at:])
    return "".join(parts), findings


def holds_redaction(text: str) -> bool:
    """Whether ``text`` is derived text a credential was redacted from (it holds a ``[REDACTED:...]`` marker)."""
    return MARKER.search(text) is not None


def redacted(text: str) -> str:
    """``redact`` without the findings."""
    return redact(text)[0]


def contains_secret(text: str) -> bool:
    """Whether ``redact`` would change ``text``."""
    return bool(find_secrets(text))


def _source_digest() -> str | None:
    """A digest of this module's source and of its shapes' (``lca.secret_shapes``)."""

    digest = hashlib.sha256()
    try:
        for source in (Path(__file__), Path(secret_shapes.__file__)):
            digest.update(source.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


_SOURCE_DIGEST = _source_digest()  # read when the module is loaded: the code running, not a later upgrade's


@cache
def detector_fingerprint() -> str | None:
    """Which detector this is: a digest of this module's and ``lca.secret_shapes``' source and of the
    detect-secrets plugins' patterns in use. A store records it for the texts it wrote after finding nothing in them (``lca.index.redaction``); a
    reader with the same fingerprint need not scan those texts again, since redaction is idempotent. Any edit
    here changes it, so a reader then scans again. ``None`` where the source could not be read: nothing is
    then taken as already redacted."""
    if _SOURCE_DIGEST is None:
        return None
    plugins = "\n".join(f"{p.kind}:{pattern.pattern}" for p in _plugins() for pattern in p.denylist)
    return hashlib.sha256(f"{_SOURCE_DIGEST}\n{plugins}".encode()).hexdigest()[:16]


def redact_tree(value: Any) -> Any:
    """A JSON-like value with every string in it redacted (mapping keys are left: they are ids)."""
    if isinstance(value, str):
        return redacted(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value
