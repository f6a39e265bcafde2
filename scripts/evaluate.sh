#!/usr/bin/env bash
# Evaluate a checkpoint (or average the last N first) on a binarised test set: a thin wrapper
# of python -m localnmt.runs.evaluate; scripts/evaluate.sh --help lists its options, e.g.
#   scripts/evaluate.sh --data-bin BIN --checkpoint CKPT.pt --out DIR [--ref RAW_REF]
#   scripts/evaluate.sh --average-dir CKPT_DIR --average 5 --by-update --data-bin BIN --out DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.runs.evaluate "$@"
