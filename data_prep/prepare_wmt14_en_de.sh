#!/usr/bin/env bash
# WMT14 English-German (Europarl v7, Common Crawl, News Commentary v9; newstest2013/2014).
# Usage:
#   data_prep/prepare_wmt14_en_de.sh RAW_DIR WORKDIR [process options]   # download, then process
#   data_prep/prepare_wmt14_en_de.sh download --dir RAW_DIR               # network step only
#   data_prep/prepare_wmt14_en_de.sh process --raw-dir RAW_DIR --workdir WORKDIR \
#       [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--workers N] [--allow-missing-manual]
#       [--no-target-normalize]
# Downloads resume (HTTP Range) and are checked against RAW_DIR/sha256-manifest.json.
# Processing reads only local files; every step is resumable. Test sets: raw/test.* (full),
# raw/test_filtered.* = raw/test1.* (the filtered set, fairseq subset test1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
case "${1:-}" in
  download|process) exec "$PY" -m localnmt.data.wmt14_en_de "$@" ;;
  ""|-h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [ $# -lt 2 ]; then sed -n '2,11p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
RAW="$1"; WORK="$2"; shift 2
"$PY" -m localnmt.data.wmt14_en_de download --dir "$RAW"
exec "$PY" -m localnmt.data.wmt14_en_de process --raw-dir "$RAW" --workdir "$WORK" "$@"
