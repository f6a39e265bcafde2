#!/usr/bin/env bash
# WAT17 Japanese-English (ASPEC-JE train-1 + train-2, dev, test; janome + Moses, BPE 32K).
# ASPEC is distributed on request (https://jipsti.jst.go.jp/aspec/): there is no download step.
# Usage:
#   data_prep/prepare_wat17_ja_en.sh ASPEC_JE_DIR WORKDIR [process options]
#   data_prep/prepare_wat17_ja_en.sh process --aspec-dir ASPEC_JE_DIR --workdir WORKDIR \
#       [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--workers N] [--separate]
# Needs janome (pip install janome). Every step is resumable.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
case "${1:-}" in
  process) exec "$PY" -m localnmt.data.wat17_ja_en "$@" ;;
  ""|-h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [ $# -lt 2 ]; then sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
ASPEC="$1"; WORK="$2"; shift 2
exec "$PY" -m localnmt.data.wat17_ja_en process --aspec-dir "$ASPEC" --workdir "$WORK" "$@"
