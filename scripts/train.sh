#!/usr/bin/env bash
# Train one model with the papers' hyper-parameters: a thin wrapper of localnmt-train
# (python -m localnmt.runs.train); scripts/train.sh --help lists its options, e.g.
#   scripts/train.sh --data BIN --save-dir DIR --arch ARCH --size base --gpus 8 --fp16
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.runs.train "$@"
