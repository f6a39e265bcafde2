#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through run_step (bash -c)
# Every GPU check of localnmt in one run, all results in one folder (issue 32):
#
#   scripts/gpu_check.sh [--out DIR] [--wheels DIR] [--archive FILE] [--python PY] [--dry-run]
#
# Steps, each under its own time limit (together 540 s: the run fits 9.5 minutes on one GPU),
# each writing <step>.log and its results into --out (default gpu_check_results/<time>):
#   setup       carried wheels (--wheels DIR: pip install --no-index --no-deps into a site
#               folder; the GPU image has Python 3.12 and a CUDA torch but no fairseq) and the
#               optional C extensions built in place
#   check       python -m localnmt.check, full mode             -> check.json, check.log
#   cuda_tests  pytest -m cuda tests/cuda (FlexAttention forward and backward against the
#               dense path, band kernel, folded Gaussian, fp16/bf16 training steps of every
#               method family)                                  -> cuda_tests.xml
#   bench_fp16  python -m bench.run --device cuda: training at 4096 tokens per batch and beam
#   bench_bf16  search, one catalog row per method family, in float16 / bfloat16
#                                                                -> bench_fp16/, bench_bf16/
#   quickstart  the quickstart's GPU sizing (--size cuda) for a 1.5-minute training budget
#                                                                -> quickstart_report.{json,md}
# summary.tsv lists each step's status, exit code and seconds; the exit status is 1 if any
# step failed. A step that fails or runs out of time does not stop the others.
#
# --dry-run (any machine, no GPU needed): checks the script's own steps instead of running
# them: every command exists and parses the options it would get (localnmt.check and
# bench.run with --dry-run, pytest with --collect-only, the quickstart's --help), and the time
# limits fit the budget.
#
# Wheels for the GPU image (Python 3.12, run where pip reaches PyPI):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl \
#     ve-fairseq==0.12.3 hydra-core omegaconf antlr4-python3-runtime==4.8 bitarray \
#     sacremoses subword-nmt
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
PYTHON=python3
OUT=""
WHEELS=""
ARCHIVE=""
DRY_RUN=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --wheels) WHEELS="$2"; shift 2 ;;
    --archive) ARCHIVE="$2"; shift 2 ;;
    --python) PYTHON="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) sed -n '3,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-gpu_check_results/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
WORK="${TMPDIR:-/tmp}/localnmt_gpu_check"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# carried wheels go to a site folder of their own (setup), read before anything installed
[[ -n "$WHEELS" ]] && export PYTHONPATH="$WORK/site:$PYTHONPATH"

#: seconds per step; their sum must stay within BUDGET (9 minutes, with room for the start)
BUDGET=540
# (seen on an H200, 2026-11-27: the check 98 s, tests/cuda 85-100 s, the bench 90 s a dtype
# for the 12 family rows below; the image has no gettext catalogs for the quickstart)
declare -A LIMIT=([setup]=45 [check]=100 [cuda_tests]=125 [bench_fp16]=100 [bench_bf16]=100
                  [quickstart]=70)
#: a dry run checks commands, not speed: each step may take this long on a slow, busy machine
DRY_LIMIT=300
STEPS=(setup check cuda_tests bench_fp16 bench_bf16 quickstart)

CHECK_ARGS=(--device cuda --json --out "$OUT/check.json")
PYTEST_ARGS=(-q -p no:cacheprovider -m cuda tests/cuda)
#: one catalog row per method family (baseline, Localness, relative positions, GMM, hard-coded
#: Gaussian, 1D/2D-CSAN, BI_DIRECT, NEIGHBOR, LOCAL_HARD, BLOCK, local heads)
FAMILY_ROWS=(vaswani2017/table-3/transformer-base/base yang2018/table-1/fixed/base
  shaw2018/table-1/relative-k-16/base zhang2021/table-2/our-method/base
  zhang2021/table-2/hard-code-gaussian/base yang2019/table-1/1d-csans/base
  yang2019/table-1/2d-csans/base yang2019/table-1/bi-direct/base yang2019/table-1/neighbor/base
  yang2019/table-1/local-hard/base yang2019/table-1/block/base
  pande2021/table-1/2locheads-all6-b/base)
bench_args() {  # $1: float16 | bfloat16
  echo --device cuda --dtype "$1" --sections train,generate --rows "${FAMILY_ROWS[@]}" \
    --max-tokens 4096 --lengths 32 --repeats 3 --warmup 1
}
QUICKSTART_ARGS=(--size cuda --budget-minutes 1.5 --max-train 20000 --bootstrap-samples 200
                 --workdir "$WORK/quickstart")

printf 'step\tstatus\texit\tseconds\n' > "$OUT/summary.tsv"
FAILED=0

run_step() {  # name, then a command or a function of this script: run it under the step's
  local name="$1"; shift  # limit, log its output, record its status
  local start rc status limit="${LIMIT[$name]}" shown="$*"
  (( DRY_RUN )) && limit=$DRY_LIMIT
  if declare -F "$1" > /dev/null; then  # timeout runs programs: a function goes through bash
    set -- bash -c "$(declare -p PYTHON WORK OUT WHEELS QUICKSTART_ARGS); $(declare -f "$1"); $1"
  fi
  start=$(date +%s)
  echo "[gpu_check $(date +%H:%M:%S)] $name (limit $limit s): ${shown:0:160}"
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    124|137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  [[ $status == PASS ]] || FAILED=1
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(( $(date +%s) - start ))" >> "$OUT/summary.tsv"
  echo "[gpu_check $(date +%H:%M:%S)] $name: $status (exit $rc)"
}

setup() {
  if [[ -n "$WHEELS" ]]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$WORK/site" "$WHEELS"/*.whl || return 1
  fi
  "$PYTHON" setup.py -q build_ext --inplace || echo "C extensions not built: torch ops run"
  "$PYTHON" -c "import torch, fairseq, localnmt; print(torch.__version__, torch.cuda.is_available())"
}

quickstart() {
  if ! compgen -G "/usr/share/locale/de/LC_MESSAGES/*.mo" > /dev/null; then
    echo "no gettext catalogs on this machine (the quickstart's offline corpus): not run"
    return 0
  fi
  "$PYTHON" -m localnmt.quickstart "${QUICKSTART_ARGS[@]}"
  local rc=$?
  for f in report.json report.md; do
    [[ -f "$WORK/quickstart/$f" ]] && cp "$WORK/quickstart/$f" "$OUT/quickstart_$f"
  done
  return "$rc"
}

dry_run() {  # each step's command, checked without running it
  local total=0 name
  for name in "${STEPS[@]}"; do total=$(( total + LIMIT[$name] )); done
  if (( total > BUDGET )); then
    echo "error: the step limits add up to $total s, over the budget of $BUDGET s" >&2
    return 1
  fi
  echo "step limits: $total s of $BUDGET s"
  if [[ -n "$WHEELS" ]] && ! compgen -G "$WHEELS/*.whl" > /dev/null; then
    echo "error: no wheels in $WHEELS" >&2
    return 1
  fi
  run_step setup "$PYTHON" -c "import setuptools, torch, fairseq, localnmt"
  run_step check "$PYTHON" -m localnmt.check "${CHECK_ARGS[@]}" --dry-run
  run_step cuda_tests "$PYTHON" -m pytest --collect-only "${PYTEST_ARGS[@]}"
  # shellcheck disable=SC2046
  run_step bench_fp16 "$PYTHON" -m bench.run $(bench_args float16) --dry-run
  # shellcheck disable=SC2046
  run_step bench_bf16 "$PYTHON" -m bench.run $(bench_args bfloat16) --dry-run
  run_step quickstart quickstart_options
}

quickstart_options() {  # the quickstart has no dry flag: its --help must list every option
  local help option
  help=$("$PYTHON" -m localnmt.quickstart --help) || return 1
  for option in "${QUICKSTART_ARGS[@]}"; do
    if [[ $option == --* ]] && ! grep -q -- "$option" <<< "$help"; then
      echo "error: the quickstart has no option $option" >&2
      return 1
    fi
  done
  echo "quickstart options ok: ${QUICKSTART_ARGS[*]}"
}

mkdir -p "$WORK"
if (( DRY_RUN )); then
  dry_run || FAILED=1
else
  run_step setup setup
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || echo "warning: torch sees no GPU: the CUDA steps will fail or skip" >&2
  run_step check "$PYTHON" -m localnmt.check "${CHECK_ARGS[@]}"
  run_step cuda_tests "$PYTHON" -m pytest "${PYTEST_ARGS[@]}" --junitxml "$OUT/cuda_tests.xml"
  # shellcheck disable=SC2046
  run_step bench_fp16 "$PYTHON" -m bench.run $(bench_args float16) --out "$OUT/bench_fp16"
  # shellcheck disable=SC2046
  run_step bench_bf16 "$PYTHON" -m bench.run $(bench_args bfloat16) --out "$OUT/bench_bf16"
  run_step quickstart quickstart
fi
if [[ -n "$ARCHIVE" ]]; then
  tar -czf "$ARCHIVE" -C "$OUT" . && echo "archive: $ARCHIVE"
fi
column -t -s $'\t' "$OUT/summary.tsv" 2>/dev/null || cat "$OUT/summary.tsv"
echo "results: $OUT"
exit $FAILED
