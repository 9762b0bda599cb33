"""``python -m protocols.cli``: the ``lca`` command."""

import sys

from protocols.cli import main

sys.exit(main())
