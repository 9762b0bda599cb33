"""Child process for the crash test: appends entries forever, printing each id once acknowledged."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lca.transcript import TranscriptStore  # noqa: E402
from lca.types import EntryKind, TranscriptEntry  # noqa: E402


def main() -> None:
    root, session, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    store = TranscriptStore(root)
    n = 0
    while True:
        n += 1
        # mostly small entries, some large ones so a kill can land inside a write
        size = rng.choice([20, 200, 2_000, 500_000, 3_000_000])
        entry = TranscriptEntry(
            id=f"{seed}-{n}",
            session_id=session,
            agent_id="crash",
            kind=EntryKind.USER_TURN,
            timestamp="2026-01-01T00:00:00",
            content="x" * size,
        )
        store.append([entry])
        print(entry.id, flush=True)


if __name__ == "__main__":
    main()
