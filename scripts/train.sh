#!/usr/bin/env bash
# Train one model with the papers' hyper-parameters (localnmt/runs/recipes.py).
#
#   scripts/train.sh --data BIN --save-dir DIR [--arch ARCH] [--size base|big|cpu|tiny]
#       [--max-tokens N] [--max-update N] [--layers N] [--gpus N] [--cpu] [--fp16|--bf16]
#       [--tokens-per-update N] [--separate-vocab]
#       [--nnodes N --node-rank R --master-addr HOST --master-port PORT]
#       [--user-dir DIR|--no-user-dir] [--log FILE] [--dry-run] [-- EXTRA fairseq-train ARGS]
#
# One GPU: plain process. Several GPUs (or nodes): torchrun, one process per GPU, fairseq's
# env:// distributed init. No GPU: CPU fallback (--cpu). --update-freq is chosen so that
# world_size * max_tokens * update_freq >= --tokens-per-update (default 8 GPUs x 4096 = 32768
# tokens; base/big recipes). --separate-vocab: separate source/target dictionaries (shares
# the decoder's input/output embeddings instead of all embeddings).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

DATA="" SAVE_DIR="" ARCH="localnmt_base" SIZE="base" MAX_TOKENS="" MAX_UPDATE="" LAYERS=""
GPUS="" FORCE_CPU=0 PRECISION="" NNODES=1 NODE_RANK=0 MASTER_ADDR_ARG="" MASTER_PORT_ARG=29500
USER_DIR="auto" LOG="" DRY_RUN=0 TOKENS_PER_UPDATE="" SEPARATE_VOCAB=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) DATA="$2"; shift 2 ;;
    --save-dir) SAVE_DIR="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --max-tokens) MAX_TOKENS="$2"; shift 2 ;;
    --max-update) MAX_UPDATE="$2"; shift 2 ;;
    --layers) LAYERS="$2"; shift 2 ;;
    --tokens-per-update) TOKENS_PER_UPDATE="$2"; shift 2 ;;
    --separate-vocab) SEPARATE_VOCAB=1; shift ;;
    --gpus) GPUS="$2"; shift 2 ;;
    --cpu) FORCE_CPU=1; shift ;;
    --fp16) PRECISION="--fp16"; shift ;;
    --bf16) PRECISION="--bf16"; shift ;;
    --nnodes) NNODES="$2"; shift 2 ;;
    --node-rank) NODE_RANK="$2"; shift 2 ;;
    --master-addr) MASTER_ADDR_ARG="$2"; shift 2 ;;
    --master-port) MASTER_PORT_ARG="$2"; shift 2 ;;
    --user-dir) USER_DIR="$2"; shift 2 ;;
    --no-user-dir) USER_DIR=""; shift ;;
    --log) LOG="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "train.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$DATA" && -n "$SAVE_DIR" ]] || { echo "train.sh: --data and --save-dir are required" >&2; exit 2; }

if [[ "$FORCE_CPU" == 1 ]]; then
  GPUS=0
elif [[ -z "$GPUS" ]]; then
  GPUS="$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')"
fi
if [[ "$GPUS" -gt 0 ]]; then WORLD=$((NNODES * GPUS)); else WORLD=1; fi

if [[ "$USER_DIR" == "auto" ]]; then
  USER_DIR=""
  if [[ -f "$REPO_ROOT/localnmt/__init__.py" ]] && "$PYTHON" -c 'import localnmt.models' 2>/dev/null; then
    USER_DIR="$("$PYTHON" -m localnmt.paths)"
  fi
fi

RECIPE_ARGS=(--size "$SIZE" --world-size "$WORLD")
[[ -n "$MAX_TOKENS" ]] && RECIPE_ARGS+=(--max-tokens "$MAX_TOKENS")
[[ -n "$MAX_UPDATE" ]] && RECIPE_ARGS+=(--max-update "$MAX_UPDATE")
[[ -n "$LAYERS" ]] && RECIPE_ARGS+=(--layers "$LAYERS")
[[ -n "$TOKENS_PER_UPDATE" ]] && RECIPE_ARGS+=(--tokens-per-update "$TOKENS_PER_UPDATE")
[[ "$SEPARATE_VOCAB" == 1 ]] && RECIPE_ARGS+=(--separate-vocab)
recipe_out="$("$PYTHON" "$REPO_ROOT/localnmt/runs/recipes.py" "${RECIPE_ARGS[@]}")"
mapfile -t HPARAMS <<<"$recipe_out"

ARGS=("$DATA" --arch "$ARCH" --save-dir "$SAVE_DIR" "${HPARAMS[@]}")
[[ -n "$USER_DIR" ]] && ARGS+=(--user-dir "$USER_DIR")
[[ "$GPUS" -eq 0 ]] && ARGS+=(--cpu)
[[ -n "$PRECISION" ]] && ARGS+=("$PRECISION")
ENTRY=(-m localnmt.runs.fairseq_entry train)

if [[ "$WORLD" -gt 1 ]]; then
  ARGS+=(--distributed-world-size "$WORLD")
  if [[ "$NNODES" -gt 1 ]]; then
    [[ -n "$MASTER_ADDR_ARG" ]] || { echo "train.sh: --master-addr needed with --nnodes" >&2; exit 2; }
    LAUNCH=(torchrun --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$GPUS"
            --master_addr "$MASTER_ADDR_ARG" --master_port "$MASTER_PORT_ARG")
  else
    LAUNCH=(torchrun --standalone --nnodes 1 --nproc_per_node "$GPUS")
  fi
  CMD=("${LAUNCH[@]}" "${ENTRY[@]}" "${ARGS[@]}" "${EXTRA[@]}")
else
  CMD=("$PYTHON" "${ENTRY[@]}" "${ARGS[@]}" "${EXTRA[@]}")
fi

if [[ "$DRY_RUN" == 1 ]]; then
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
mkdir -p "$SAVE_DIR"
LOG="${LOG:-$SAVE_DIR/train.log}"
echo "train.sh: world size $WORLD (gpus/node ${GPUS}, nodes $NNODES), log $LOG" >&2
"${CMD[@]}" 2>&1 | tee -a "$LOG"
