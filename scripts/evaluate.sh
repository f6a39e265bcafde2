#!/usr/bin/env bash
# Evaluate a checkpoint (or average the last N first) on a binarised test set.
#   scripts/evaluate.sh --data-bin BIN --checkpoint CKPT.pt --out DIR [--ref RAW_REF] [--src RAW_SRC]
#       [--baseline-hyp FILE] [--beam 4] [--lenpen 0.6] [--bpe subword_nmt|sentencepiece|none]
#   scripts/evaluate.sh --average-dir CKPT_DIR --average N [--by-update] --data-bin BIN --out DIR ...
# Everything except --average-dir/--average/--by-update goes to
# python -m localnmt.runs.evaluate; --user-dir defaults to the plugin when it imports.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"

AVG_DIR="" AVG_N="" BY_UPDATE=0 OUT="" HAS_USER_DIR=0
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --average-dir) AVG_DIR="$2"; shift 2 ;;
    --average) AVG_N="$2"; shift 2 ;;
    --by-update) BY_UPDATE=1; shift ;;
    --out) OUT="$2"; ARGS+=("$1" "$2"); shift 2 ;;
    --user-dir) HAS_USER_DIR=1; ARGS+=("$1" "$2"); shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[[ -n "$OUT" ]] || { echo "evaluate.sh: --out is required" >&2; exit 2; }

if [[ -n "$AVG_DIR" ]]; then
  mkdir -p "$OUT"
  KIND=--num-epoch-checkpoints
  [[ "$BY_UPDATE" == 1 ]] && KIND=--num-update-checkpoints
  "$PYTHON" -m localnmt.runs.average_checkpoints --inputs "$AVG_DIR" \
    "$KIND" "${AVG_N:-5}" --output "$OUT/checkpoint_avg.pt"
  ARGS+=(--checkpoint "$OUT/checkpoint_avg.pt")
fi
if [[ "$HAS_USER_DIR" == 0 && -f "$REPO_ROOT/localnmt/__init__.py" ]] \
    && "$PYTHON" -c 'import localnmt.models' 2>/dev/null; then
  ARGS+=(--user-dir "$("$PYTHON" -m localnmt.paths)")
fi
"$PYTHON" -m localnmt.runs.evaluate "${ARGS[@]}"
