#!/usr/bin/env bash
# Reproduce one table of a paper: train every catalog row, evaluate, write results/<paper>_<table>.md
#   scripts/reproduce.sh <paper> <table> [--task NAME|all] [--dry-run|--tiny] [--data DIR]
#       [--data-root DIR] [--subset test|valid] [--ref RAW] [--src RAW] [--refs-dir DIR]
#       [--catalog-json FILE] [--workdir DIR] [--results-dir DIR] [--max-update N] [--layers N]
#       [--gpus N] [--fp16|--bf16] [--average N] [--glue-tasks T ...] [--glue-grid]
#       [-- EXTRA fairseq-train ARGS]
# A table with several columns (language pairs, GLUE) has rows of several tasks: --task picks
# one (default: the first, the others are named), --task all runs each (one page per task).
# Data: --data, else <data-root>/<task>/data-bin (runs/data), else --tiny's gettext corpus;
# otherwise it stops before training and prints the data-prep command.
# e.g. scripts/reproduce.sh yang2019 "Table 1" --tiny
#      scripts/reproduce.sh zhang2021 "Table 2" --task nist_zh_en --dry-run
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"
exec "$PYTHON" -m localnmt.runs.reproduce "$@"
