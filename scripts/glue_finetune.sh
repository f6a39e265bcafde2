#!/usr/bin/env bash
# Fine-tune a (local-attention) BERT on one GLUE task (Pande et al. 2021, Table 4): a thin wrapper of
# python -m localnmt.runs.glue_finetune; scripts/glue_finetune.sh --help lists its options.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.runs.glue_finetune "$@"
