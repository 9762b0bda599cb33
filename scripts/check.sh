#!/usr/bin/env bash
# Static checks CI runs before the tests: ruff (lint and format), mypy over lca/, conditions/ and protocols/,
# the import contracts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
