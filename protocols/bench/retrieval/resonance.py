"""The ``resonance`` retriever: full resonance recall over a real substrate built from one corpus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def _history_time(raw: str | None) -> str:
    """A LongMemEval or LoCoMo date as ISO 8601 (the epoch of 2000 when absent or unreadable)."""
    from lca.importers import parse_locomo_date, parse_longmemeval_date

    moment = parse_longmemeval_date(raw) or parse_locomo_date(raw) if raw else None
    return moment.isoformat() if moment is not None else "2000-01-01T00:00:00"


class ResonanceIndex:
    """A real substrate (transcript, faiss, bm25s, SQLite) built from one corpus, ranked by resonance
    score R for each query; entries are named by position (a haystack may repeat a session id)."""

    def __init__(
        self, texts: Sequence[str], dates: Sequence[str | None], embedder, workdir: Path, *, sentence_keys: bool = False
    ) -> None:
        import shutil

        from lca.recall import RecallConfig
        from lca.substrate import Substrate
        from lca.types import EntryKind, TranscriptEntry

        shutil.rmtree(workdir, ignore_errors=True)
        self.workdir = workdir
        entries = [
            TranscriptEntry(
                id=f"u{i}",
                session_id="haystack",
                agent_id="bench",
                kind=EntryKind.USER_TURN,
                timestamp=_history_time(date),
                content=text or " ",
            )
            for i, (text, date) in enumerate(zip(texts, dates, strict=False))
        ]
        pool = min(len(entries), 100)
        config = RecallConfig(
            pool=pool,
            floor=-1.0,
            memory_quota=0,
            transcript_quota=pool,
            token_budget=10**7,
            item_char_cap=10**6,
            mmr_lambda=1.0,
        )
        self.substrate = Substrate(workdir, embedder=embedder, recall_config=config, sentence_keys=sentence_keys)
        self.substrate.append(entries)

    def rank(self, query: str, as_of: str | None = None) -> list[int]:
        from datetime import datetime

        from lca.recall import RecallContext

        asked = datetime.fromisoformat(_history_time(as_of)) if as_of else None
        result = self.substrate.recall(RecallContext(query=query, as_of=asked))
        order: list[int] = []
        for candidate in result.candidates:  # sorted by resonance score
            index = int(candidate.source[len("transcript:haystack#u") :].split("[", 1)[0])
            if index not in order:
                order.append(index)
        return order

    def close(self) -> None:
        import shutil

        self.substrate.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
