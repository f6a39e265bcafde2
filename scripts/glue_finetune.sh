#!/usr/bin/env bash
# Fine-tune a (local-attention) BERT on one GLUE task (Pande et al. 2021, Table 4).
#
#   scripts/glue_finetune.sh --data BIN --save-dir DIR [--arch ARCH] [--restore-file CKPT]
#       [--lr 1e-4|2e-4] [--batch-size 32|128] [--warmup N] [--max-epoch N] [--gpus N]
#       [--optimizer lamb|adam] [--cpu] [--dry-run] [-- EXTRA fairseq-train ARGS]
#
# BIN comes from data_prep/prepare_glue.sh (its localnmt_glue.json gives --num-classes).
# ARCH: pande2021_bert_{band2_untied,band6_untied,band6_alltied,band6_132tied,band6_120tied}
# or localnmt_roberta_base (default). Paper: Devlin et al.'s recipe with batch in {32, 128},
# lr in {1e-4, 2e-4}, 10K warm-up steps, LAMB (fairseq's lamb needs apex; without apex the
# script falls back to Adam and says so). Epochs: 3 (BERT's recommendation; paper silent).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"
usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

DATA="" SAVE_DIR="" ARCH="localnmt_roberta_base" RESTORE="" LR="1e-4" BSZ=32 WARMUP=10000
MAX_EPOCH=3 GPUS=1 OPTIMIZER="" CPU=0 DRY_RUN=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --save-dir) SAVE_DIR="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --restore-file) RESTORE="$2"; shift 2 ;;
    --lr) LR="$2"; shift 2 ;;
    --batch-size) BSZ="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --max-epoch) MAX_EPOCH="$2"; shift 2 ;;
    --gpus) GPUS="$2"; shift 2 ;;
    --optimizer) OPTIMIZER="$2"; shift 2 ;;
    --cpu) CPU=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$DATA" && -n "$SAVE_DIR" ]] || { usage >&2; exit 2; }
[[ -f "$DATA/localnmt_glue.json" ]] || { echo "error: $DATA/localnmt_glue.json missing (run data_prep/prepare_glue.sh)" >&2; exit 2; }
NUM_CLASSES="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_classes"])' "$DATA/localnmt_glue.json")"
if [[ -z "$OPTIMIZER" ]]; then
  if "$PYTHON" -c "import apex" 2>/dev/null; then OPTIMIZER=lamb
  else OPTIMIZER=adam; echo "note: apex not installed, so no LAMB: using Adam (paper: LAMB)" >&2; fi
fi
OPT_ARGS=(--optimizer "$OPTIMIZER")
[[ "$OPTIMIZER" == adam ]] && OPT_ARGS+=(--adam-betas "(0.9,0.98)" --adam-eps 1e-06)
[[ "$OPTIMIZER" == lamb ]] && OPT_ARGS+=(--lamb-betas "(0.9,0.999)" --lamb-eps 1e-06)
# total updates for the polynomial schedule: epochs x ceil(train rows / batch)
ROWS="$(wc -l < "$DATA/work/train.label" 2>/dev/null || echo 0)"
TOTAL=$(( (ROWS / (BSZ * GPUS) + 1) * MAX_EPOCH ))
CMD=("$PYTHON" -m fairseq_cli.train "$DATA" --user-dir "$REPO_ROOT/localnmt"
  --task sentence_prediction --num-classes "$NUM_CLASSES" --arch "$ARCH"
  --criterion sentence_prediction --init-token 0 --separator-token 2 --max-positions 512
  --shorten-method truncate --batch-size "$BSZ" --required-batch-size-multiple 1
  "${OPT_ARGS[@]}" --lr "$LR" --weight-decay 0.01 --clip-norm 0.0
  --lr-scheduler polynomial_decay --warmup-updates "$WARMUP" --total-num-update "$TOTAL"
  --max-epoch "$MAX_EPOCH" --dropout 0.1 --attention-dropout 0.1
  --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric
  --save-dir "$SAVE_DIR" --no-epoch-checkpoints --find-unused-parameters)
[[ -n "$RESTORE" ]] && CMD+=(--restore-file "$RESTORE" --reset-optimizer --reset-dataloader --reset-meters)
[[ "$CPU" == 1 ]] && CMD+=(--cpu)
CMD+=("${EXTRA[@]}")
if [[ "$DRY_RUN" == 1 ]]; then printf '%q ' "${CMD[@]}"; echo; exit 0; fi
if [[ "$GPUS" -gt 1 && "$CPU" == 0 ]]; then CMD+=(--distributed-world-size "$GPUS"); fi
exec "${CMD[@]}"
