#!/usr/bin/env bash
# benchmarks/svd_fault_replay.sh — issue 12's fault, replayed outside pytest (docs/evidence/svd.md "The CUDA fault of issue 12"):
# the seeds that fault in test_triton_cuda_no_host_sync, seed 1's batch halved down to the matrix, the kernel's
# device asserts (TRITON_DEBUG=1), the fused kernel's variants on that batch, the matrix itself.
# Run by `benchmarks/run_gpu.sh svd-fault` (log: svd-fault.log).
set -u
cd "$(dirname "$0")/.."
PR="${PYTHON:-python3} benchmarks/probe_svd_fault_data.py"
run() { echo "== $*"; timeout 60 $PR "$@" 2>&1 | grep -v Warning | tail -3; }
faults() { timeout 60 $PR "$@" 2>&1 | grep -q "FAULT\|Timeout"; }
for s in 1 13 14 5 2 3; do run --seed $s --case 1; done
lo=0; hi=512
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(( (lo + hi) / 2 ))
  if faults --seed 1 --case 1 --rows $lo:$mid; then hi=$mid
  elif faults --seed 1 --case 1 --rows $mid:$hi; then lo=$mid
  else echo "== neither half of rows $lo:$hi faults alone"; break; fi
done
echo "== bisected: seed 1 case 1 rows $lo:$hi"
echo "== TRITON_DEBUG=1 (the kernel's device asserts: _rank_desc's orders)"
TRITON_DEBUG=1 timeout 120 $PR --seed 1 --case 1 --rows $lo:$hi 2>&1 | grep -v Warning | tail -5
TRITON_DEBUG=1 timeout 120 $PR --seed 1 --case 1 2>&1 | grep -v Warning | tail -5
for v in reload=0 scatter=0 gather=1 joint=1 jacobi=slots mb=1 warps=2 warps=4; do run --seed 1 --case 1 --variant $v; done
${PYTHON:-python3} - <<PY
import torch
from benchmarks.probe_svd_fault_data import CASES
torch.manual_seed(1)
draws = [torch.randn(s, dtype=d, device="cuda") for s, d in CASES]
print("== rows $lo:$hi of seed 1 case 1:", draws[1][$lo:$hi].cpu().tolist())
PY
