#!/usr/bin/env bash
# The main job, until the pilot study lands: the substrate end to end on a real LoCoMo conversation.
# Ingests it into a fresh store, prints health, answers one search, and writes a report under results/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m protocols.demo "$@"
