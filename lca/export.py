"""Export of one session's or one person's turns in the wire format: the right of access beside forgetting.

An export is the transcript's own lines, selected: by session, by speaker (``author``), by session key (one
conversation across the surfaces it touched: every session holding a turn with that ``session_key``), or any of
them together. It leaves the
store, so by default each entry passes the redaction every derived write passes (``lca.derived``): content,
speaker and meta values holding a credential are redacted, the line's hash is computed again over what it now
holds, and ``meta.export_redacted`` says so (its hash no longer matches the store's line, and says why).
``verbatim=True`` exports the lines as recorded, credentials included, for a user taking their own data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from lca.derived import derived_text, derived_tree
from lca.errors import LCAError
from lca.transcript import TranscriptStore, encode_entry
from lca.types import SESSION_KEY, TranscriptEntry


def exported_entries(
    transcript: TranscriptStore,
    *,
    session: str | None = None,
    author: str | None = None,
    session_key: str | None = None,
    verbatim: bool = False,
) -> Iterator[TranscriptEntry]:
    """The selected entries in transcript order (sessions by id, lines as written): those meeting every selector."""
    if session is None and author is None and session_key is None:
        raise LCAError(
            "an export names a session (--session), a speaker (--author) or a session key (--session-key), or several"
        )
    if session_key is not None and SESSION_KEY.fullmatch(session_key) is None:
        raise LCAError(f"--session-key {derived_text(session_key)!r}: must be 1 to 128 of A-Z a-z 0-9 . _ : -")
    sessions = [session] if session is not None else transcript.session_ids()
    if session is not None and session not in transcript.session_ids():
        raise LCAError(f"no such session {derived_text(session)!r}")
    for session_id in sessions:
        for entry in transcript.read(session_id).entries:
            if author is not None and entry.author != author:
                continue
            if session_key is not None and entry.session_key != session_key:
                continue
            yield entry if verbatim else _redacted(entry)


def _redacted(entry: TranscriptEntry) -> TranscriptEntry:
    content = derived_text(entry.content)
    author = derived_text(entry.author) if entry.author is not None else None
    meta = derived_tree(dict(entry.meta))
    if (content, author, meta) == (entry.content, entry.author, dict(entry.meta)):
        return entry
    return replace(entry, content=content, author=author, meta={**meta, "export_redacted": True})


def export_lines(entries: Iterator[TranscriptEntry]) -> Iterator[bytes]:
    for entry in entries:
        yield encode_entry(entry)
