#!/usr/bin/env bash
# English pre-training text → fairseq masked_lm data-bin for the local-head BERTs
# (Pande et al. 2021, Table 4). Usage:
#   data_prep/prepare_pretrain_text.sh OUT TEXT [TEXT ...] [-- --bpe sentencepiece ...]
# TEXT: the user's local copy (plain or .gz), documents separated by blank lines.
# Writes OUT/bin (scripts/roberta_pretrain.sh --data OUT/bin) and OUT/bpe.codes, whose
# dictionary OUT/bin/dict.txt and codes data_prep/prepare_glue.sh must reuse. Resumable.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
if [ $# -lt 2 ]; then sed -n '2,7p' "${BASH_SOURCE[0]}" >&2; exit 2; fi
OUT="$1"; shift
TEXTS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do TEXTS+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
exec "$PY" -m localnmt.data.pretrain_text --out "$OUT" --text "${TEXTS[@]}" "$@"
