"""Child process for the lexical index's crash tests: imports the LoCoMo fixture's last session into a store holding
the others, and dies (``os._exit``, no cleanup) at the named step of the lexical index's save."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lca.importers import import_locomo  # noqa: E402
from lca.index import lexical_files  # noqa: E402
from lca.substrate import Substrate  # noqa: E402
from tests.fakes import FakeHashingEmbedder  # noqa: E402

KILLED = 9


def main() -> None:
    store, step = sys.argv[1], sys.argv[2]
    write = lexical_files.atomic_write_bytes
    if step == "before-manifest":  # the new segment's files are written, the manifest that names them is not

        def dying_write(path: Path, data: bytes) -> None:
            if path.name == lexical_files.MANIFEST:
                os._exit(KILLED)
            write(path, data)

        lexical_files.atomic_write_bytes = dying_write  # type: ignore[assignment]
    elif step == "before-cleanup":  # the manifest is committed, the files it no longer names are not removed yet
        lexical_files.remove_leftovers = lambda paths: os._exit(KILLED)  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown step {step!r}")
    sessions, report = import_locomo(REPO / "data" / "fixtures" / "locomo_fixture.json")
    with Substrate(store, embedder=FakeHashingEmbedder()) as substrate:
        substrate.import_sessions(sessions[-1:], report)
    raise SystemExit("the save finished: the step was never reached")


if __name__ == "__main__":
    main()
