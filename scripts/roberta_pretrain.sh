#!/usr/bin/env bash
# Pre-train a (local-attention) BERT (Pande et al. 2021, 5.1): a thin wrapper of
# python -m localnmt.runs.roberta_pretrain; scripts/roberta_pretrain.sh --help lists its options.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.runs.roberta_pretrain "$@"
