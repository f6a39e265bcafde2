#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite (the README's test command).
#   bash scripts/test.sh [pytest args]      PYTEST_WORKERS=N to change parallelism
set -euo pipefail
cd "$(dirname "$0")/.."

# torch pinned in the same command, or pip pulls a multi-GB CUDA build for fairseq.
# The hf extra (transformers) makes tests/hf run.
python -m pip install --quiet --disable-pip-version-check "torch==2.13.0" -e ".[dev,hf]"
bash scripts/drop_broken_torchaudio.sh

if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing shellcheck (its test skips if this fails)"
  { apt-get update -qq && apt-get install -y -qq shellcheck; } >/dev/null 2>&1 || true
fi

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
ruff check .
python -m pytest -n "${PYTEST_WORKERS:-2}" -q "$@"
