#!/usr/bin/env bash
# Install the project (CPU torch pinned so pip does not pull a CUDA build), then run the
# offline quickstart: gettext En-De corpus, baseline + locality methods, BLEU report and plot.
#   scripts/quickstart.sh [--workdir DIR] [--budget-minutes N] [--skip-install] [...]
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
ARGS=()
SKIP_INSTALL=0
for arg in "$@"; do
  if [[ "$arg" == "--skip-install" ]]; then SKIP_INSTALL=1; else ARGS+=("$arg"); fi
done
if [[ "$SKIP_INSTALL" == 0 ]]; then
  (cd "$REPO_ROOT" && "$PYTHON" -m pip install "torch==2.13.0" -e .)
  PYTHON="$PYTHON" bash "$REPO_ROOT/scripts/drop_broken_torchaudio.sh"
fi
cd "$REPO_ROOT"
exec "$PYTHON" -m localnmt.quickstart "${ARGS[@]}"
