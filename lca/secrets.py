"""Credential shapes that must never be injected, written to memory or shown.

One place the substrate asks whether a text holds a secret; recall's risk term, consolidation's
review and the live context all call ``contains_secret``.
"""

from __future__ import annotations

import re

SECRET_PATTERNS = (
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),  # GitHub tokens
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),  # OpenAI-style secret keys
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),  # Slack tokens
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),  # PEM private keys
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),  # JWTs
    re.compile(r"\b(?i:password|passwd|secret|api[_-]?key|token)\s*[:=]\s*\S{6,}"),
)


_ANY_SECRET = re.compile("|".join(f"(?:{p.pattern})" for p in SECRET_PATTERNS))


_SECRET_HINTS = (
    "akia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "sk-",
    "xox",
    "-----begin",
    "eyj",
    "passw",
    "secret",
    "api",
    "token",
)


def contains_secret(text: str) -> bool:
    """Any of SECRET_PATTERNS. A substring prefilter skips the regex for the (usual) text that
    holds none of the patterns' anchors; this check runs on every candidate of every recall."""
    lowered = text.lower()
    if not any(hint in lowered for hint in _SECRET_HINTS):
        return False
    return _ANY_SECRET.search(text) is not None
