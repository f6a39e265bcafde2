#!/usr/bin/env bash
# WMT14 English-Russian (Common Crawl + News Commentary v9 + manual Yandex 1M;
# newstest2013 dev, newstest2014 and newstest2018 tests; Moses en/ru, joint BPE 32K).
# Usage:
#   data_prep/prepare_wmt_en_ru.sh RAW_DIR WORKDIR [process options]   # download, then process
#   data_prep/prepare_wmt_en_ru.sh download --dir RAW_DIR               # network step only
#   data_prep/prepare_wmt_en_ru.sh process --raw-dir RAW_DIR --workdir WORKDIR \
#       [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--workers N] [--allow-missing-manual]
# Training batch of Pande et al.: 25K tokens per update, by gradient accumulation:
#   fairseq-train ... --max-tokens 4096 --update-freq \
#     $(python -m localnmt.batching --world-size 1 --max-tokens 4096 --target-tokens 25000)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
case "${1:-}" in
  download|process) exec "$PY" -m localnmt.data.wmt_en_ru "$@" ;;
  ""|-h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [ $# -lt 2 ]; then sed -n '2,11p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
RAW="$1"; WORK="$2"; shift 2
"$PY" -m localnmt.data.wmt_en_ru download --dir "$RAW"
exec "$PY" -m localnmt.data.wmt_en_ru process --raw-dir "$RAW" --workdir "$WORK" "$@"
