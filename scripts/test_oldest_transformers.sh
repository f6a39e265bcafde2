#!/usr/bin/env bash
# The oldest transformers localnmt[hf] admits (localnmt/hf/versions.py OLDEST: the first release
# whose Marian, BART and M2M100 attention dispatch through AttentionInterface), in a venv of its
# own on top of the README's install, on the transformers tests: so that the admitted range
# stays true. Run it after scripts/test.sh (which installs torch, fairseq and the package).
#   bash scripts/test_oldest_transformers.sh [pytest args]     VENV=DIR to keep the venv elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

OLDEST_TRANSFORMERS="4.53.0"
VENV="${VENV:-${TMPDIR:-/tmp}/localnmt-oldest-transformers}"
# the main install's packages stay visible (torch, fairseq, the editable localnmt); only
# transformers and what it pins (tokenizers, huggingface-hub) are the venv's own. kernels too:
# an older transformers imports it whenever it is installed, and the main install's (pulled by
# a newer transformers) needs a huggingface-hub the older one does not admit; asked for here,
# pip picks a release that goes with the venv's pins.
python -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "transformers==$OLDEST_TRANSFORMERS" kernels
"$VENV/bin/python" - "$OLDEST_TRANSFORMERS" <<'PY'
import sys
import transformers
from localnmt.hf import versions
wanted = sys.argv[1]
assert transformers.__version__ == wanted, transformers.__version__
assert versions.release(wanted) == versions.OLDEST, (wanted, versions.OLDEST)
assert wanted in versions.TESTED, versions.TESTED
print(f"oldest admitted transformers: {transformers.__version__}")
PY

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
"$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q -p no:cacheprovider tests/hf "$@"

# T5 needs more (versions.T5_DISPATCH: the first release whose T5 attention dispatches through
# AttentionInterface); its tests again on that release, which had a bug of its own to cover
T5_DISPATCH="$("$VENV/bin/python" -c 'from localnmt.hf import versions; print(versions.T5_DISPATCH)')"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "transformers==$T5_DISPATCH" kernels
"$VENV/bin/python" -c "import transformers as t; assert t.__version__ == '$T5_DISPATCH', t.__version__"
echo "T5's oldest transformers: $T5_DISPATCH"
"$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q -p no:cacheprovider tests/hf/test_t5.py "$@"
