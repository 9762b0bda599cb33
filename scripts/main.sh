#!/usr/bin/env bash
# The main job: the locked hollow-copy pilot study (preregistration/hollow_copy_pilot.yaml) end to end on the
# embedded default (SmolLM2-135M through llama.cpp, all-MiniLM-L6-v2), then its report.
# Runs go to results/studies/hollow_copy_pilot/<run>/, the report to results/reports/hollow_copy_pilot/report.md.
# Extra arguments go to `lca run` (--data FOLDER for the benchmark files, else $LCA_DATA, else the fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/lca run preregistration/hollow_copy_pilot.yaml --report "$@"
