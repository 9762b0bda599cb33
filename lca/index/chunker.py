"""Split text to the embedder's real input limit: never truncate, never drop.

Every character of the source text lands in exactly one piece, and every piece,
with its indexing prefix and the model's special tokens, fits the embedder's
limit. Cuts fall at sentence ends where possible, else at word starts, and only
inside a word when a single word exceeds the limit.

A transcript entry or memory body is redacted whole before it is cut (``lca.derived``): the chunker prefers
newlines, and "my password is" ending one piece would leave the value to start the next, where no detector
sees what names it. The pointers of the redacted pieces still lead to the verbatim text's offsets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lca.derived import derived_id, derived_text
from lca.ports import Embedder
from lca.secrets import marker, redact
from lca.types import Chunk, EntryKind, SourcePointer, SourceType, parse_timestamp, text_digest

_SENTENCE_END = ".!?\n"
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])|\n+")


def sentence_keys(text: str, *, min_chars: int = 16, limit: int = 40) -> list[str]:
    """The sentences of a multi-sentence text (at most ``limit``, each at least ``min_chars``), as extra
    retrieval keys: a remark in passing ("By the way, I replaced the faucet") then scores on its own
    instead of being averaged into the turn's main topic. A one-sentence text has no extra keys."""
    sentences = [s.strip() for s in _SENTENCE_BREAK.split(text) if len(s.strip()) >= min_chars]
    return sentences[:limit] if len(sentences) > 1 else []


@dataclass(frozen=True)
class TextPiece:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class RedactedText:
    """A text redacted whole, and where its offsets fall in the verbatim text it was redacted from."""

    text: str
    markers: tuple[tuple[int, int, int, int], ...] = ()  # each marker's span here, and the span it replaced

    @classmethod
    def of(cls, verbatim: str) -> RedactedText:
        shown, findings = redact(verbatim)
        spans, shift = [], 0
        for f in findings:
            start = f.start + shift
            spans.append((start, start + len(marker(f.kind)), f.start, f.end))
            shift += len(marker(f.kind)) - (f.end - f.start)
        return cls(shown, tuple(spans))

    def kept(self) -> tuple[tuple[int, int], ...]:
        """The markers' spans: a cut inside one would leave two pieces that no longer read as redacted."""
        return tuple((start, end) for start, end, _, _ in self.markers)

    def source_offset(self, at: int, *, end: bool = False) -> int:
        """The verbatim offset of offset ``at`` here; inside a marker, the start (or, for an ``end``, the end) of
        what it replaced."""
        shift = 0
        for start, stop, was_start, was_end in self.markers:
            if at <= start:
                break
            if at < stop:
                return was_end if end else was_start
            shift = was_end - stop
        return at + shift


class Chunker:
    """Splits text for one embedder; ``prefix`` text (a speaker name) counts against the limit."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def split(self, text: str, *, prefix: str = "", keep: Sequence[tuple[int, int]] = ()) -> list[TextPiece]:
        """Pieces of ``text`` that fit the limit, none cut inside a span of ``keep`` where another cut fits."""
        limit = self.embedder.max_input_tokens
        if self.embedder.count_tokens([prefix + text])[0] <= limit:
            return [TextPiece(0, len(text), text)]
        overhead = self.embedder.count_tokens([prefix])[0]  # prefix plus special tokens
        budget = limit - overhead
        if budget < 8:
            raise ValueError(f"prefix {prefix!r} leaves only {budget} tokens of the embedder's {limit}")
        pieces: list[TextPiece] = []
        self._split_span(text, 0, len(text), prefix, budget, limit, pieces, tuple(keep))
        assert pieces[0].start == 0 and pieces[-1].end == len(text)
        return pieces

    def _split_span(
        self,
        text: str,
        start: int,
        end: int,
        prefix: str,
        budget: int,
        limit: int,
        out: list[TextPiece],
        keep: tuple[tuple[int, int], ...] = (),
    ) -> None:
        span = text[start:end]
        offsets = [(a + start, b + start) for a, b in self.embedder.token_offsets(span)]
        if not offsets:  # whitespace only: keep it, it costs no tokens
            out.append(TextPiece(start, end, span))
            return
        cuts = self._cut_points(text, start, end, offsets, budget, keep)
        bounds = [start, *cuts, end]
        for a, b in zip(bounds, bounds[1:]):
            piece = text[a:b]
            if self.embedder.count_tokens([prefix + piece])[0] <= limit or len(piece) <= 1:
                out.append(TextPiece(a, b, piece))
            else:  # retokenizing a piece can differ at its edges: split it again, tighter
                self._split_span(text, a, b, prefix, max(8, budget - 8), limit, out, keep)

    @staticmethod
    def _cut_points(
        text: str, start: int, end: int, offsets: list[tuple[int, int]], budget: int, keep: tuple[tuple[int, int], ...]
    ) -> list[int]:
        cuts: list[int] = []
        first = 0
        n = len(offsets)
        while n - first > budget:
            window_end = first + budget  # tokens [first, window_end) fit
            best = None
            best_word = None
            for j in range(window_end, first + max(1, budget // 4), -1):
                begin = offsets[j][0]
                if keep and any(a < begin < b for a, b in keep):
                    continue
                before = text[begin - 1] if begin > start else " "
                if best_word is None and (before.isspace() or not before.isalnum()):
                    best_word = j
                prev_end = offsets[j - 1][1]
                gap = text[prev_end:begin]
                if any(ch in _SENTENCE_END for ch in text[offsets[j - 1][0] : prev_end] + gap):
                    best = j
                    break
            j = best or best_word or window_end
            cuts.append(offsets[j][0])
            first = j
        return cuts


def _speaker_prefix(author: str | None) -> str:
    if author and author not in ("user", "assistant"):
        return f"{derived_text(author)}: "  # indexed text: a name is embedded and in the BM25 vocabulary
    return ""


def indexed_time(timestamp: str | None) -> str | None:
    """A chunk's time: as the transcript wrote it when it is a time, else redacted and cut (hits show it)."""
    if timestamp is None or parse_timestamp(timestamp) is not None:
        return timestamp
    return derived_text(timestamp)[:64]


CAPTION_KEYS = ("caption", "blip_caption")  # where an importer leaves the caption of a turn's attachment


def attachment_text(meta: Mapping[str, Any] | None) -> str:
    """The caption of an entry's attachment as indexed text, ``" [shares a photo: ...]"`` ("" when none): a shared
    photo is part of what the turn says, so it is found by what it shows."""
    for key in CAPTION_KEYS:
        caption = (meta or {}).get(key)
        if isinstance(caption, str) and caption.strip():
            return f" [shares a photo: {caption.strip()}]"
    return ""


UNINDEXED_KINDS = frozenset({EntryKind.HANDOFF, EntryKind.CHECKPOINT})
"""Entries the index leaves out: a handoff or checkpoint is the agent's derived note about turns the index
already holds (JSON with pointers and quoted tails); the live context manager replays the latest handoff at a
session start, and recall ranking it beside the turns would only crowd them out."""


OPERATIONAL = "operational"
"""A meta flag on the system events the substrate writes about itself (a migration's steps): history of the
store's operation, kept in the transcript, never indexed (recall would rank the JSON beside the conversation)."""


def indexed(entry) -> bool:
    """Whether the index holds a transcript entry: it has content, is not a handoff or checkpoint note, and is not
    one of the substrate's own operational events."""
    return bool(entry.content.strip()) and entry.kind not in UNINDEXED_KINDS and not (entry.meta or {}).get(OPERATIONAL)


def entry_speakers(entry) -> tuple[str | None, str | None]:
    """Who spoke a turn, as its chunks' pointers hold it (derived forms): the subagent that wrote it, and the peer
    agent it came from (a ``peer_agent_turn``'s author)."""
    subagent = derived_id(entry.subagent_id) if entry.subagent_id else None
    peer = derived_text(entry.author) if entry.kind is EntryKind.PEER_AGENT_TURN and entry.author else None
    return subagent, peer


def entry_chunks(entry, chunker: Chunker) -> list:
    """Chunks of one transcript entry; a named speaker is kept as an indexed prefix, an attachment's caption
    as indexed text after the content (its pointer covers the content only)."""

    if not indexed(entry):
        return []
    prefix = _speaker_prefix(entry.author)
    subagent, peer = entry_speakers(entry)
    whole = RedactedText.of(entry.content + attachment_text(entry.meta))  # redacted before it is cut
    pieces = chunker.split(whole.text, prefix=prefix, keep=whole.kept())
    out = []
    for part, piece in enumerate(pieces):
        pointer = SourcePointer(  # the derived ids lead back to the verbatim turn (lca.derived.real_id)
            SourceType.TRANSCRIPT,
            session_id=derived_id(entry.session_id),
            entry_id=derived_id(entry.id),
            char_start=min(whole.source_offset(piece.start), len(entry.content)),
            char_end=min(whole.source_offset(piece.end, end=True), len(entry.content)),
            subagent_id=subagent,
            peer_agent=peer,
        )
        text = prefix + piece.text
        out.append(
            Chunk(
                Chunk.make_id(text, pointer),
                text,
                text_digest(text),
                pointer,
                part,
                len(pieces),
                indexed_time(entry.timestamp),
                derived_id(entry.channel),
            )
        )
    return out


def memory_chunks(memory_file, chunker: Chunker) -> list:
    """Chunks of one memory file's body, pointing at the memory id and file."""

    body = memory_file.body  # a hand-edited memory file may hold what the write path would have redacted
    if not body.strip():
        return []
    whole = RedactedText.of(body)
    pieces = chunker.split(whole.text, keep=whole.kept())
    out = []
    created = memory_file.record.created.isoformat()
    for part, piece in enumerate(pieces):
        pointer = SourcePointer(
            SourceType.MEMORY,
            memory_id=memory_file.record.id,
            path=memory_file.path.name,
            char_start=whole.source_offset(piece.start),
            char_end=whole.source_offset(piece.end, end=True),
        )
        text = piece.text
        out.append(
            Chunk(
                Chunk.make_id(text, pointer),
                text,
                text_digest(text),
                pointer,
                part,
                len(pieces),
                created,
            )
        )
    return out
