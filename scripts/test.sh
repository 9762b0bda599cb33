#!/usr/bin/env bash
# Install (with test extras) and run the whole test suite, slow end-to-end tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest "$@"
