#!/usr/bin/env bash
# scripts/gpu_check.sh — the Metal kernels on an NVIDIA GPU (issue 7), in one command.
#
# Two steps (the GPU machine has no clang):
#   here, with clang + ptxas:  python -m mpslinalg.emulator build --target cuda --out .cubins
#   on the GPU (carry .cubins): bash scripts/gpu_check.sh [--bench] [--quick-bench] [--bench-args="--repeat 5"]
#   (ROOFLINE_ROWS=graph|eager|both picks the benchmark rows, see benchmarks/bench_roofline.py)
#
# 1. every kernel test on the GPU: the emulator's kernel suite re-run on the cuda target
#    (tests/emulator/test_cuda_suite.py), dispatch/stream/fault/family tests
#    (tests/emulator/test_cuda_kernels.py) and the build-side tests (which skip without clang);
# 2. compute-sanitizer --tool racecheck and --tool synccheck over the emulator suite and each
#    family's kernel tests (only our kernels are instrumented: --kernel-name kns=mpsle_k; the
#    kernels launched are listed per tool in <tool>_launches.json), failing on any hazard; the
#    planted missing barrier must be *found* (a sanity check of the checker);
# 3. with --bench: benchmarks/bench_roofline.py (each kernel's fraction of the roofline).
#
# Logs and a summary go to $OUT (the device tool's folder) or /tmp/gpu_check. Exit status 1 if any
# step failed. Out-of-bounds tests run in a subprocess (a device trap kills the CUDA context).
set -u -o pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export MPSLINALG_CUBIN_DIR="${MPSLINALG_CUBIN_DIR:-$PWD/.cubins}"
export MPSLINALG_CACHE_DIR="${MPSLINALG_CACHE_DIR:-/tmp/mpslinalg-cache}"
export PYTHONUNBUFFERED=1
LOG=${OUT:-/tmp/gpu_check}
mkdir -p "$LOG"
SUMMARY="$LOG/gpu_check_summary.txt"
: >"$SUMMARY"
BENCH=0
BENCH_ARGS=()
for a in "$@"; do
  case "$a" in
    --bench) BENCH=1 ;;
    --quick-bench) BENCH=1; BENCH_ARGS+=(--quick) ;;
    --bench-args=*) BENCH=1; read -r -a more <<<"${a#--bench-args=}"; BENCH_ARGS+=("${more[@]}") ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
fail=0
note() { echo "$*" | tee -a "$SUMMARY"; }

note "== gpu_check $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
if [ ! -f "$MPSLINALG_CUBIN_DIR/index.json" ]; then
  note "FAIL: no prebuilt artifacts in $MPSLINALG_CUBIN_DIR (run the build step where clang is)"
  exit 1
fi
note "artifacts: $MPSLINALG_CUBIN_DIR ($(ls "$MPSLINALG_CUBIN_DIR"/*.json | wc -l) manifests)"

# ---- 1. every kernel test on the GPU ----------------------------------------------------------
t0=$(date +%s)
$PY -m pytest -q -p no:cacheprovider -m cuda -k "not racecheck" \
  tests/emulator/test_cuda_suite.py tests/emulator/test_cuda_kernels.py tests/emulator/test_cuda_build.py \
  >"$LOG/pytest_cuda.log" 2>&1
rc=$?
note "pytest (cuda target): rc=$rc, $(tail -1 "$LOG/pytest_cuda.log") [$(($(date +%s) - t0)) s]"
[ $rc -ne 0 ] && fail=1 && grep -E "^(FAILED|ERROR)" "$LOG/pytest_cuda.log" | head -40 | tee -a "$SUMMARY"

# ---- 2. race and synchronisation checks ------------------------------------------------------
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$SAN" ]; then
  note "SKIP sanitizer: compute-sanitizer not found"
else
  # sanity: the planted missing barrier must be reported at its .metal line
  t0=$(date +%s)
  $PY -m pytest -q -p no:cacheprovider -m cuda -k "racecheck" tests/emulator/test_cuda_kernels.py \
    >"$LOG/racecheck_planted.log" 2>&1
  rc=$?
  note "racecheck finds the planted race / clean on lu16: rc=$rc, $(tail -1 "$LOG/racecheck_planted.log") [$(($(date +%s) - t0)) s]"
  if grep -q "Device not supported" "$LOG/racecheck_planted.log"; then
    note "SKIP sanitizer: compute-sanitizer does not support the device on this machine's runtime (gVisor?)"
  else
    [ $rc -ne 0 ] && fail=1
    # one pytest process per tool over the emulator suite and every family's kernel tests
    # (tests that spawn subprocesses are left out: a trap test would report its planted fault)
    for tool in racecheck synccheck; do
      extra=()
      [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
      rm -f "$LOG/${tool}_launches.json"
      t0=$(date +%s)
      MPSLINALG_CUDA_LAUNCH_LOG="$LOG/${tool}_launches.json" \
        "$SAN" --tool "$tool" "${extra[@]}" --kernel-name kns=mpsle_k --print-limit 50 \
        $PY -m pytest -q -p no:cacheprovider -m cuda -k "not racecheck and not subprocess" \
        tests/emulator/test_cuda_suite.py tests/emulator/test_cuda_kernels.py >"$LOG/${tool}.log" 2>&1
      rc=$?
      summ=$(grep -E "(RACECHECK|ERROR) SUMMARY" "$LOG/${tool}.log" | tail -1)
      kern=$(grep -oE "mpsle_k[0-9]+_[A-Za-z0-9_]+" "$LOG/${tool}.log" | sort | uniq -c | tr '\n' ' ')
      nk=$($PY -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$LOG/${tool}_launches.json" 2>/dev/null)
      note "$tool: rc=$rc ${summ:-no summary}; $(tail -1 "$LOG/${tool}.log"); ${nk:-?} distinct Metal kernels launched (list: ${tool}_launches.json) [$(($(date +%s) - t0)) s]"
      [ -n "$kern" ] && note "  $tool reports name: $kern"
      if [ $rc -ne 0 ] || ! echo "$summ" | grep -qE "SUMMARY: 0 (hazards|errors)"; then fail=1; fi
    done
  fi
fi

# ---- 3. roofline -------------------------------------------------------------------------------
if [ $BENCH -eq 1 ]; then
  t0=$(date +%s)
  $PY benchmarks/bench_roofline.py --device cuda --out "$LOG" "${BENCH_ARGS[@]}" >"$LOG/bench_roofline.log" 2>&1
  rc=$?
  note "bench_roofline: rc=$rc [$(($(date +%s) - t0)) s] (tables: $LOG/roofline_cuda*.md, $LOG/roofline_kernels_cuda*.md)"
  [ $rc -ne 0 ] && fail=1
fi

note "== gpu_check: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
