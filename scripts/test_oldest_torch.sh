#!/usr/bin/env bash
# The oldest torch setup.py admits (localnmt/torch_compat.py OLDEST), in a venv of its own, on
# the tests that load checkpoints and the fault tests: so that the admitted range stays true.
#   bash scripts/test_oldest_torch.sh [pytest args]      VENV=DIR to keep the venv elsewhere
# PyPI's torch 2.1.2 for Linux x86_64 is a CUDA build (about 4.7 GB with its nvidia wheels,
# 1-2 min to install here); it runs on the CPU. It was built against NumPy 1: numpy<2.
set -euo pipefail
cd "$(dirname "$0")/.."

OLDEST_TORCH="2.1.2"
VENV="${VENV:-${TMPDIR:-/tmp}/localnmt-oldest-torch}"
python -m venv "$VENV"
# torch pinned in the same command as the package, so that pip does not move it
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "torch==$OLDEST_TORCH" "numpy<2" -e ".[dev]"
"$VENV/bin/python" - "$OLDEST_TORCH" <<'PY'
import sys, torch
from localnmt import torch_compat
wanted = sys.argv[1]
assert torch.__version__.split("+")[0] == wanted, torch.__version__
assert torch_compat.version(wanted) == torch_compat.OLDEST, (wanted, torch_compat.OLDEST)
print(f"oldest admitted torch: {torch.__version__}")
PY

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
# the build's C kernels belong to the main install: the venv uses the same sources
"$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q -p no:cacheprovider \
  tests/faults tests/test_safe_load.py tests/test_torch_compat.py \
  tests/runs/test_average_checkpoints.py tests/test_translate.py "$@"
