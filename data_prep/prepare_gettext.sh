#!/usr/bin/env bash
# Embedded offline corpus from the machine's gettext catalogs (no network needed).
# Usage: data_prep/prepare_gettext.sh --pair en-de|en-zh --workdir DIR
#            [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--max-train N] [--no-target-normalize]
# Resumable: rerun the same command to skip finished steps. Prints the data-bin path last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m localnmt.data.prepare_gettext "$@"
