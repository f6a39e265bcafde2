#!/usr/bin/env bash
# NIST Chinese-English (LDC corpora, MT02 dev, MT03/04/05/06/08 tests with 4 references).
# The LDC data is licensed: there is no download step. Put the corpora, extracted to
# sentence-aligned text, as LDC_DIR/<name>.zh and <name>.en (LDC2002E18 LDC2003E07 LDC2003E14
# LDC2004T07[Hansards portion] LDC2004T08 LDC2005T06) and NIST_DIR/mtXX.zh, mtXX.ref0..3.
# Usage:
#   data_prep/prepare_nist_zh_en.sh LDC_DIR NIST_DIR WORKDIR [process options]
#   data_prep/prepare_nist_zh_en.sh process --ldc-dir D --nist-dir N --workdir W \
#       [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--workers N] [--separate]
# Score: python -m localnmt.evaluation.multi_ref --refs-dir W/refs --hyp mt03=FILE ...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
case "${1:-}" in
  process) exec "$PY" -m localnmt.data.nist_zh_en "$@" ;;
  ""|-h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
if [ $# -lt 3 ]; then sed -n '2,10p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
LDC="$1"; NIST="$2"; WORK="$3"; shift 3
exec "$PY" -m localnmt.data.nist_zh_en process --ldc-dir "$LDC" --nist-dir "$NIST" --workdir "$WORK" "$@"
