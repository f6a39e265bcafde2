#!/usr/bin/env bash
# WMT17 Chinese-English (News Commentary v12 + manual UN v1.0 and CWMT; newsdev2017/newstest2017).
# Usage:
#   data_prep/prepare_wmt17_zh_en.sh RAW_DIR WORKDIR [process options]   # download, then process
#   data_prep/prepare_wmt17_zh_en.sh download --dir RAW_DIR               # network step only
#   data_prep/prepare_wmt17_zh_en.sh process --raw-dir RAW_DIR --workdir WORKDIR \
#       [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--workers N] [--allow-missing-manual]
# Downloads resume (HTTP Range) and are checked against RAW_DIR/sha256-manifest.json.
# Processing reads only local files; every step is resumable.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
case "${1:-}" in
  download|process) exec "$PY" -m localnmt.data.wmt17_zh_en "$@" ;;
  ""|-h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [ $# -lt 2 ]; then sed -n '2,10p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
RAW="$1"; WORK="$2"; shift 2
"$PY" -m localnmt.data.wmt17_zh_en download --dir "$RAW"
exec "$PY" -m localnmt.data.wmt17_zh_en process --raw-dir "$RAW" --workdir "$WORK" "$@"
