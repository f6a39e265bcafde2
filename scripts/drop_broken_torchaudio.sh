#!/usr/bin/env bash
# fairseq's package requires torchaudio, and pip installs its newest release (2.11), whose
# library does not load with torch 2.13 (OSError on import). Nothing in localnmt, nor the
# fairseq training and generation it runs, imports torchaudio; but transformers imports it
# whenever it is installed, so `from transformers import MarianMTModel` fails. Remove it
# where it does not import (pip check will then name fairseq's unmet requirement: harmless).
set -euo pipefail
PYTHON="${PYTHON:-python}"
if "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchaudio') is None)" \
    && ! "$PYTHON" -c "import torchaudio" >/dev/null 2>&1; then
  echo "torchaudio installed but does not import with this torch: uninstalling it"
  "$PYTHON" -m pip uninstall --quiet --yes torchaudio
fi
