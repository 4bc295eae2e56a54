#!/usr/bin/env bash
# benchmarks/run_gpu.sh — every benchmark of the project on a CUDA machine, in one command, with a
# time limit per step, results packed into one archive (the device tool returns at most 8 files).
#
#   here (clang):   python -m mpslinalg.emulator build --target cuda --out .cubins
#   on the GPU:     bash benchmarks/run_gpu.sh STEP...      (carry .cubins)
#
# STEPs: a family <f> (its benchmarks/bench_<f>.py, run as --device cuda --out DIR plus the flags of its
# "# run_gpu:" line), or det-grad matmul triangular-kernel triangular-tune lu-tune lu-small pinv-lstsq
# roofline main main-quick pytest gpucheck svd-fault
# Time limit per step: $STEP_LIMIT seconds (default 240), or LIMIT_<step> (dashes as _).
# Results: $OUT/gpu_results.tgz (markdown + JSON + logs) and $OUT/summary.md (the tables).
set -u -o pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export MPSLINALG_CUBIN_DIR="${MPSLINALG_CUBIN_DIR:-$PWD/.cubins}"
export MPSLINALG_CACHE_DIR="${MPSLINALG_CACHE_DIR:-/tmp/mpslinalg-cache}"
PY=${PYTHON:-python3}
OUTDIR=${OUT:-/tmp/gpu_out}
RES=/tmp/gpu_results
mkdir -p "$OUTDIR" "$RES"
LIMIT=${STEP_LIMIT:-240}
SUMMARY="$OUTDIR/summary.md"
: >"$SUMMARY"
step() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s) lim_var="LIMIT_${name//-/_}"
  timeout "${!lim_var:-$LIMIT}" "$@" >"$RES/$name.log" 2>&1
  local rc=$?
  { echo "## $name (rc=$rc, $(($(date +%s) - t0)) s)"; echo; grep -E '^\||PASS|FAIL|passed|failed|error' "$RES/$name.log" | head -80; echo; } >>"$SUMMARY"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$RES/gpu.txt" 2>&1
for s in "$@"; do
  case "$s" in
    det-grad) step det-grad bash -c "$PY benchmarks/bench_det_grad.py --device cuda --out $RES --quick && $PY -m pytest -q -p no:cacheprovider tests/lu/test_det_adjugate.py" ;;
    matmul) step matmul $PY benchmarks/bench_matmul.py --device cuda --out "$RES" ;;
    triangular-kernel) step triangular-kernel $PY benchmarks/bench_triangular.py --device cuda --out "$RES" --kernel ;;
    triangular-tune) step triangular-tune $PY benchmarks/bench_triangular.py --device cuda --out "$RES" --tune ;;
    lu-tune) step lu-tune $PY benchmarks/bench_lu.py --device cuda --out "$RES" --tune ;;
    lu-small) step lu-small $PY benchmarks/bench_lu_small.py --out "$RES" ;;
    pinv-lstsq) step pinv-lstsq $PY benchmarks/bench_pinv_lstsq.py --device cuda --out "$RES" ;;
    roofline) step roofline $PY benchmarks/bench_roofline.py --device cuda --out "$RES" ;;
    main) step main $PY -m mpslinalg --device cuda --json "$RES/main_cuda.json" ;;
    main-quick) step main-quick $PY -m mpslinalg --device cuda --quick --json "$RES/main_cuda_quick.json" ;;
    pytest) step pytest $PY -m pytest -q -p no:cacheprovider -m cuda tests ;;  # every CUDA test
    svd-fault) step svd-fault bash benchmarks/svd_fault_replay.sh ;;
    gpucheck) OUT="$RES/gpucheck" step gpucheck bash scripts/gpu_check.sh ;;
    *) if [ -f "benchmarks/bench_$s.py" ]; then  # a family's benchmark, by the recipe's file name;
         # its own extra flags on a line '# run_gpu: FLAGS' of the file
         extra=$(sed -n 's/^# run_gpu: //p' "benchmarks/bench_$s.py" | head -n 1)
         step "$s" $PY "benchmarks/bench_$s.py" --device cuda --out "$RES" $extra
       else echo "unknown step $s" >&2; fi ;;
  esac
done
tar czf "$OUTDIR/gpu_results.tgz" -C "$RES" .
cat "$SUMMARY"
