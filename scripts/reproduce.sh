#!/usr/bin/env bash
# Reproduce one table of a paper: train every catalog row, evaluate, write results/<paper>_<table>.md
#   scripts/reproduce.sh <paper> <table> [--dry-run|--tiny] [--data BIN] [--ref RAW] [--src RAW]
#       [--catalog-json FILE] [--workdir DIR] [--results-dir DIR] [--max-update N] [--layers N]
#       [--gpus N] [--fp16|--bf16] [--average N] [-- EXTRA fairseq-train ARGS]
# e.g. scripts/reproduce.sh yang2019 "Table 1" --tiny
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"
exec "$PYTHON" -m localnmt.evaluation.reproduce "$@"
