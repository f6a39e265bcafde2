#!/usr/bin/env bash
# Pre-train a (local-attention) BERT with fairseq's masked_lm task (Pande et al. 2021, 5.1):
# about 300K updates at 128 tokens per sample, then 1K updates at 512 (from the first phase),
# batch 2K sequences (gradient accumulation), LAMB (needs apex; Adam without it).
#
#   scripts/roberta_pretrain.sh --data BIN --save-dir DIR [--arch ARCH] [--gpus N]
#       [--batch-per-gpu N] [--lr LR] [--phase1-updates N] [--phase2-updates N]
#       [--optimizer lamb|adam] [--sequences-per-update N] [--cpu] [--dry-run]
#       [-- EXTRA fairseq-train ARGS]
#
# BIN: data_prep/prepare_pretrain_text.sh OUT TEXT... writes it to OUT/bin (the paper's text:
# English Wikipedia + a Gutenberg subset). --sequences-per-update: 2048 (paper). Left open
# by the paper and chosen here: lr 5e-4, 10K warm-up then polynomial decay, weight decay
# 0.01, mask probability 0.15 (fairseq default).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"
usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

DATA="" SAVE_DIR="" ARCH="localnmt_roberta_base" GPUS=1 BPG=64 LR="5e-4" P1=300000 P2=1000
OPTIMIZER="" CPU=0 DRY_RUN=0 BATCH=2048
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --save-dir) SAVE_DIR="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --gpus) GPUS="$2"; shift 2 ;;
    --batch-per-gpu) BPG="$2"; shift 2 ;;
    --lr) LR="$2"; shift 2 ;;
    --phase1-updates) P1="$2"; shift 2 ;;
    --phase2-updates) P2="$2"; shift 2 ;;
    --optimizer) OPTIMIZER="$2"; shift 2 ;;
    --sequences-per-update) BATCH="$2"; shift 2 ;;
    --cpu) CPU=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$DATA" && -n "$SAVE_DIR" ]] || { usage >&2; exit 2; }
if [[ -z "$OPTIMIZER" ]]; then
  if "$PYTHON" -c "import apex" 2>/dev/null; then OPTIMIZER=lamb
  else OPTIMIZER=adam; echo "note: apex not installed, so no LAMB: using Adam (paper: LAMB)" >&2; fi
fi
OPT_ARGS=(--optimizer "$OPTIMIZER")
[[ "$OPTIMIZER" == adam ]] && OPT_ARGS+=(--adam-betas "(0.9,0.98)" --adam-eps 1e-06)
[[ "$OPTIMIZER" == lamb ]] && OPT_ARGS+=(--lamb-betas "(0.9,0.999)" --lamb-eps 1e-06)
# 2K sequences per update: update_freq = ceil(2048 / (gpus * batch per gpu))
UF=$(( (BATCH + GPUS * BPG - 1) / (GPUS * BPG) ))
phase() {  # $1 tokens-per-sample, $2 max-update, $3 save dir, then extra args
  local tps="$1" upd="$2" dir="$3"; shift 3
  local cmd=("$PYTHON" -m fairseq_cli.train "$DATA" --user-dir "$REPO_ROOT/localnmt"
    --task masked_lm --criterion masked_lm --arch "$ARCH" --sample-break-mode complete
    --tokens-per-sample "$tps" --max-positions 512 --batch-size "$BPG" --update-freq "$UF"
    --required-batch-size-multiple 1
    "${OPT_ARGS[@]}" --lr "$LR" --weight-decay 0.01 --clip-norm 0.0
    --lr-scheduler polynomial_decay --warmup-updates "$(( upd < 10000 ? upd / 10 : 10000 ))"
    --total-num-update "$upd" --max-update "$upd" --dropout 0.1 --attention-dropout 0.1
    --save-dir "$dir" --no-epoch-checkpoints --skip-invalid-size-inputs-valid-test "$@")
  [[ "$CPU" == 1 ]] && cmd+=(--cpu)
  [[ "$GPUS" -gt 1 && "$CPU" == 0 ]] && cmd+=(--distributed-world-size "$GPUS")
  cmd+=("${EXTRA[@]}")
  if [[ "$DRY_RUN" == 1 ]]; then printf '%q ' "${cmd[@]}"; echo; else "${cmd[@]}"; fi
}
phase 128 "$P1" "$SAVE_DIR/seq128"
phase 512 "$P2" "$SAVE_DIR/seq512" --restore-file "$SAVE_DIR/seq128/checkpoint_last.pt" \
  --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler
