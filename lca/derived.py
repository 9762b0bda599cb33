"""What a derived store may hold of a value: the one redaction pass every derived write goes through.

The transcript keeps each credential verbatim and stays the authority. Everything derived from it, the index
(texts, pointers, channels, speakers, times, watermarks, the BM25 vocabulary built from its texts), logs, the
ledger, cycle reports, quarantine records and error messages, holds a value only in the form made here:

- ``derived_text``: a whole text redacted (``lca.secrets``) before anything cuts it, so a chunk boundary
  cannot split a detection ("my password is" at the end of one chunk, the value starting the next);
- ``derived_id``: an identifier (session, entry, memory id, channel, a mapping key) as it is when it holds no
  credential, else its redacted form and a digest of the verbatim value (``s-[REDACTED:github-token]~1f0c9a2e``):
  two ids stay two, and a reader finds the transcript's own id by deriving each candidate the same way
  (``real_id``). The digest is 32 bits, enough to keep a store's ids apart and too short to confirm a guess;
- ``derived_tree``: a JSON-like value with every string redacted and every mapping key derived;
- ``derived_message``: an error message, which may quote any value it refused.

Each is idempotent, and a value without a credential comes back unchanged, so a store written before holds the
same forms. Where ``derived_id`` changes a value it is cached: ids recur on every chunk and recall.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

from lca.secrets import holds_redaction, redact, redacted

DIGEST_MARK = "~"


def derived_text(text: str) -> str:
    """``text`` with every credential replaced by its marker (``lca.secrets.redacted``)."""
    return redacted(text)


@lru_cache(maxsize=65536)
def derived_id(value: str) -> str:
    """An identifier as a derived store holds it: itself without a credential, else redacted plus a digest."""
    shown, findings = redact(value)
    if not findings:
        return value
    return f"{shown}{DIGEST_MARK}{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def derived_file_name(name: str, *, room: int = 240) -> str:
    """A file name as a derived store or a bundle names it: ``derived_id`` of the name unquoted (a session
    file's name is its id percent-quoted, which would hide a URL's password from the detector) and quoted
    again, or, when that would not fit in ``room`` bytes (a name full of short secrets), a marker and a digest."""
    plain = unquote(name)
    shown = derived_id(plain)
    if shown == plain:
        return name
    shown = quote(shown, safe="[]:~")
    if len(shown.encode("utf-8", "surrogatepass")) <= room:
        return shown
    return f"redacted{DIGEST_MARK}{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def derived_tree(value: Any) -> Any:
    """A JSON-like value with every string redacted and every mapping key derived (cycle reports and the ledger
    key by turn and memory ids; a key is no less shown than a value)."""
    if isinstance(value, str):
        return redacted(value)
    if isinstance(value, Mapping):
        return {derived_id(k) if isinstance(k, str) else k: derived_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(derived_tree(v) for v in value)
    if isinstance(value, list):
        return [derived_tree(v) for v in value]
    return value


def derived_message(message: str) -> str:
    """An error message fit to print, log or report: every credential in it redacted."""
    return redacted(message)


def real_id(shown: str, candidates: Iterable[str]) -> str | None:
    """The id among ``candidates`` (the transcript's own) that ``shown`` was derived from: ``shown`` itself when
    nothing was redacted from it, None when no candidate derives to it."""
    if not holds_redaction(shown):
        return shown
    return next((c for c in candidates if derived_id(c) == shown), None)


class DerivedTurnLookups:
    """The transcript's per-turn lookups (``entry_meta``, ``reply_to``, ``agent_turns`` of
    ``lca.transcript.TranscriptStore``) asked with the ids the index's pointers hold and answered in them, as
    recall reads them. Ids without a credential pass straight through; a derived one is resolved by ``real_id``."""

    def __init__(self, transcript: Any) -> None:
        self.transcript = transcript
        self._agent: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # session -> (the transcript's, derived)

    def turn(self, session_id: str, entry_id: str) -> tuple[str, str]:
        """The transcript's own (session, entry) ids for derived ones (themselves when nothing was redacted)."""
        session = self._session(session_id)
        if not holds_redaction(entry_id):
            return session, entry_id
        path = self.transcript.session_path(session)
        entries = self.transcript.read(session).entries if path.exists() else ()
        return session, real_id(entry_id, (e.id for e in entries)) or entry_id

    def _session(self, session_id: str) -> str:
        if not holds_redaction(session_id):  # the transcript's folder is listed only for a derived id
            return session_id
        return real_id(session_id, self.transcript.session_ids()) or session_id

    def entry_meta(self, session_id: str, entry_id: str) -> Mapping[str, Any]:
        return self.transcript.entry_meta(*self.turn(session_id, entry_id))

    def reply_to(self, session_id: str, entry_id: str) -> str | None:
        reply = self.transcript.reply_to(*self.turn(session_id, entry_id))
        return None if reply is None else derived_id(reply)

    def agent_turns(self, session_id: str) -> frozenset[str]:
        ids = self.transcript.agent_turns(self._session(session_id))
        cached = self._agent.get(session_id)
        if cached is None or cached[0] is not ids:  # the transcript keeps one set while the file does not grow
            cached = self._agent[session_id] = (ids, frozenset(map(derived_id, ids)))
        return cached[1]
