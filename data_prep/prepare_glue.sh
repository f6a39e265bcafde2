#!/usr/bin/env bash
# GLUE (QQP, SST-2, MNLI, QNLI) → fairseq sentence_prediction data-bins, one per task.
# Usage:
#   data_prep/prepare_glue.sh GLUE_DIR BPE_MODEL DICT OUT_ROOT [TASK ...]
# GLUE_DIR: the local GLUE download (GLUE_DIR/<TASK>/train.tsv, dev*.tsv).
# BPE_MODEL: the pretrained model's subword model (bpe.codes or *.model); DICT: its dict.txt.
# Writes OUT_ROOT/<TASK>/{input0,input1,label}; resumable. Fine-tune: scripts/glue_finetune.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
if [ $# -lt 4 ]; then sed -n '2,7p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
GLUE="$1"; MODEL="$2"; DICT="$3"; OUT="$4"; shift 4
TASKS=("$@"); [ ${#TASKS[@]} -gt 0 ] || TASKS=(QQP SST-2 MNLI QNLI)
for t in "${TASKS[@]}"; do
  "$PY" -m localnmt.data.glue --glue-dir "$GLUE" --task "$t" --bpe-model "$MODEL" \
    --dict "$DICT" --out "$OUT/$t"
done
