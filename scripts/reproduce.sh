#!/usr/bin/env bash
# Reproduce one table of a paper: train every catalog row, evaluate, write results/<paper>_<table>.md.
# A thin wrapper of python -m localnmt.runs.reproduce; scripts/reproduce.sh --help lists its
# options, e.g.
#   scripts/reproduce.sh yang2019 "Table 1" --tiny
#   scripts/reproduce.sh zhang2021 "Table 2" --task nist_zh_en --dry-run
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.runs.reproduce "$@"
