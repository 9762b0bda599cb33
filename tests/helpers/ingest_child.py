"""Child process for the concurrency test: imports the fixture conversation with the fake embedder."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lca.importers import import_locomo  # noqa: E402
from lca.substrate import Substrate  # noqa: E402
from tests.fakes import FakeHashingEmbedder  # noqa: E402


def main() -> None:
    store, go_file = sys.argv[1], Path(sys.argv[2])
    sessions, report = import_locomo(REPO / "data" / "fixtures" / "locomo_fixture.json")
    with Substrate(store, embedder=FakeHashingEmbedder()) as substrate:
        while not go_file.exists():  # start both children at once
            pass
        out = substrate.import_sessions(sessions, report)
        print(out.entries_appended, out.index.new_chunks, flush=True)


if __name__ == "__main__":
    main()
