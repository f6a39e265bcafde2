#!/usr/bin/env bash
# Your own parallel corpus, any language pair: raw text files → fairseq data-bin.
# Usage: data_prep/prepare_parallel.sh --src en --tgt de --train PREFIX --valid PREFIX \
#            --test PREFIX[,PREFIX...] --workdir W [--bpe subword_nmt|sentencepiece] \
#            [--bpe-merges N] [--separate] [--length-clean] [--pretokenized] [--no-target-normalize]
# PREFIX.en / PREFIX.de are line-aligned raw text (.gz accepted). Test sets become the subsets
# test, test1, ... in the order given; W/raw/<subset>.<lang> keeps the raw references.
# Resumable: rerun the same command to skip finished steps. Prints the data-bin path last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.data.parallel "$@"
