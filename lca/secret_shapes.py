"""The credential shapes ``lca.secrets`` looks for itself (its layer 1), and how a named value is read.

Vendor key formats with fixed prefixes (AWS, GitHub, GitLab, Stripe, Google, OpenAI, Anthropic, xAI, Hugging
Face, Slack, Square, Discord, PEM private keys, JWTs), credentials in URLs and ``Basic``/``Bearer`` headers, and
credentials named in the text: ``password: x``, ``pwd=x``, ``PGPASSWORD=x``, ``my password is x`` and its
Spanish, German, French, Portuguese and Dutch phrasings, ``api key: x``. A named value is read whole: quoted with
its spaces, with a comma or a ``!`` inside or at its end, starting with ``$``, ``#`` or ``*``; what only looks
like one (a template, a variable, a mask, a path, a price, a word) is ``PLACEHOLDER`` or refused by the shape's
``accept``. The detector matches them on normalized text (``lca.secrets.normalized``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretShape:
    """A credential shape: ``group`` is the part that is the secret (0: the whole match); ``hints``
    are lowercase substrings one of which any match contains (a cheap test before the regex);
    ``accept`` vets the value where the pattern alone would flag ordinary text."""

    kind: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]
    group: int = 0
    accept: Callable[[str], bool] | None = None
    key_like: bool = False  # the value is a key-like run (``_key_like``): skipped in text without one


# a value that names no credential: a template, a variable ($DB_PASSWORD, ${X}, $(cmd), $password), a mask
# (***, xxx), an emphasis (*not*), a hashtag, a price, a call or lookup in code, an empty value, or a variable
# named like the keyword ("this.password = password"). "$ecretP4ss", "#Tr0ub4dor" and "*Tr0ub4dor" are values.
PLACEHOLDER = re.compile(
    r"^(?:[\[<{%]|\$[{(]|(?-i:\$(?:[A-Z_][A-Z0-9_]*|[a-z_]+|\d))$|\$\d+(?:[.,]\d+)*$|\*{3}|\*+$"
    r"|[*_]+[A-Za-z ]+[*_]+$|#[A-Za-z]*$|x{3,}|\.{3}|[\w.]+[(\[]|your[_ -])"
    r"|^(?:none|null|nil|true|false|redacted|required|changeme|password|passwd|secret|token|username|user)$",
    re.I,
)
_PATH = re.compile(r"^(?:~|\.{1,2})?/[^/\s]*/|^[A-Za-z]:\\")  # /home/me/x, ~/x/y, C:\x: a file, not a password
_PROSE_VALUE = re.compile(r"(?i)\b(?:password|enter|your|here)\b")  # "Enter password", "your key here"
_TRAILING = ".,;:!?)]}'\"`"
_QUOTES = "\"'`"


def strip_trailing(value: str) -> str:
    return value.rstrip(_TRAILING)


def value_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Where a named value is: inside its quotes when quoted (spaces and all), else without the sentence's
    punctuation after it (a full stop, a comma, a closing bracket it did not open) but with the rest: a
    password ending in ``!`` or ``)`` is redacted whole."""
    if end - start >= 2 and text[start] in _QUOTES and text[end - 1] == text[start]:
        return start + 1, end - 1
    if start < end and text[start] in _QUOTES:
        start += 1
    while end > start:
        last = text[end - 1]
        value = text[start:end]
        if last in ".,;:?" + _QUOTES or (last in ")]}" and value.count(last) > value.count("([{"[")]}".index(last)])):
            end -= 1
        else:
            break
    return start, end


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] in _QUOTES and value[-1] == value[0] else value


def _assigned_value(value: str) -> bool:
    """``password: x``: anything but a placeholder, a marker or a file path (quoted, any words but a prompt's)."""
    value = strip_trailing(_unquoted(value)).lstrip(_QUOTES)
    if " " in value and _PROSE_VALUE.search(value):
        return False
    return len(value) >= 4 and not PLACEHOLDER.search(value) and not _PATH.search(value)


def _random_case(value: str, exclaimed: bool = False) -> bool:
    """Letters whose case changes at random: two lower-to-upper steps or more, and lower-case runs shorter on
    average than a word's, a little longer beside capitals side by side (``ZqXgpstcbEoCVUCC``; not
    ``PowerPoint``, ``XMLHttpRequestFactory`` or ``ConfigurationManagerAppSettingsKey``). Ending in ``!`` (a
    symbol, or an exclamation: "the password is incorrect!"), one step inside the word is enough."""
    runs = re.findall(r"[a-z]+", value)
    steps = len(re.findall(r"[a-z][A-Z]", value))
    if exclaimed and steps:
        return True
    if steps < 2 or not runs:
        return False
    mean_run = sum(map(len, runs)) / len(runs)
    return mean_run < 3.5 or (mean_run < 4.5 and re.search(r"[A-Z]{2}", value) is not None)


def _exclaimed(value: str) -> bool:
    return _unquoted(value).rstrip(".,;:?)]}" + _QUOTES).endswith("!")


def _spoken_password(value: str) -> bool:
    """``my password is x`` in prose: a value with a digit or a symbol, or letters in random case (a plain
    word is more often a description, "the password is incorrect", than the password); quoted words, three
    or more."""
    word = strip_trailing(_unquoted(value)).lstrip(_QUOTES)
    if len(word) < 4 or PLACEHOLDER.search(word):
        return False
    return (
        any(not (c.isalpha() or c.isspace()) for c in word)
        or len(word.split()) >= 3
        or _random_case(word, _exclaimed(value))
    )


def _token_value(value: str) -> bool:
    """``api key: x``, ``token is x``: a key-like value, 12 characters or more, of letters and digits or of
    letters in random case (not "token: 1500", "the secret is out" or a CamelCase name)."""
    word = strip_trailing(value).lstrip(_QUOTES)
    if len(word) < 12 or " " in word or PLACEHOLDER.search(word) or not any(c.isalpha() for c in word):
        return False
    return any(c.isdigit() for c in word) or _random_case(word, _exclaimed(value))


def _pwd_value(value: str) -> bool:
    """``pwd=x``: as ``password=x``, but ``pwd`` is also the working directory and a variable in code
    (``pwd = current_dir``): a value with a digit or a symbol other than ``_`` and ``.``."""
    return _assigned_value(value) and any(not (c.isalpha() or c in "_.") for c in strip_trailing(_unquoted(value)))


def _url_password(value: str) -> bool:
    """The password of ``scheme://user:password@host``: not a placeholder, not a port."""
    return _assigned_value(value) and not re.fullmatch(r"\d{1,5}", value)


def _basic_credentials(value: str) -> bool:
    """``Basic <base64>``: decodes to printable ``user:password`` (an English word after "basic" does not)."""

    if len(value) % 4:
        return False
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded and len(decoded) >= 3 and decoded.isprintable()


_PASSWORD_HINTS = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pass phrase",
    "contrase",
    "passwort",
    "kennwort",
    "mot de passe",
    "senha",
    "wachtwoord",
)
# the word in English (PGPASSWORD too), Spanish, German, French, Portuguese and Dutch
_PASSWORD_WORDS = (
    r"(?<![A-Za-z0-9])(?:(?:pg)?password|passwd|passphrase|passcode|pass\s+phrase"
    r"|contrase[ñn]a|passwort|kennwort|mot\s+de\s+passe|senha|wachtwoord)"
)
# "is" in those languages (Italian says "password è"): "la contraseña es", "das Passwort ist", "est", "é"
_SPOKEN_VERBS = r"(?:is|was|will\s+be|became|(?:is\s+)?now|es|era|ist|lautet|war|est|était|é|è)"
_SPOKEN_OF = r"(?:for|of|to|on|de|para|für|pour|voor|per)"
_TOKEN_WORDS = (
    r"(?<![A-Za-z0-9])(?:api[_ .-]?key|api[_ .-]?token|access[_ .-]?token|auth[_ .-]?token|secret[_ .-]?key|client[_ .-]?secret"
    r"|bearer[_ .-]?token|private[_ .-]?token|token|secret)"
)
# a named value: quoted (spaces and all), or a run up to a space, quote or semicolon; a comma inside it is
# kept unless what follows names another field ("pw=a,b" is one value; "pw=a,user=b" two)
_VALUE = r"""("[^"\n]{1,100}"|'[^'\n]{1,100}'|`[^`\n]{1,100}`|["'`]?[^\s"'`,;]+(?:,(?![^\s"'`,;]*[=:])[^\s"'`,;]+)*)"""
_KEY_START = r"(?<![A-Za-z0-9])"  # a key may follow a hyphen or underscore: "s-xoxb-...", "id_ghp_..."

SECRET_SHAPES: tuple[SecretShape, ...] = (
    SecretShape(
        "private-key",
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY((?: BLOCK)?)-----"
            r"(?:[\s\S]*?-----END \1PRIVATE KEY\2-----|(?:\s+[A-Za-z0-9+/=]{8,})*)"
        ),
        ("private key",),
    ),
    SecretShape(
        "aws-access-key-id",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("akia", "asia", "abia", "acca", "a3t"),
        key_like=True,
    ),
    SecretShape(
        "aws-secret-key",
        re.compile(
            r"(?i:secret)[_ .-]?(?i:access)?[_ .-]?(?i:key)[\"']?\s*(?:[:=]|(?i:is))\s*[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        ("secret",),
        group=1,
    ),
    SecretShape(
        "github-token",
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        key_like=True,
    ),
    SecretShape(
        "stripe-key",
        re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("k_live_", "k_test_"),
        key_like=True,
    ),
    SecretShape("google-api-key", re.compile(rf"{_KEY_START}AIza[0-9A-Za-z_\-]{{35}}"), ("aiza",), key_like=True),
    SecretShape("anthropic-key", re.compile(rf"{_KEY_START}sk-ant-[A-Za-z0-9_\-]{{20,}}"), ("sk-ant-",), key_like=True),
    SecretShape("openai-key", re.compile(rf"{_KEY_START}sk-[A-Za-z0-9_\-]{{20,}}"), ("sk-",), key_like=True),
    SecretShape("slack-token", re.compile(rf"{_KEY_START}xox[abposr]-[A-Za-z0-9-]{{10,}}"), ("xox",)),
    SecretShape(  # the whole token (detect-secrets' pattern names the prefix as its value); the boundary is
        # looked behind after "gl", so the regex engine can search for the literal
        "gitlab-token",
        re.compile(r"gl(?<![A-Za-z0-9_-]gl)(?:pat|dt|rt|cbt|ptt|ft|soat|imt|agent|oas)-[A-Za-z0-9_-]{20,}"),
        ("gl",),
    ),
    SecretShape("gitlab-token", re.compile(rf"{_KEY_START}GR1348941[A-Za-z0-9_-]{{20,}}"), ("gr1348941",)),
    SecretShape("huggingface-token", re.compile(rf"{_KEY_START}hf_[A-Za-z0-9]{{30,}}"), ("hf_",), key_like=True),
    SecretShape("xai-key", re.compile(rf"{_KEY_START}xai-[A-Za-z0-9]{{32,}}"), ("xai-",), key_like=True),
    SecretShape("square-token", re.compile(rf"{_KEY_START}sq0(?:csp|atp|idp)-[A-Za-z0-9_-]{{22,}}"), ("sq0",)),
    SecretShape(
        "discord-bot-token",  # user id (base64), timestamp, signature: 27 characters in old tokens, 38 in new
        re.compile(rf"{_KEY_START}[MNO][A-Za-z0-9_-]{{23,27}}\.[A-Za-z0-9_-]{{6,7}}\.[A-Za-z0-9_-]{{27,}}"),
        (".",),
        key_like=True,
    ),
    SecretShape(
        "basic-auth",
        re.compile(r"(?<![A-Za-z0-9])(?i:basic)\s+([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])"),
        ("basic",),
        group=1,
        accept=_basic_credentials,
    ),
    SecretShape(
        "bearer-token",
        re.compile(r"(?<![A-Za-z0-9])(?i:bearer)\s+([A-Za-z0-9._~+/-]{12,}=*)"),
        ("bearer",),
        group=1,
        accept=_token_value,
    ),
    SecretShape(
        "jwt",
        re.compile(rf"{_KEY_START}eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}"),
        ("eyj",),
        key_like=True,
    ),
    SecretShape(
        "url-password",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:([^\s/?#]+)@[^\s/@:?#]"),
        ("://",),
        group=1,
        accept=_url_password,
    ),
    SecretShape(
        "password",
        re.compile(rf"(?i:{_PASSWORD_WORDS})[\"']?\s*[:=]\s*{_VALUE}"),
        _PASSWORD_HINTS,
        group=1,
        accept=_assigned_value,
    ),
    SecretShape(  # pwd=x, MYSQL_PWD=x, Pwd=x; in a connection string (not OLDPWD, and PWD=/home/me is a path)
        "password",
        re.compile(rf"(?<![A-Za-z0-9])(?i:pwd)[\"']?\s*=\s*{_VALUE}"),
        ("pwd",),
        group=1,
        accept=_pwd_value,
    ),
    SecretShape(
        "password",
        re.compile(
            rf"(?i:{_PASSWORD_WORDS}(?:\s+{_SPOKEN_OF}\s+[^\s]+)?\s+{_SPOKEN_VERBS}"
            rf"(?:\s+(?:set\s+to|changed\s+to))?)(?:\s*[:=])?\s+{_VALUE}"
        ),
        _PASSWORD_HINTS,
        group=1,
        accept=_spoken_password,
    ),
    SecretShape(
        "api-key",
        re.compile(rf"(?i:{_TOKEN_WORDS}(?:\s+(?:for|of|to|on)\s+[^\s]+)?)[\"']?\s*(?:[:=]|(?i:is|was))\s*{_VALUE}"),
        ("api", "token", "secret"),
        group=1,
        accept=_token_value,
    ),
)
